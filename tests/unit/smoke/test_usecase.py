"""``smoke.smoke``: the smoke run as one call refuses what cannot start, in the command's order
(the environment's options first, then the steps), before anything is installed or run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from archwheel.errors import UsageError
from archwheel.smoke import EnvironmentOptions, SmokeRun, smoke


def _existing() -> EnvironmentOptions:
    return EnvironmentOptions(
        wheels=(), backend="existing", install_timeout=60, interpreter=sys.executable
    )


@pytest.mark.parametrize(
    ("run", "said"),
    [
        (SmokeRun(EnvironmentOptions(wheels=(), backend="venv", install_timeout=60)), "no wheels"),
        (SmokeRun(_existing(), steps="matmul_fp32,nope"), "unknown smoke step nope"),
        (SmokeRun(_existing(), step_timeout=0), "--timeout must be a positive number"),
        # the environment's options are checked before the steps
        (
            SmokeRun(
                EnvironmentOptions(wheels=(Path("w.whl"),), backend="docker", install_timeout=60),
                steps="nope",
            ),
            "--backend docker needs --image",
        ),
    ],
)
def test_a_run_that_cannot_start_is_a_usage_error(run: SmokeRun, said: str) -> None:
    with pytest.raises(UsageError) as info:
        smoke(run)
    assert said in info.value.one_line()
