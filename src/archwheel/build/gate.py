"""The audit gate at the end of every build: does the wheel hold what was asked for?

It calls the audit engine (``archwheel.binary.scan.inputs.scan_path`` and
``archwheel.verdicts.audit.audit``) on the finished wheel with the requested arch list. A wheel
in which any library with device code lacks a requested SASS arch or requested PTX fails the
gate; the build then moves it to ``rejected/`` with the JSON audit report instead of handing it
out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from archwheel.binary.scan.inputs import scan_path
from archwheel.facts.arch import ArchList
from archwheel.verdicts.audit import audit, audit_document


@dataclass(frozen=True)
class GateVerdict:
    ok: bool
    summary: str  # one line for the terminal and provenance
    report: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))


AuditGate = Callable[[Path, ArchList], GateVerdict]


def audit_gate(wheel: Path, arch_list: ArchList) -> GateVerdict:
    """Audit ``wheel`` against ``arch_list`` with archwheel's own audit engine.

    The gate passes only when the scan was complete and nothing requested is missing; what a
    library carries beyond the request is reported, not refused (PyTorch adds sm_90a kernels
    to a 9.0 build on purpose).
    """
    report = audit(scan_path(wheel), arch_list)
    document = audit_document([report])
    if not report.complete:
        problems = "; ".join(p.one_line() for p in report.inventory.problems[:3])
        return GateVerdict(
            False, f"the audit could not read the wheel completely: {problems}", document
        )
    if report.no_device_code:
        return GateVerdict(False, "no library in the wheel carries device code", document)
    missing = [f"{v.library.path} lacks {', '.join(v.missing)}" for v in report.failing]
    if missing:
        return GateVerdict(False, "; ".join(missing), document)
    extra = sorted({name for v in report.libraries for name in v.extra})
    beyond = f"; beyond the request: {', '.join(extra)}" if extra else ""
    names = [str(v.library.path) for v in report.libraries]
    listed = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    summary = (
        f"all {len(report.libraries)} libraries with device code ({listed}) hold "
        f"{arch_list}{beyond}"
    )
    return GateVerdict(True, summary, document)
