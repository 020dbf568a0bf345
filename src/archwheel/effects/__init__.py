"""Effects: every side effect the upper floors need (processes, files, the cache folder, the
container engine, the watchdog, host probes), each behind one small interface.

Its public names are ``__all__``, bound on first use (``archwheel._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archwheel._lazy import lazy_exports

if TYPE_CHECKING:
    from archwheel.effects.deadline import NetBudget, NetLimits
    from archwheel.effects.engine import ContainerEngine, check_volume_name
    from archwheel.effects.engine_settings import ENGINES, EngineName, EngineSettings
    from archwheel.effects.files import kind_of, write_text_atomic
    from archwheel.effects.paths import cache_dir
    from archwheel.effects.pipconfig import PipSettings
    from archwheel.effects.process import parse_timeout, run_program
    from archwheel.effects.python_bases import other_python_of
    from archwheel.effects.settings import Settings
    from archwheel.effects.watchdog import Watchdog

__all__, __getattr__, __dir__ = lazy_exports(__name__)
