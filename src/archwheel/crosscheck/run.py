"""``archwheel audit --cross-check``: cuobjdump over every audited input, as one call.

A ``CrossCheckRequest`` names the inventories to check; ``run_cross_check`` finds (or installs)
cuobjdump once, checks each input and returns a ``CrossCheckResult``. Nothing is printed here:
the human text is ``archwheel.interfaces.render.crosscheck``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from archwheel.binary.model import InputInventory
from archwheel.crosscheck.cuobjdump import Cuobjdump, ensure_cuobjdump
from archwheel.crosscheck.inputs import crosscheck_input, source_of
from archwheel.effects.settings import Settings
from archwheel.verdicts.crosscheck import CrossCheckReport, worst_exit_code

FileProgress = Callable[[str, str], None]
"""Called with (input, file) before cuobjdump runs on each file of an input."""


@dataclass(frozen=True)
class CrossCheckRequest:
    """What to cross-check: the inventories the audit made, in the order it made them."""

    inventories: tuple[InputInventory, ...]
    settings: Settings = field(default_factory=Settings)  # where cuobjdump is, its time limit
    install: bool = True  # install nvidia-cuda-cuobjdump into the cache when none is found
    timeout_s: float | None = None  # per cuobjdump run (None: the cuobjdump_timeout setting)


@dataclass(frozen=True)
class CrossCheckResult:
    """One report per input, in the request's order."""

    reports: tuple[CrossCheckReport, ...]

    @property
    def exit_code(self) -> int:
        """The worst of the reports' exit codes (0 when there are none)."""
        return worst_exit_code(r.exit_code for r in self.reports)


def run_cross_check(
    request: CrossCheckRequest,
    *,
    tool: Cuobjdump | None = None,
    on_progress: FileProgress | None = None,
) -> CrossCheckResult:
    """Check every inventory of ``request`` against cuobjdump."""
    tool = tool or ensure_cuobjdump(
        request.settings, install=request.install, timeout_s=request.timeout_s
    )
    reports = []
    for inventory in request.inventories:
        source = source_of(inventory)

        def progress(name: str, source_name: str = str(source)) -> None:
            if on_progress is not None:
                on_progress(source_name, name)

        reports.append(
            crosscheck_input(
                inventory,
                source,
                tool=tool,
                on_progress=progress if on_progress is not None else None,
            )
        )
    return CrossCheckResult(tuple(reports))
