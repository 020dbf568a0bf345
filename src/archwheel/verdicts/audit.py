"""The audit verdict: what each library carries, compared with what was asked for.

``audit(inventory, expect)`` compares, library by library, the SASS and PTX found with the
requested ``ArchList``. A requested SASS target is present only as exactly that target (a
requested 9.0 is not satisfied by sm_90a, which runs on 9.0 alone and is a different image); a
requested PTX likewise. Everything found beyond the request is listed as extra.

The JSON document (``to_json_dict``) is the machine rendering of this result; its schema is
``interfaces/schema/audit.schema.json`` and ``schema_version`` changes when it does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archwheel.binary.model import InputInventory, LibraryInventory, Severity
from archwheel.binary.variantname import split_label
from archwheel.exit_codes import EXIT_INCOMPLETE, EXIT_OK, EXIT_VERDICT_FAILED
from archwheel.facts.arch import ArchList, CodeKind, Target
from archwheel.facts.catalog import load_facts
from archwheel.verdicts.document import document_header

if TYPE_CHECKING:  # imported when an input has a variant.json (a few ms an audit rarely needs)
    from archwheel.verdicts.variant_claims import ClaimsCheck

AUDIT_SCHEMA_VERSION = 1
KIND_ORDER = {CodeKind.SASS: 0, CodeKind.PTX: 1, CodeKind.LTOIR: 2}


@dataclass(frozen=True)
class LibraryVerdict:
    """One library with device code, against the request."""

    library: LibraryInventory
    missing_sass: tuple[Target, ...] = ()
    missing_ptx: tuple[Target, ...] = ()
    extra: tuple[str, ...] = ()  # image names beyond the request: sm_90a, compute_120 ...

    @property
    def ok(self) -> bool:
        """Nothing requested is missing from this library."""
        return not self.missing_sass and not self.missing_ptx

    @property
    def missing(self) -> tuple[str, ...]:
        """The requested images the library lacks, named (``sm_90``, ``compute_120``), for the
        report and JSON."""
        return tuple(t.sm for t in self.missing_sass) + tuple(t.compute for t in self.missing_ptx)


@dataclass(frozen=True)
class ArchCost:
    """What one image arch costs across an input."""

    kind: CodeKind
    target: Target
    libraries: int
    entries: int
    stored_bytes: int
    uncompressed_bytes: int

    @property
    def arch(self) -> str:
        """The image arch named as nvcc does (``sm_90a``, ``compute_120``)."""
        return self.target.name(self.kind)


@dataclass(frozen=True)
class AuditReport:
    """The audit of one input."""

    inventory: InputInventory
    expect: ArchList | None
    libraries: tuple[LibraryVerdict, ...]  # libraries with device code, in input order
    no_device_code: bool  # something was requested but no library carries device code
    # Its .dist-info/variant.json judged against its device code (None: it has none).
    variant: ClaimsCheck | None = None

    @property
    def ok(self) -> bool:
        """Nothing requested is missing (always True without a request)."""
        return not self.no_device_code and all(v.ok for v in self.libraries)

    @property
    def variant_ok(self) -> bool:
        """Every property its ``variant.json`` claims is backed (True without one)."""
        return self.variant is None or self.variant.ok

    @property
    def passed(self) -> bool:
        """The audit passed: nothing requested is missing and no variant claim is unbacked
        (what the exit code and the JSON ``ok`` say)."""
        return self.ok and self.variant_ok

    @property
    def complete(self) -> bool:
        """The scan read every member; an incomplete audit cannot pass (exit 3)."""
        return self.inventory.complete

    @property
    def exit_code(self) -> int:
        """3 when the scan was incomplete, else 1 when the audit failed, else 0
        (docs/exit-codes.md)."""
        if not self.complete:
            return EXIT_INCOMPLETE
        return EXIT_OK if self.passed else EXIT_VERDICT_FAILED

    @property
    def failing(self) -> tuple[LibraryVerdict, ...]:
        """The libraries that lack something requested, for the report's list of failures."""
        return tuple(v for v in self.libraries if not v.ok)

    def costs(self) -> list[ArchCost]:
        """Per image arch: how many libraries and entries carry it and the bytes it costs.

        Entries are grouped by the identity of their kind and target objects (torch's 13,000
        entries share a few dozen), then the groups merged by value: hashing every entry's
        target, a dataclass, cost 10-20 ms of each audit of torch, after its scan."""
        # (kind, target) identities -> the objects, the library paths, entries, stored bytes,
        # uncompressed bytes
        groups: dict[tuple[int, int], tuple[tuple[CodeKind, Target], set[str], list[int]]] = {}
        for lib in self.inventory.libraries:
            for e in lib.entries:
                key = (id(e.kind), id(e.target))
                group = groups.get(key)
                if group is None:
                    group = groups[key] = ((e.kind, e.target), set(), [0, 0, 0])
                group[1].add(lib.path)
                counts = group[2]
                counts[0] += 1
                counts[1] += e.stored_bytes
                counts[2] += e.uncompressed_bytes
        merged: dict[tuple[CodeKind, Target], tuple[set[str], list[int]]] = {}
        for value, paths, counts in groups.values():
            libs, totals = merged.setdefault(value, (set(), [0, 0, 0]))
            libs |= paths
            for i, count in enumerate(counts):
                totals[i] += count
        rows = [ArchCost(k[0], k[1], len(libs), *totals) for k, (libs, totals) in merged.items()]
        rows.sort(key=lambda r: (KIND_ORDER[r.kind], r.target))
        return rows

    def to_json_dict(self) -> dict[str, Any]:
        """The input's part of the JSON document (see ``audit_document``)."""
        inv = self.inventory
        verdicts = {v.library.path: v for v in self.libraries}
        libraries = []
        for lib in inv.device_libraries:
            verdict = verdicts.get(lib.path)
            row: dict[str, Any] = {
                "path": lib.path,
                "file_kind": lib.file_kind,
                "size": lib.size,
                "debug_bytes": lib.debug_bytes,
                "containers": len(lib.containers),
                "raw_cubins": len(lib.raw_cubins),
                "images": [
                    {
                        "section": r.section,
                        "origin": r.origin.value,
                        "kind": r.kind.value,
                        "arch": r.arch,
                        "count": r.count,
                        "stored_bytes": r.stored_bytes,
                        "uncompressed_bytes": r.uncompressed_bytes,
                        "compression": [c.value for c in r.compressions],
                        "ptx_isa": [str(v) for v in r.ptx_isa],
                    }
                    for r in lib.images()
                ],
            }
            if self.expect is not None and verdict is not None:
                row["ok"] = verdict.ok
                row["missing"] = list(verdict.missing)
                row["extra"] = list(verdict.extra)
            libraries.append(row)
        return {
            "source": inv.source,
            "input_kind": inv.input_kind,
            "complete": self.complete,
            "ok": self.passed,
            "no_device_code": self.no_device_code,
            "binaries_scanned": inv.members_scanned,
            "bytes_scanned": inv.bytes_scanned,
            "libraries": libraries,
            "archs": [
                {
                    "kind": c.kind.value,
                    "arch": c.arch,
                    "libraries": c.libraries,
                    "entries": c.entries,
                    "stored_bytes": c.stored_bytes,
                    "uncompressed_bytes": c.uncompressed_bytes,
                }
                for c in self.costs()
            ],
            "problems": [
                {"severity": p.severity.value, "member": p.member, "message": p.message}
                for p in inv.problems
            ],
            "metadata": dict(inv.metadata),
            **({"variant": self.variant.to_json_dict()} if self.variant is not None else {}),
        }


