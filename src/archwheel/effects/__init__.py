"""Effects: every side effect the upper floors need (processes, files, the cache folder, the
container engine, the watchdog, host probes), each behind one small interface.

Its public names are ``__all__``, bound on first use (``archwheel._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archwheel._lazy import lazy_exports

__all__ = [
    "ENGINES",
    "ContainerEngine",
    "EngineName",
    "EngineSettings",
    "NetBudget",
    "NetLimits",
    "PipSettings",
    "Settings",
    "Watchdog",
    "cache_dir",
    "check_volume_name",
    "kind_of",
    "parse_timeout",
    "run_program",
    "write_text_atomic",
]

_WHERE = {
    "ENGINES": "engine_settings",
    "EngineName": "engine_settings",
    "ContainerEngine": "engine",
    "EngineSettings": "engine_settings",
    "NetBudget": "deadline",
    "NetLimits": "deadline",
    "PipSettings": "pipconfig",
    "Settings": "settings",
    "Watchdog": "watchdog",
    "cache_dir": "paths",
    "check_volume_name": "engine",
    "kind_of": "files",
    "parse_timeout": "process",
    "run_program": "process",
    "write_text_atomic": "files",
}

if TYPE_CHECKING:
    from archwheel.effects.deadline import NetBudget, NetLimits
    from archwheel.effects.engine import (
        ENGINES,
        ContainerEngine,
        EngineName,
        EngineSettings,
        check_volume_name,
    )
    from archwheel.effects.files import kind_of, write_text_atomic
    from archwheel.effects.paths import cache_dir
    from archwheel.effects.pipconfig import PipSettings
    from archwheel.effects.process import parse_timeout, run_program
    from archwheel.effects.settings import Settings
    from archwheel.effects.watchdog import Watchdog
else:
    __getattr__, __dir__ = lazy_exports(__name__, _WHERE)
