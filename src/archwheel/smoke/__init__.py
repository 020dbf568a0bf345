"""The smoke use case: install wheels into an isolated environment (a venv, containers, or an
existing interpreter) and run real kernels there, each step in its own process, first with the
PTX JIT disabled. ``choose`` turns options into the environment, ``environments`` installs,
``runner`` runs the steps and reports; ``usecase.smoke`` is the whole run as one call.

Its public names are ``__all__``, bound on first use (``archwheel._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archwheel._lazy import lazy_exports

if TYPE_CHECKING:
    from archwheel.smoke.choose import (
        EnvironmentOptions,
        kernel_steps,
        make_environment,
        positive_seconds,
    )
    from archwheel.smoke.environments import DEFAULT_INSTALL_TIMEOUT
    from archwheel.smoke.runner import DEFAULT_STEP_TIMEOUT, SmokeSettings, can_run_for, run_smoke
    from archwheel.smoke.usecase import SmokeRun, smoke

__all__, __getattr__, __dir__ = lazy_exports(__name__)
