"""``archwheel can-load EXT.whl --torch RANGE`` (``archwheel.can_load_range``): the extension
judged against every torch release the range names, with this host's own copies of the system
libraries its manylinux policy allows as their stand-ins (as ``can-load --with``). The reading
and the judging live in ``verdicts.torch_range``, which the build's range claim uses too."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from archwheel.binary.dynamic import DynamicInfo
from archwheel.effects.deadline import NetBudget
from archwheel.effects.pipconfig import PipSettings
from archwheel.inspection.loading import LOADERS, host_library_files
from archwheel.verdicts import torch_range
from archwheel.verdicts.load import WheelFiles, policy_for
from archwheel.verdicts.torch_range import Event, TorchCheck, TorchRangeReport

__all__ = ["TorchCheck", "TorchRangeReport", "can_load_range"]


def can_load_range(
    wheel: Path,
    torch: str,
    *,
    pip: PipSettings,
    cache: Path,
    python: str | None = None,
    host_libraries: bool = True,
    on_event: Event | None = None,
    budget: NetBudget | None = None,
) -> TorchRangeReport:
    """``wheel`` against each torch release ``torch`` names (``verdicts.torch_range``);
    ``host_libraries``: this host's libc and libstdc++ stand in for the system's; ``budget``:
    the run's network time (None: the default limits, ``effects.deadline``)."""
    return torch_range.can_load_range(
        wheel, torch, pip=pip, cache=cache, python=python,
        system=_host_system if host_libraries else None, on_event=on_event, budget=budget,
    )  # fmt: skip


def _host_system(files: WheelFiles) -> Mapping[str, DynamicInfo]:
    policy = policy_for(files.tags)
    return {} if policy is None else host_library_files(policy.libraries | LOADERS)
