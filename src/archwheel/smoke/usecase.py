"""``archwheel smoke`` as one call: make the environment a ``SmokeRun`` asks for, check its steps,
run them under the watchdog and return the report.

``smoke`` raises only for a run that cannot start (``UsageError``: a combination of options
that cannot work, a step time limit that is not one, an unknown step; ``ToolError``: a missing
engine); everything that happens inside the environment is in the ``SmokeReport``.
"""

from __future__ import annotations

from dataclasses import dataclass

from archwheel.effects.process import Echo
from archwheel.effects.watchdog import Watchdog
from archwheel.smoke.choose import (
    EnvironmentOptions,
    kernel_steps,
    make_environment,
    positive_seconds,
)
from archwheel.smoke.runner import (
    DEFAULT_STEP_TIMEOUT,
    Progress,
    SmokeSettings,
    can_run_for,
    run_smoke,
)
from archwheel.verdicts.smoke import SmokeReport


@dataclass(frozen=True)
class SmokeRun:
    """One smoke run: where the wheels are tested (``environment``), each step's time limit,
    the kernel steps as a comma list (None or empty: all of them) and the GPUs (None: all)."""

    environment: EnvironmentOptions
    step_timeout: float = DEFAULT_STEP_TIMEOUT
    steps: str | None = None
    devices: tuple[int, ...] | None = None


def smoke(
    run: SmokeRun, *, echo: Echo | None = None, progress: Progress | None = None
) -> SmokeReport:
    """Test ``run``'s wheels (or the existing interpreter) in their environment: the
    environment is made first (its options checked), then the steps are checked, then they
    run; ``echo`` sees each command, ``progress`` each step's line. Can-run's verdict for the
    wheels is asked of every device the probe finds."""
    options = run.environment
    environment = make_environment(options, echo)
    settings = SmokeSettings(
        step_timeout=positive_seconds(run.step_timeout, "--timeout"),
        steps=kernel_steps(run.steps),
        devices=run.devices,
    )
    inputs = [str(w) for w in options.wheels] or [environment.description]
    installed = str(options.interpreter) if options.backend == "existing" else None
    return run_smoke(
        environment,
        inputs,
        settings,
        watchdog=Watchdog(),
        progress=progress,
        can_run=can_run_for(list(options.wheels), installed_python=installed),
    )
