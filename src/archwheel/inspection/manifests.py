"""The manifest of tested wheels (``archwheel manifest``) and the proof that a deployment holds
them (``archwheel verify``): the files and environment read here, judged by
``verdicts.manifest``."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
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
    check_regular,
    open_regular,
    read_document,
    record_form,
    sha256_stream,
)
from archwheel.effects.host import PythonProbe
from archwheel.errors import InputError
from archwheel.facts.catalog import load_facts
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
from archwheel.verdicts.wheelname import HINT as WHEEL_NAME_HINT
from archwheel.verdicts.wheelname import name_version_disagreement

# Called with (the wheel's file name, a warning about it) while the manifest is made.
OnWarning = Callable[[str, str], None]


@dataclass(frozen=True)
class Manifest:
    """A manifest as ``verify`` reads it: its JSON text and how many wheels it lists."""

    text: str
    wheels: int


def make_manifest(wheels: Sequence[Path], *, on_warning: OnWarning | None = None) -> Manifest:
    """The manifest of ``wheels``; ``InputError`` for an unreadable wheel, or when the manifest
    would be larger than ``verify`` reads (``MAX_MANIFEST_BYTES``: it is not made).

    ``on_warning(file_name, text)`` hears, as each wheel is read, where its RECORD and its
    libraries' bytes disagree and the libraries that could not be hashed."""
    document, count = manifest_document(wheels, on_warning)
    text = json.dumps(document, indent=2) + "\n"
    size = len(text.encode("utf-8"))
    if size > MAX_MANIFEST_BYTES:
        # verify reads at most this much: a manifest it would refuse is not written.
        raise InputError(
            f"the manifest of these {count} wheels would be {size} bytes, above the "
            f"{MAX_MANIFEST_BYTES} that verify reads; not written",
            hint="record the wheels in several manifests",
        )
    return Manifest(text, count)


def manifest_document(
    wheels: Sequence[Path], on_warning: OnWarning | None = None
) -> tuple[dict[str, Any], int]:
    """The manifest of ``wheels`` and how many wheels it lists."""
    warn = on_warning or (lambda name, text: None)
    entries = []
    for path in wheels:
        try:
            check_regular(path, path.stat())
        except FileNotFoundError:
            raise InputError(f"{path}: no such file", hint="manifest takes wheel files") from None
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
        metadata = read_wheel_metadata(path)
        disagreement = name_version_disagreement(metadata.filename, metadata.name, metadata.version)
        if disagreement is not None:  # a manifest records what pip would install
            raise InputError(f"{path}: {disagreement}", hint=WHEEL_NAME_HINT)
        for warning in metadata.warnings:
            warn(path.name, warning)
        inventory = scan_path(path, digests=True)  # hashed as they are inflated
        digests = native_library_digests(path, inventory.member_digests)
        for warning in _digest_warnings(metadata, digests):
            warn(path.name, warning)
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


def _unreadable_manifest(message: str) -> InputError:
    """A manifest verify cannot read: ``{file}: {problem}``, and what verify reads."""
    return InputError(message, hint="verify reads what archwheel manifest writes")


def verify_manifest(
    manifest_path: Path,
    wheels: Sequence[Path] = (),
    *,
    folder: Path | None = None,
    env: bool = False,
    interpreter: str | None = None,
    library_hashes: bool = True,
) -> VerifyReport:
    """Every difference between the manifest and the files, the environment, or both.

    Files are checked when ``wheels`` or ``folder`` are given, or when ``env`` is not (then the
    wheels next to the manifest); ``env`` checks the environment of ``interpreter`` (default:
    this one), hashing its native libraries unless ``library_hashes`` is false."""
    document, _ = read_document(
        manifest_path, MAX_MANIFEST_BYTES, MAX_NESTING, error=_unreadable_manifest
    )
    manifest = manifest_from_document(document, str(manifest_path))
    check_files = bool(wheels) or folder is not None or not env
    mismatches = []
    files_checked: list[str] = []
    if check_files:
        by_name: dict[str, Path] = {}
        if wheels:
            by_name = {p.name: p for p in wheels}
        else:
            where = folder or manifest_path.parent
            by_name = {w["file"]: where / w["file"] for w in manifest["wheels"]}
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
    if env:
        names = tuple(str(w["name"]) for w in manifest["wheels"])
        probed = PythonProbe(interpreter, also=names).probe()
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
        hasher = record_hash if library_hashes else None
        mismatches.extend(verify_environment(manifest, installed, hasher))
    return VerifyReport(
        manifest=str(manifest_path),
        files_checked=tuple(files_checked),
        environment=environment,
        libraries_hashed=env and library_hashes,
        mismatches=tuple(mismatches),
    )
