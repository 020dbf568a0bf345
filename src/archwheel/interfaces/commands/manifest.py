"""``archwheel manifest`` records tested wheels; ``archwheel verify`` proves a deployment."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archwheel.binary.scan.inputs import scan_path
from archwheel.binary.wheelmeta import (
    MAX_WARNINGS_SHOWN,
    NativeDigests,
    WheelMetadata,
    native_library_digests,
    read_wheel_metadata,
    sha256_file,
)
from archwheel.effects.files import (
    DocumentUnreadable,
    check_regular,
    open_regular,
    read_json,
    record_form,
    sha256_stream,
)
from archwheel.effects.host import PythonProbe
from archwheel.errors import InputError
from archwheel.facts.catalog import load_facts
from archwheel.interfaces.commands.options import (
    add_interpreter_option,
    check_output,
    write_output,
)
from archwheel.interfaces.render.common import FORMATS, emit_result, literal
from archwheel.interfaces.render.manifest import (
    MAX_MISMATCH_ROWS,
    verify_markdown,
    verify_table,
    wrote_manifest,
)
from archwheel.verdicts.manifest import (
    MAX_MANIFEST_BYTES,
    MAX_NESTING,
    FileFacts,
    InstalledEnvironment,
    VerifyReport,
    build_manifest,
    manifest_from_document,
    verify_environment,
    verify_files,
    wheel_entry,
)

MANIFEST_EXAMPLES = f"""\
examples:
  archwheel manifest dist/*.whl -o manifest.json
  archwheel manifest torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl      (JSON on stdout)

Native library hashes are taken from the libraries' bytes (what an installer writes to disk);
where the wheel's RECORD says otherwise, a warning on stderr says so, as it does for RECORD rows
naming files the wheel does not hold and libraries RECORD does not list.

exit codes: 0 written; 3 an unreadable wheel, or a manifest above the {MAX_MANIFEST_BYTES}
bytes verify reads (not written: record the wheels in several manifests)
"""

VERIFY_EXAMPLES = f"""\
examples:
  archwheel verify manifest.json                  the wheels next to the manifest
  archwheel verify manifest.json dist/*.whl       these files
  archwheel verify manifest.json --env            the running environment (no wheel files needed)
  archwheel verify manifest.json --env --interpreter /opt/venv/bin/python

Files are checked when wheels or --dir are given, or when --env is not. --env compares the
installed versions, torch.version.cuda, the nvidia-*/cuda-* pins and the bytes of every native
library with the tested wheels' hashes of them (--no-library-hashes skips the last).

