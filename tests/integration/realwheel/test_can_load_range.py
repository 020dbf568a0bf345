"""can-load across torch releases (``--torch``) on the real torch wheels, served by a real HTTP
server on 127.0.0.1 as a PEP 503 index with range requests (tests/support/range_server.py).

The verdict against each release must be exactly the one ``can-load --with`` gives for the same
wheel on disk, whose verdicts the real imports check (test_can_load.py); a second run must read
nothing from the network; a server that refuses ranges must be read whole and say so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import CliRun
from tests.support.components import fetch_wheel
from tests.support.range_server import range_server, simple_index

TORCH_CPU = "torch==2.13.0+cpu"

pytestmark = [pytest.mark.realwheel, pytest.mark.slow]


def _libraries(document: dict[str, object]) -> dict[str, tuple[str, list[str], list[str]]]:
    libraries = document["libraries"]
    assert isinstance(libraries, list)
    return {
        lib["path"]: (
            lib["verdict"],
            lib["missing_libraries"],
            [s["name"] for s in lib["missing_symbols"]],
        )
        for lib in libraries
    }


def test_each_release_gets_the_verdict_of_can_load_with_and_a_second_run_reads_nothing(
    torchvision_wheel: Path,
    torch_wheel: Path,
    cli_run: CliRun,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARCHWHEEL_CACHE", str(tmp_path / "cache"))  # nothing read before
    torch_cpu = fetch_wheel(TORCH_CPU)
    served = tmp_path / "served"
    served.mkdir()
    index = simple_index(served, "torch", [torch_wheel, torch_cpu])
    with range_server(served) as server:
        argv = ["can-load", str(torchvision_wheel), "--torch", "2.13.0+cpu,2.14.1",
                "--index-url", server.url + index, "--format", "json"]  # fmt: skip
        code, out, err = cli_run(*argv)
        assert code == 1, out + err  # the CPU build does not load it (test_can_load.py)
        document = json.loads(out)
        assert document["exit_code"] == 1
        torches = {t["version"]: t for t in document["torches"]}
        assert set(torches) == {"2.13.0+cpu", "2.14.1"}
        assert torches["2.14.1"]["verdict"] == "loads"
        assert torches["2.13.0+cpu"]["verdict"] == "does-not-load"
        assert document["loads_with"] == ["2.14.1"]
        for version, wheel in (("2.14.1", torch_wheel), ("2.13.0+cpu", torch_cpu)):
            code, out, err = cli_run(
                "can-load", str(torchvision_wheel), "--with", str(wheel), "--format", "json"
            )
            local = json.loads(out)
            assert _libraries(torches[version]["report"]) == _libraries(local)
            assert torches[version]["report"]["facts"] == local["facts"]
            assert torches[version]["bytes_fetched"] > 0
        assert document["bytes_fetched"] <= document["bytes_of_wheels"]
        requests = server.requests["files"]
        code, out, err = cli_run(*argv)
        again = json.loads(out)
        assert code == 1
        assert again["bytes_fetched"] == 0
        assert all(t["cached"] for t in again["torches"])
        assert server.requests["files"] == requests + 1  # the index page alone
        assert [t["verdict"] for t in again["torches"]] == [
            t["verdict"] for t in document["torches"]
        ]


def test_a_server_without_ranges_is_read_whole_and_says_so(
    torchvision_wheel: Path, cli_run: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARCHWHEEL_CACHE", str(tmp_path / "cache"))
    torch_cpu = fetch_wheel(TORCH_CPU)
    served = tmp_path / "served"
    served.mkdir()
    index = simple_index(served, "torch", [torch_cpu], mode="whole")
    with range_server(served) as server:
        code, out, err = cli_run(
            "can-load", str(torchvision_wheel), "--torch", "2.13.0+cpu",
            "--index-url", server.url + index,
        )  # fmt: skip
    assert code == 1, out + err
    assert "downloaded whole" in err
    assert "whole (no ranges)" in out
    assert "DOES NOT LOAD" in out


def test_a_release_the_index_lacks_is_incomplete_and_named(
    torchvision_wheel: Path,
    torch_wheel: Path,
    cli_run: CliRun,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARCHWHEEL_CACHE", str(tmp_path / "cache"))
    served = tmp_path / "served"
    served.mkdir()
    index = simple_index(served, "torch", [torch_wheel])
    with range_server(served) as server:
        code, out, err = cli_run(
            "can-load", str(torchvision_wheel), "--torch", "2.14.1,2.14.9",
            "--index-url", server.url + index, "--format", "markdown",
        )  # fmt: skip
    assert code == 3, out + err
    assert "not on the indexes: torch 2.14.9" in out
    assert "| `2.14.1` | loads |" in out
