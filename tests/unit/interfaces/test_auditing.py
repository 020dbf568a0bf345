"""``interfaces.auditing``: the audit as one call (inspection's audit, then, when asked,
crosscheck's), over a real wheel; cuobjdump itself runs in tests/integration/nvcc."""

from __future__ import annotations

from pathlib import Path

from archwheel.crosscheck import CrossCheckResult
from archwheel.facts import ArchList
from archwheel.interfaces.auditing import AuditCall, AuditOutcome, audit_and_cross_check
from archwheel.verdicts.crosscheck import CrossCheckReport, LibraryFailure
from tests.support.builders import Entry, container, elf64, write_zip


def _wheel(folder: Path) -> Path:
    return write_zip(
        folder / "x-1.0-py3-none-any.whl",
        [("x/lib.so", elf64([(".nv_fatbin", container(Entry(sm=90)))]))],
    )


def test_the_audit_alone_calls_back_in_order_and_checks_nothing(tmp_path: Path) -> None:
    events: list[str] = []
    outcome = audit_and_cross_check(
        AuditCall(inputs=(_wheel(tmp_path),), expect=ArchList.parse("8.0")),
        on_scanned=lambda: events.append("scanned"),
        on_check=lambda *_: events.append("checking"),
        while_scanning=lambda: events.append("while scanning"),
    )
    assert events == ["while scanning", "scanned"]
    assert outcome.cross_check is None
    [report] = outcome.reports
    assert not report.passed and outcome.exit_code == 1  # sm_80 was asked, sm_90 is there


def _checked(*failures: LibraryFailure) -> CrossCheckResult:
    return CrossCheckResult((CrossCheckReport("x.whl", "cuobjdump 13.0", 1, (), (), failures),))


def test_the_cross_check_s_exit_code_counts_only_where_the_audit_passed(tmp_path: Path) -> None:
    passed = audit_and_cross_check(AuditCall(inputs=(_wheel(tmp_path),)))
    failed = audit_and_cross_check(
        AuditCall(inputs=(_wheel(tmp_path),), expect=ArchList.parse("8.0"))
    )
    tool_failed = _checked(LibraryFailure("x/lib.so", "cuobjdump exited 1"))
    assert AuditOutcome(passed.reports, _checked()).exit_code == 0
    assert AuditOutcome(passed.reports, tool_failed).exit_code == 4
    assert AuditOutcome(failed.reports, tool_failed).exit_code == 1
