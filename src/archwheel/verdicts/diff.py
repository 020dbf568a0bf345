"""What changed between two builds: device code per library, versions and CUDA pins.

Both sides are audit documents' inputs (``AuditReport.to_json_dict()``, or one input of a saved
``archwheel audit --format json``), plus what the wheel's metadata says where a wheel was given.
Libraries are matched by path, with auditwheel's 8-hex-digit hash removed from file names
(``libcudart.faf08d9a.so.13`` is ``libcudart.so.13`` on both sides).

The regression rule (exit 1): a library present on both sides lost an arch (SASS or PTX) it had,
or an arch present anywhere in OLD is absent from all of NEW (a library with device code that
disappeared takes its archs with it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from archwheel.errors import InputError
from archwheel.exit_codes import EXIT_INCOMPLETE, EXIT_OK, EXIT_VERDICT_FAILED
from archwheel.facts.documents import Table
from archwheel.facts.typed import NonBlank, decode, missing_or_not
from archwheel.verdicts.audit import AUDIT_SCHEMA_VERSION
from archwheel.verdicts.document import document_header

_HASHED = re.compile(r"\.[0-9a-f]{8}(?=\.so)")


def library_key(path: str) -> str:
    """``path`` without auditwheel's 8-hex-digit hash (``libcudart.faf08d9a.so.13`` is
    ``libcudart.so.13``), so the same library matches on both sides."""
    return _HASHED.sub("", path)


@dataclass(frozen=True)
class ArchSize:
    """What one arch of one library costs: its kind and its stored and uncompressed bytes."""

    kind: str  # "sass", "ptx", "lto"
    stored_bytes: int
    uncompressed_bytes: int


@dataclass(frozen=True)
class Side:
    """One build: its libraries' device code and what its metadata says."""

    label: str
    libraries: Mapping[str, Mapping[str, ArchSize]]  # library key -> arch -> size
    complete: bool = True
    versions: Mapping[str, str] = field(default_factory=dict)  # "version", "cuda", "torch"...
    pins: Mapping[str, str] = field(default_factory=dict)  # nvidia-* name -> specifier
    has_metadata: bool = False
    binaries: frozenset[str] = frozenset()  # every library key, device code or not (wheels)

    @property
    def archs(self) -> set[str]:
        """Every arch present in any library of this side."""
        return {a for lib in self.libraries.values() for a in lib}


def side_from_audit(
    label: str,
    document_input: Mapping[str, Any],
    versions: Mapping[str, str] | None = None,
    pins: Mapping[str, str] | None = None,
    binaries: frozenset[str] = frozenset(),
) -> Side:
    """One side of a diff from one input of an audit document (``to_json_dict``'s, or one read
    from a file and checked by ``check_audit_document``): a value of the wrong type is a
    ``ValueError`` naming where (``... - at `$.libraries[0].path```)."""
    try:
        given = msgspec.convert(document_input, _Input, strict=True)
    except msgspec.ValidationError as exc:
        raise ValueError(str(exc)) from None
    libraries: dict[str, dict[str, ArchSize]] = {}
    for lib in given.libraries:
        archs: dict[str, ArchSize] = {}
        for image in lib.images:
            old = archs.get(image.arch, ArchSize(image.kind, 0, 0))
            archs[image.arch] = ArchSize(
                image.kind,
                image.stored_bytes + old.stored_bytes,
                image.uncompressed_bytes + old.uncompressed_bytes,
            )
        if archs:
            libraries[library_key(lib.path)] = archs
    return Side(
        label,
        libraries,
        given.complete,
        dict(versions or {}),
        dict(pins or {}),
        versions is not None,
        frozenset(library_key(b) for b in binaries),
    )


# The largest byte count or number a document may say (JSON numbers have no bound of their own).
MAX_COUNT = (1 << 63) - 1
# An audit document's counts (audit.schema.json), each a whole number from its least value.
_Count = Annotated[int, Meta(ge=0, le=MAX_COUNT)]
_Positive = Annotated[int, Meta(ge=1, le=MAX_COUNT)]
_Verdict = Annotated[bool, missing_or_not("bool")]
_SEVERITIES = ("error", "warning")
_Severity = Annotated[
    str,
    Meta(
        pattern=f"^({'|'.join(_SEVERITIES)})$", extra={"invalid": "must be one of error, warning"}
    ),
]


class _Image(msgspec.Struct, frozen=True, kw_only=True):
    """One image of a library (``inputs[0].libraries[0].images[0]``)."""

    arch: NonBlank
    kind: str = ""
    count: _Positive = 1
    stored_bytes: _Count = 0
    uncompressed_bytes: _Count = 0


class _Library(msgspec.Struct, frozen=True, kw_only=True):
    """One library with device code, and its images."""

    path: NonBlank
    size: _Count = 0
    containers: _Count = 0
    raw_cubins: _Count = 0
    images: tuple[_Image, ...] = ()


class _Arch(msgspec.Struct, frozen=True, kw_only=True):
    """One arch's totals over the input."""

    libraries: _Positive = 1
    entries: _Positive = 1
    stored_bytes: _Count = 0
    uncompressed_bytes: _Count = 0


class _Problem(msgspec.Struct, frozen=True, kw_only=True):
    """One problem the audit found."""

    message: str
    severity: _Severity = "error"


class _Input(msgspec.Struct, frozen=True, kw_only=True):
    """One audited input: its verdict, its counts, libraries, archs and problems."""

    source: str
    complete: _Verdict
    binaries_scanned: _Count = 0
    bytes_scanned: _Count = 0
    libraries: tuple[_Library, ...]
    archs: tuple[_Arch, ...] = ()
    problems: tuple[_Problem, ...] = ()


