"""``archwheel audit`` as one call: inspection's audit of the inputs and, with a cross-check,
crosscheck's cuobjdump over the inventories the audit made.

Why on this floor: inspection and crosscheck are use cases side by side (floor 4) and never
import each other, so the one call that runs both lives on a floor above the two. Of those,
wheelbuild and matrix build wheels and call inspection for their gates; an audit that asks
NVIDIA's tool for a second opinion is neither, and the command line and the Python API
(``api.py``, beside this module) are its callers. The audit alone is ``inspection.audit_inputs``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from archwheel.binary import ProgressCallback
from archwheel.effects import Settings
from archwheel.facts import ArchList
from archwheel.inspection import audit_inputs
from archwheel.verdicts import AuditReport, overall_exit_code

if TYPE_CHECKING:
    from archwheel.crosscheck import CrossCheckResult


@dataclass(frozen=True)
class AuditCall:
    """What to audit (paths, then installed distributions in ``interpreter``'s environment),
    against which arch list (None: inventory only), how the scan runs, and whether cuobjdump
    checks the result (``cross_check``: the settings that find it; None: no cross-check)."""

    inputs: tuple[Path, ...] = ()
    installed: tuple[str, ...] = ()
    interpreter: str | None = None
    expect: ArchList | None = None
    workers: int | None = None
    deep: bool = False
    all_members: bool = False
    cross_check: Settings | None = None


@dataclass(frozen=True)
class AuditOutcome:
    """One report per input, in the call's order, and the cross-check's result (None when
    none was asked for)."""

    reports: tuple[AuditReport, ...]
    cross_check: CrossCheckResult | None = None

    @property
    def exit_code(self) -> int:
        """The audit's exit code; where it is 0, the cross-check's (1 or 4) when that failed."""
        code = overall_exit_code(self.reports)
        if code == 0 and self.cross_check is not None and self.cross_check.exit_code != 0:
            return self.cross_check.exit_code
        return code


def audit_and_cross_check(
    call: AuditCall,
    *,
    on_progress: ProgressCallback | None = None,
    on_scanned: Callable[[], None] | None = None,
    on_check: Callable[[str, str], None] | None = None,
    while_scanning: Callable[[], None] | None = None,
) -> AuditOutcome:
    """Audit ``call``'s inputs (``on_progress`` and ``while_scanning`` as for
    ``inspection.audit_inputs``); ``on_scanned`` is called once every input is audited; then,
    when asked, cross-check their inventories (``on_check``: before cuobjdump runs on each
    file, with the input and the file)."""
    reports = audit_inputs(
        call.inputs,
        installed=call.installed,
        interpreter=call.interpreter,
        expect=call.expect,
        workers=call.workers,
        deep=call.deep,
        all_members=call.all_members,
        on_progress=on_progress,
        while_scanning=while_scanning,
    )
    if on_scanned is not None:
        on_scanned()
    if call.cross_check is None:
        return AuditOutcome(tuple(reports))
    # Imported only here: an audit without a cross-check does not pay for it (the process
    # runner and cuobjdump's finder, about 20 ms).
    from archwheel.crosscheck import CrossCheckRequest, run_cross_check

    request = CrossCheckRequest(tuple(r.inventory for r in reports), settings=call.cross_check)
    return AuditOutcome(tuple(reports), run_cross_check(request, on_progress=on_check))
