"""Every network read is bounded in time, headers included (``effects.deadline``), and
redirects go to http(s) URLs only, against a real HTTP server on 127.0.0.1
(tests/support/range_server.py) that sends its status line and then one header byte every
0.2 s, or redirects to ``ftp://``. The limits are set small here; the server stops trickling
after 8 s, so that a reader without the bound gets its answer late and the test fails instead
of hanging."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from archwheel.effects import simple_index
from archwheel.effects.deadline import NetBudget, NetLimits, TimedOut
from archwheel.effects.pipconfig import PipSettings
from archwheel.effects.ranged import RangedFile, RemoteFileError
from archwheel.errors import ToolError
from tests.support.range_server import RangeServer, range_server

SMALL = NetLimits(request_timeout_s=1.0, run_timeout_s=30.0)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[RangeServer]:
    folder = tmp_path / "served"
    folder.mkdir()
    (folder / "blob").write_bytes(random.Random(1).randbytes(100_000))
    with range_server(folder) as server:
        yield server


def test_a_page_whose_headers_trickle_is_given_up_at_the_request_bound(
    served: RangeServer,
) -> None:
    started = time.monotonic()
    with pytest.raises(
        ToolError, match=r"no complete answer \(status line and headers\) within 1 s"
    ):
        simple_index.fetch_page(
            f"{served.url}/slowhead/", "torch", PipSettings(), budget=NetBudget(SMALL)
        )
    assert time.monotonic() - started < 4


def test_a_wheel_whose_headers_trickle_is_given_up_at_the_request_bound(
    served: RangeServer, tmp_path: Path
) -> None:
    started = time.monotonic()
    with pytest.raises(RemoteFileError, match=r"slowhead/blob: no complete answer .* within 1 s"):
        RangedFile(f"{served.url}/slowhead/blob", tmp_path / "cache", budget=NetBudget(SMALL))
    assert time.monotonic() - started < 4


def test_the_run_bound_covers_every_request_together(served: RangeServer, tmp_path: Path) -> None:
    budget = NetBudget(NetLimits(request_timeout_s=30, run_timeout_s=1.0))
    started = time.monotonic()
    with pytest.raises(RemoteFileError, match="the network time limit of the run was reached"):
        RangedFile(f"{served.url}/slowhead/blob", tmp_path / "cache", budget=budget)
    assert time.monotonic() - started < 4
    assert budget.spent
    # a later request of the same run is not even made
    before = sum(served.requests.values())
    with pytest.raises(RemoteFileError, match="not asked: the network time limit of the run"):
        RangedFile(f"{served.url}/files/blob", tmp_path / "cache", budget=budget)
    assert sum(served.requests.values()) == before


def test_a_sound_answer_passes_under_the_bounds(served: RangeServer, tmp_path: Path) -> None:
    with RangedFile(f"{served.url}/files/blob", tmp_path / "c", budget=NetBudget(SMALL)) as r:
        assert r.pread(10, 5) == (served.folder / "blob").read_bytes()[5:15]


def test_a_page_redirected_to_ftp_is_refused(served: RangeServer) -> None:
    with pytest.raises(ToolError, match=r"redirected to 'ftp://127\.0\.0\.1/torch/', not an http"):
        simple_index.fetch_page(f"{served.url}/ftp/", "torch", PipSettings())


def test_the_deadline_raises_even_when_the_reader_saw_a_clean_end() -> None:
    budget = NetBudget(NetLimits(request_timeout_s=0.05, run_timeout_s=10))
    with pytest.raises(TimedOut, match=r"within 0\.05 s"), budget.request("x"):
        time.sleep(0.3)


@pytest.mark.parametrize(
    ("request_text", "run_text", "named"),
    [("abc", "", "ARCHWHEEL_NET_TIMEOUT"), ("", "0", "ARCHWHEEL_NET_RUN_TIMEOUT"),
     ("", "inf", "ARCHWHEEL_NET_RUN_TIMEOUT"), ("-1", "", "ARCHWHEEL_NET_TIMEOUT")],
)  # fmt: skip
def test_a_limit_that_is_not_one_is_refused_naming_its_setting(
    request_text: str, run_text: str, named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        NetLimits.from_settings(request_text, run_text)


def test_the_settings_give_the_limits() -> None:
    assert NetLimits.from_settings("", "") == NetLimits()
    assert NetLimits.from_settings(" 5 ", "90") == NetLimits(5.0, 90.0)
