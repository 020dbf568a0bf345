"""``archwheel diff OLD NEW``: what a new build gained and lost, as a CI regression gate."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from archwheel.binary.scan.inputs import scan_path
from archwheel.binary.wheelmeta import read_wheel_metadata
from archwheel.effects.files import DocumentUnreadable, read_json
from archwheel.errors import InputError, UsageError
from archwheel.interfaces.render.common import FORMATS, console, dump_json, literal
from archwheel.interfaces.render.diff import render_markdown, render_table
from archwheel.verdicts.audit import audit
from archwheel.verdicts.diff import Side, diff, side_from_audit

DESCRIPTION = """\
Compare two builds: two wheels (or libraries, directories), or two documents written by
`archwheel audit --format json`. Per library: SASS/PTX archs added and dropped, stored size per
arch before and after, libraries that gained or lost device code; for wheels also the version,
the CUDA runtime, the torch requirement and the nvidia-*/cuda-* pins that changed.

exit codes: 0 no arch lost; 1 an arch OLD had is missing in NEW (a library present on both
sides dropped it, or it is gone from the whole build); 3 an input could not be read completely;
2 usage error."""

EXAMPLES = """\
examples:
  archwheel diff dist-old/myext-1.0-*.whl dist/myext-1.1-*.whl
  archwheel audit old.whl --format json -o old.json && archwheel diff old.json new.whl
  archwheel diff old.json new.json --format markdown >> $GITHUB_STEP_SUMMARY
"""

MAX_DOCUMENT_BYTES = 64 << 20
MAX_NESTING = 32  # lists and objects inside each other (an audit report nests 8 deep)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "diff",
        help="compare the device code, versions and CUDA pins of two builds (CI gate)",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("old", type=Path, metavar="OLD", help="wheel, library, directory or audit JSON")
    p.add_argument("new", type=Path, metavar="NEW", help="wheel, library, directory or audit JSON")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")
    p.set_defaults(func=run)


def _from_document(path: Path) -> Side:
    try:
        document = read_json(path, MAX_DOCUMENT_BYTES, MAX_NESTING)
    except DocumentUnreadable as exc:
        raise InputError(
            f"{path}: {exc}", hint="diff reads the reports of archwheel audit --format json"
        ) from None
    if not isinstance(document, dict):
        document = {}
    inputs = document.get("inputs")
    if not isinstance(inputs, list) or not all(isinstance(i, dict) for i in inputs):
        raise InputError(
            f"{path}: not an audit document (no 'inputs' list)",
            hint="write one with archwheel audit WHEEL --format json",
        )
    # Other archwheel reports have an 'inputs' list too (can-run's, can-load's): read as an
    # audit, one would be an empty build, and "no arch lost" a gate passed on the wrong file.
    kind = document.get("kind")
    if kind is not None or not all(isinstance(document.get(k), bool) for k in ("ok", "complete")):
        what = f" but a {literal(kind)[:40]} report" if isinstance(kind, str) else ""
        raise InputError(
            f"{path}: not an audit document{what} (no 'ok' and 'complete' verdicts)",
            hint="write one with archwheel audit WHEEL --format json",
        )
    if len(inputs) != 1:
        raise UsageError(f"{path}: holds {len(inputs)} audited inputs; diff compares one with one")
    entry: dict[str, Any] = inputs[0]
    if not isinstance(entry.get("libraries"), list) or not isinstance(entry.get("complete"), bool):
        raise InputError(
            f"{path}: not an audit document (its input has no 'libraries' list or no "
            "'complete' verdict)",
            hint="write one with archwheel audit WHEEL --format json",
        )
    try:
        versions: dict[str, str] | None = None
        metadata = entry.get("metadata")
        file_name = metadata.get("file") if isinstance(metadata, dict) else None
        name = str(file_name or entry.get("source", ""))
        name = name.rsplit("/", 1)[-1]
        if name.endswith(".whl"):
            try:
                versions = {"version": str(parse_wheel_filename(name)[1])}
            except InvalidWheelFilename:
                versions = None
        return side_from_audit(str(path.name), entry, versions)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path}: malformed audit document ({exc})") from None


def _from_input(path: Path) -> Side:
    if path.suffix == ".json":
        return _from_document(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    inventory = scan_path(path)
    report = audit(inventory, None)
    versions: dict[str, str] | None = None
    pins: dict[str, str] = {}
    if path.is_file() and path.suffix == ".whl":
        meta = read_wheel_metadata(path)
        versions = {"version": meta.version}
        if meta.cuda_runtime is not None:
            versions["CUDA runtime"] = str(meta.cuda_runtime)
        elif meta.cuda_major is not None:
            versions["CUDA runtime"] = f"{meta.cuda_major}.x"
        for pin in meta.requires:
            if pin.name == "torch" and not pin.is_optional:
                versions["requires torch"] = pin.specifier or "(any)"
        pins = {p.name: p.specifier or "(any)" for p in meta.cuda_pins}
    return side_from_audit(
        path.name,
        report.to_json_dict(),
        versions,
        pins,
        frozenset(lib.path for lib in inventory.libraries),
    )


def run(args: argparse.Namespace) -> int:
    old = _from_input(args.old)
    new = _from_input(args.new)
    report = diff(old, new)
    if args.format == "json":
        dump_json(report.to_json())
    elif args.format == "markdown":
        sys.stdout.write(render_markdown(report))
    else:
        render_table(report, console())
    return report.exit_code