def audit(inventory: InputInventory, expect: ArchList | None) -> AuditReport:
    """Compare every library with device code against ``expect`` (None: inventory only)."""
    verdicts: list[LibraryVerdict] = []
    for lib in inventory.device_libraries:
        if expect is None:
            verdicts.append(LibraryVerdict(lib))
            continue
        sass = lib.targets(CodeKind.SASS)
        ptx = lib.targets(CodeKind.PTX)
        missing_sass = tuple(sorted(expect.sass_targets - sass))
        missing_ptx = tuple(sorted(expect.ptx_targets - ptx))
        extra = [t.sm for t in sorted(sass - expect.sass_targets)]
        extra += [t.compute for t in sorted(ptx - expect.ptx_targets)]
        extra += [t.name(CodeKind.LTOIR) for t in sorted(lib.targets(CodeKind.LTOIR))]
        verdicts.append(LibraryVerdict(lib, missing_sass, missing_ptx, tuple(extra)))
    no_device_code = expect is not None and not verdicts
    variant = None
    if inventory.variant_json is not None:
        from archwheel.verdicts.variant_claims import check_variant_file

        label = split_label(inventory.metadata.get("file", ""))[1]
        variant = check_variant_file(inventory.variant_json, inventory.device_libraries, label)
    return AuditReport(inventory, expect, tuple(verdicts), no_device_code, variant)


def audit_document(reports: Sequence[AuditReport]) -> dict[str, Any]:
    """The whole JSON document for one or more audited inputs."""
    expect = reports[0].expect if reports else None
    return {
        **document_header(AUDIT_SCHEMA_VERSION, facts_version=load_facts().facts_version),
        "expect": (
            None
            if expect is None
            else {
                "arch_list": str(expect),
                "sass": sorted(t.sm for t in expect.sass_targets),
                "ptx": sorted(t.compute for t in expect.ptx_targets),
            }
        ),
        "ok": all(r.passed for r in reports),
        "complete": all(r.complete for r in reports),
        "exit_code": overall_exit_code(reports),
        "inputs": [r.to_json_dict() for r in reports],
    }


def overall_exit_code(reports: Sequence[AuditReport]) -> int:
    """3 when any input is incomplete, else 1 when anything requested is missing or a
    ``variant.json`` claims what the device code does not back, else 0."""
    if any(not r.complete for r in reports):
        return EXIT_INCOMPLETE
    if any(not r.passed for r in reports):
        return EXIT_VERDICT_FAILED
    return EXIT_OK


def error_count(report: AuditReport) -> int:
    """How many of the scan's problems are errors (not warnings), for the summary line."""
    return sum(1 for p in report.inventory.problems if p.severity is Severity.ERROR)
