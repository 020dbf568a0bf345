"""diff: what a new build gained and lost against an old one (``archwheel diff``,
``archwheel.diff``). Each side is a wheel, a library or a directory (scanned and audited here),
or a document written by ``archwheel audit --format json`` (read and checked here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from archwheel.binary.scan.inputs import scan_path
from archwheel.binary.wheelmeta import read_wheel_metadata
from archwheel.effects.files import read_document
from archwheel.errors import InputError, UsageError
from archwheel.text import literal
from archwheel.verdicts.audit import audit
from archwheel.verdicts.diff import (
    DiffReport,
    Side,
    check_audit_document,
    diff,
    side_from_audit,
)

MAX_DOCUMENT_BYTES = 64 << 20
MAX_NESTING = 32  # lists and objects inside each other (an audit report nests 8 deep)


def diff_builds(old: Path, new: Path) -> DiffReport:
    """The archs, sizes, versions and CUDA pins ``new`` gained and lost against ``old``."""
    return diff(read_side(old), read_side(new))


def read_side(path: Path) -> Side:
    """One side of a diff: an audit document (``.json``), else the input scanned and audited
    (for a wheel also its version, CUDA runtime, torch requirement and CUDA pins)."""
    if path.suffix == ".json":
        return side_from_document(path)
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


def _unreadable(message: str) -> InputError:
    """A document diff cannot read: ``{file}: {problem}``, and what diff reads."""
    return InputError(message, hint="diff reads the reports of archwheel audit --format json")


def side_from_document(path: Path) -> Side:
    """One side of a diff from an ``archwheel audit --format json`` document of one input;
    ``InputError`` (one line) for anything else, ``UsageError`` for a document of several."""
    document, _ = read_document(path, MAX_DOCUMENT_BYTES, MAX_NESTING, error=_unreadable)
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
    check_audit_document(document, str(path))  # its version, types and ranges, before use
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