class _AuditDocument(msgspec.Struct, frozen=True, kw_only=True):
    """What ``diff`` reads of an audit document; the keys it does not read are kept unread."""

    schema_version: Annotated[int, Meta(ge=AUDIT_SCHEMA_VERSION, le=AUDIT_SCHEMA_VERSION)]
    ok: _Verdict
    complete: _Verdict
    exit_code: Annotated[int, Meta(ge=0, le=255)] = 0
    inputs: tuple[_Input, ...]


def check_audit_document(document: Mapping[str, Any], origin: str) -> None:
    """An ``archwheel audit --format json`` document checked against what its schema says
    (``interfaces/schema/audit.schema.json``) before anything is read from it: its
    ``schema_version``, the verdicts' types, and every count a whole number in its range.
    Every refusal is one ``InputError`` naming the file, the key and what was expected
    (``{file}: inputs[0].libraries[1].size must be an integer, not 'many'``)."""
    decode(Table(document, origin, InputError), _AuditDocument)


@dataclass(frozen=True)
class LibraryChange:
    """How one library changed between the sides: its status, the archs added and dropped, and the
    stored size of each arch before and after."""

    path: str
    status: str  # "changed", "same", "gained device code", "lost device code" ...
    added: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    sizes: tuple[tuple[str, int | None, int | None], ...] = ()  # arch, before, after (stored)


@dataclass(frozen=True)
class DiffReport:
    """What changed between two builds: per library, in versions and in CUDA pins, and the archs
    gone; ``regression`` decides the exit code."""

    old: Side
    new: Side
    libraries: tuple[LibraryChange, ...]
    version_changes: tuple[tuple[str, str | None, str | None], ...]  # key, before, after
    pin_changes: tuple[tuple[str, str | None, str | None], ...]
    archs_gone: tuple[str, ...]  # in OLD, nowhere in NEW

    @property
    def regression(self) -> bool:
        """A library on both sides lost an arch, or an arch of OLD is nowhere in NEW (exit 1)."""
        return bool(self.archs_gone) or any(
            c.dropped for c in self.libraries if c.status != "removed"
        )

    @property
    def exit_code(self) -> int:
        """1 on a regression, else 3 when a side was incomplete, else 0."""
        if self.regression:
            return EXIT_VERDICT_FAILED
        if not (self.old.complete and self.new.complete):
            return EXIT_INCOMPLETE
        return EXIT_OK

    def to_json(self) -> dict[str, Any]:
        """The diff JSON document."""
        return {
            **document_header(1),
            "old": self.old.label,
            "new": self.new.label,
            "regression": self.regression,
            "exit_code": self.exit_code,
            "complete": self.old.complete and self.new.complete,
            "archs_gone": list(self.archs_gone),
            "libraries": [
                {
                    "path": c.path,
                    "status": c.status,
                    "added": list(c.added),
                    "dropped": list(c.dropped),
                    "sizes": [{"arch": a, "before": b, "after": n} for a, b, n in c.sizes],
                }
                for c in self.libraries
            ],
            "versions": [{"key": k, "before": b, "after": a} for k, b, a in self.version_changes],
            "pins": [{"name": k, "before": b, "after": a} for k, b, a in self.pin_changes],
        }


def _arch_order(arch: str) -> tuple[int, int, str]:
    m = re.search(r"([0-9]+)", arch)
    kind = 0 if arch.startswith("sm_") else 1 if arch.startswith("compute_") else 2
    return (kind, int(m.group(1)) if m else 0, arch)


def diff(old: Side, new: Side) -> DiffReport:
    """Compare two builds library by library (matched by ``library_key``), then their versions and
    pins."""
    changes: list[LibraryChange] = []
    for path in sorted(set(old.libraries) | set(new.libraries)):
        before = old.libraries.get(path, {})
        after = new.libraries.get(path, {})
        added = tuple(sorted(set(after) - set(before), key=_arch_order))
        dropped = tuple(sorted(set(before) - set(after), key=_arch_order))
        sizes = tuple(
            (
                a,
                before[a].stored_bytes if a in before else None,
                after[a].stored_bytes if a in after else None,
            )
            for a in sorted(set(before) | set(after), key=_arch_order)
        )
        if not before:
            status = "gained device code" if path in _all_paths(old) else "added"
        elif not after:
            status = "lost device code" if path in _all_paths(new) else "removed"
        elif added or dropped:
            status = "changed"
        elif any(b != n for _a, b, n in sizes):
            status = "resized"
        else:
            status = "same"
        changes.append(LibraryChange(path, status, added, dropped, sizes))
    keys = sorted(set(old.versions) | set(new.versions))
    version_changes = tuple(
        (k, old.versions.get(k), new.versions.get(k))
        for k in keys
        if old.versions.get(k) != new.versions.get(k)
    )
    names = sorted(set(old.pins) | set(new.pins))
    pin_changes = tuple(
        (k, old.pins.get(k), new.pins.get(k)) for k in names if old.pins.get(k) != new.pins.get(k)
    )
    gone = tuple(sorted(old.archs - new.archs, key=_arch_order))
    return DiffReport(old, new, tuple(changes), version_changes, pin_changes, gone)


def _all_paths(side: Side) -> set[str]:
    """Library keys present on a side, device code or not (an audit document lists only those
    with device code, so there 'lost device code' reads 'removed')."""
    return set(side.libraries) | set(side.binaries)
