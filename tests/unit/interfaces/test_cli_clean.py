"""``archwheel clean`` without a container engine (``--engine none``): temporary folders of
ended runs, found by their owner records; the engine's side is in
tests/integration/faults/test_killed_runs.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from archwheel.effects.owner import Owner, mark_folder, owned_tempdir
from tests.support.can_load_fakes import validate_schema
from tests.support.cli import CliRun


def _ended_owner() -> Owner:
    code = "from archwheel.effects.owner import current_owner; print(current_owner().token())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    owner = Owner.parse(out.stdout)
    assert owner is not None
    return owner


def test_clean_json_lists_and_removes_an_ended_runs_folder(tmp_path: Path, cli_run: CliRun) -> None:
    dead = tmp_path / "archwheel-work-x1"
    (dead / "sub").mkdir(parents=True)
    mark_folder(dead, _ended_owner())
    live = owned_tempdir("archwheel-work-", tmp_path)
    code, out, err = cli_run("clean", "--engine", "none", "--temp", str(tmp_path),
                             "--dry-run", "--format", "json")  # fmt: skip
    assert code == 0, err
    document = json.loads(out)
    validate_schema(document, "clean")
    assert document["dry_run"] is True
    assert [(x["kind"], x["name"], x["removed"]) for x in document["leftovers"]] == [
        ("folder", str(dead), False)
    ]
    assert dead.is_dir()
    code, out, err = cli_run("clean", "--engine", "none", "--temp", str(tmp_path),
                             "--format", "json")  # fmt: skip
    document = json.loads(out)
    validate_schema(document, "clean")
    assert code == 0 and document["exit_code"] == 0
    assert [x["removed"] for x in document["leftovers"]] == [True]
    assert not dead.exists() and live.is_dir()


def test_clean_says_when_there_is_nothing(tmp_path: Path, cli_run: CliRun) -> None:
    code, out, _ = cli_run("clean", "--engine", "none", "--temp", str(tmp_path))
    assert code == 0
    assert out.startswith("nothing to clean")


def test_an_engine_asked_for_that_does_not_answer_is_a_one_line_error(
    tmp_path: Path, cli_run: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker, no podman on PATH
    code, out, err = cli_run("clean", "--engine", "podman", "--temp", str(tmp_path))
    assert code != 0 and out == ""
    assert err.count("\n") == 1 and "podman" in err
    code, out, err = cli_run("clean", "--temp", str(tmp_path))  # default: skipped, said
    assert code == 0
    assert out.startswith("note: containers not checked")
