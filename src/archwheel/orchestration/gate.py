"""The audit gate at the end of every build: does the wheel hold what was asked for?

It calls the audit engine (``archwheel.binary.scan.scan_path`` and
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

from archwheel.errors import ToolError
from archwheel.facts.arch import ArchList


@dataclass(frozen=True)
class GateVerdict:
    ok: bool
    summary: str  # one line for the terminal and provenance
    report: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))


AuditGate = Callable[[Path, ArchList], GateVerdict]


def audit_gate(wheel: Path, arch_list: ArchList) -> GateVerdict:
    """Audit ``wheel`` against ``arch_list`` with archwheel's own audit engine."""
    try:
        from archwheel.binary.scan import scan_path
        from archwheel.verdicts.audit import audit
    except ImportError as exc:  # pragma: no cover - only before the audit engine lands
        raise ToolError(
            f"the audit engine is not available ({exc}); a wheel cannot pass the gate",
        ) from None
    report = audit(scan_path(wheel), arch_list)
    document = report.to_json_dict()
    return GateVerdict(bool(report.ok), summarize(document, arch_list), document)


def summarize(document: Mapping[str, object], arch_list: ArchList) -> str:
    """One line from the audit JSON: which libraries miss what, or that all hold the list."""
    missing: list[str] = []
    libraries = 0
    for item in _list(document.get("inputs")):
        for library in _list(_map(item).get("libraries")):
            lib = _map(library)
            libraries += 1
            gaps = [
                str(a) for a in (*_list(lib.get("missing_sass")), *_list(lib.get("missing_ptx")))
            ]
            if gaps:
                missing.append(f"{lib.get('path')} lacks {', '.join(gaps)}")
    if missing:
        return "; ".join(missing)
    return f"every library with device code holds {arch_list} ({libraries} checked)"


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _map(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}