exit codes: 0 everything matches; 1 mismatches (text and Markdown list {MAX_MISMATCH_ROWS},
--format json all); 3 unreadable manifest or wheel
(a manifest is a regular file of at most 16 MiB, nested at most 32 deep)
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    make = subparsers.add_parser(
        "manifest",
        help="record wheels (checksums, versions, CUDA pins, arch inventory) in a manifest",
        description=(
            "Per wheel: file name, sha256, size, name, version, tags, the CUDA version it "
            "targets, its nvidia-*/cuda-* requirement pins, cuDNN/NCCL versions, the sha256 "
            "of each native library's bytes and the arch inventory from the audit."
        ),
        epilog=MANIFEST_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    make.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL")
    make.add_argument("-o", "--output", type=Path, help="write here (default: stdout)")
    make.set_defaults(func=run_manifest)

    verify = subparsers.add_parser(
        "verify",
        help="check wheel files or the running environment against a manifest",
        description="List every difference between a manifest and the files or environment.",
        epilog=VERIFY_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verify.add_argument("manifest", type=Path)
    verify.add_argument("wheels", nargs="*", type=Path, metavar="WHEEL")
    verify.add_argument("--dir", type=Path, help="where the wheel files are")
    verify.add_argument("--env", action="store_true", help="check the installed environment")
    add_interpreter_option(verify, "the environment's interpreter")
    verify.add_argument(
        "--no-library-hashes",
        action="store_true",
        help="with --env: do not hash the installed native libraries",
    )
    verify.add_argument("--format", choices=FORMATS, default="table")
    verify.set_defaults(func=run_verify)


@dataclass(frozen=True)
class ManifestRequest:
    """``archwheel manifest``, parsed."""

    wheels: tuple[Path, ...]
    output: Path | None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ManifestRequest:
        return cls(wheels=tuple(args.wheels), output=args.output)


@dataclass(frozen=True)
class VerifyRequest:
    """``archwheel verify``, parsed."""

    manifest: Path
    wheels: tuple[Path, ...]
    dir: Path | None
    env: bool
    interpreter: str | None
    library_hashes: bool
    format: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> VerifyRequest:
        return cls(
            manifest=args.manifest,
            wheels=tuple(args.wheels),
            dir=args.dir,
            env=args.env,
            interpreter=args.interpreter,
            library_hashes=not args.no_library_hashes,
            format=args.format,
        )


def run_manifest(args: argparse.Namespace) -> int:
    request = ManifestRequest.from_args(args)
    if request.output is not None:
        check_output(request.output)  # before hashing and scanning every wheel
    document, count = manifest_document(request.wheels)
    text = json.dumps(document, indent=2) + "\n"
    size = len(text.encode("utf-8"))
    if size > MAX_MANIFEST_BYTES:
        # verify reads at most this much: a manifest it would refuse is not written.
        raise InputError(
            f"the manifest of these {count} wheels would be {size} bytes, above the "
            f"{MAX_MANIFEST_BYTES} that verify reads; not written",
            hint="record the wheels in several manifests",
        )
    if request.output is None:
        sys.stdout.write(text)
        return 0
    write_output(request.output, text)
    print(wrote_manifest(request.output, count))
    return 0


def manifest_document(wheels: tuple[Path, ...]) -> tuple[dict[str, Any], int]:
    """The manifest of ``wheels`` and how many wheels it lists."""
    entries = []
    for path in wheels:
        try:
            check_regular(path, path.stat())
        except FileNotFoundError:
            raise InputError(f"{path}: no such file", hint="manifest takes wheel files") from None
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
        metadata = read_wheel_metadata(path)
        for warning in metadata.warnings:
            print(f"archwheel: warning: {literal(path.name)}: {literal(warning)}", file=sys.stderr)
        inventory = scan_path(path, digests=True)  # hashed as they are inflated
        digests = native_library_digests(path, inventory.member_digests)
        for warning in _digest_warnings(metadata, digests):
            print(f"archwheel: warning: {literal(path.name)}: {literal(warning)}", file=sys.stderr)
        entries.append(
            wheel_entry(
                path.name,
                sha256_file(path),
                path.stat().st_size,
                metadata,
                inventory,
                native_libraries=digests.hashes,
            )
        )
    return build_manifest(entries, load_facts().facts_version), len(entries)


def _digest_warnings(metadata: WheelMetadata, digests: NativeDigests) -> list[str]:
    """Where the libraries' bytes and RECORD disagree, and the libraries not hashed."""
    recorded = metadata.native_library_hashes
    differ = sorted(n for n, h in digests.hashes.items() if n in recorded and recorded[n] != h)
    warnings = [
        f"{name}: cannot be read ({why}): its hash is not recorded"
        for name, why in digests.unreadable[:MAX_WARNINGS_SHOWN]
    ]
    if len(digests.unreadable) > MAX_WARNINGS_SHOWN:
        warnings.append(
            f"... and {len(digests.unreadable) - MAX_WARNINGS_SHOWN} more libraries that cannot "
            "be read (no hash recorded)"
        )
    if differ:
        warnings.append(
            f"RECORD's sha256 of {len(differ)} native libraries is not the hash of their bytes "
            f"(first: {differ[0]}; the wheel was changed after it was built?): the manifest "
            "records the bytes' hashes"
        )
    return warnings


def _file_facts(path: Path) -> FileFacts | None:
    """Size and sha256 of a regular file; None when it is missing or not a regular file."""
    try:
        with open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            return FileFacts(str(path), size, sha256_stream(handle))
    except OSError:
        return None


def record_hash(path: str) -> str | None:
    """RECORD's hash form of a file: ``sha256=`` + urlsafe base64 without padding."""
    try:
        with open_regular(path) as handle:
            return record_form(sha256_stream(handle))
    except OSError:
        return None


def run_verify(args: argparse.Namespace) -> int:
    request = VerifyRequest.from_args(args)
    report = verify(request)
    emit_result(request.format, report, verify_table, verify_markdown)
    return report.exit_code


def verify(request: VerifyRequest) -> VerifyReport:
    """Every difference between the manifest and the files, the environment, or both."""
    try:
        document = read_json(request.manifest, MAX_MANIFEST_BYTES, MAX_NESTING)
    except DocumentUnreadable as exc:
        raise InputError(
            f"{request.manifest}: {exc}", hint="verify reads what archwheel manifest writes"
        ) from None
    manifest = manifest_from_document(document, str(request.manifest))
    check_files = bool(request.wheels) or request.dir is not None or not request.env
    mismatches = []
    files_checked: list[str] = []
    if check_files:
        by_name: dict[str, Path] = {}
        if request.wheels:
            by_name = {p.name: p for p in request.wheels}
        else:
            folder = request.dir or request.manifest.parent
            by_name = {w["file"]: folder / w["file"] for w in manifest["wheels"]}
        found: dict[str, FileFacts | None] = {}
        for wheel in manifest["wheels"]:
            path = by_name.get(wheel["file"])
            facts = _file_facts(path) if path is not None else None
            found[wheel["file"]] = facts
            if facts is None:
                continue
            files_checked.append(str(path))
        listed = {w["file"] for w in manifest["wheels"]}
        extra = sorted(name for name in by_name if name not in listed)
        mismatches.extend(verify_files(manifest, found, extra))
    environment: str | None = None
    if request.env:
        names = tuple(str(w["name"]) for w in manifest["wheels"])
        probed = PythonProbe(request.interpreter, also=names).probe()
        if probed.errors:
            raise InputError(
                "cannot inspect the environment: " + "; ".join(e.message for e in probed.errors)
            )
        environment = probed.python
        installed = InstalledEnvironment(
            python=probed.python,
            python_version=probed.python_version,
            distributions=probed.distributions,
            native_files={k: dict(v) for k, v in probed.native_files.items()},
            torch_cuda=probed.torch.cuda,
            torch_import_error=probed.torch.import_error,
        )
        hasher = record_hash if request.library_hashes else None
        mismatches.extend(verify_environment(manifest, installed, hasher))
    return VerifyReport(
        manifest=str(request.manifest),
        files_checked=tuple(files_checked),
        environment=environment,
        libraries_hashed=request.env and request.library_hashes,
        mismatches=tuple(mismatches),
    )
