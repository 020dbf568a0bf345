"""``archwheel clean`` without a container engine (``--engine none``): temporary folders of
ended runs, found by their owner records; the engine's side is in
tests/integration/faults/test_killed_runs.py."""

from __future__ import annotations

import json
import os
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


def test_clean_says_when_there_is_nothing(
    tmp_path: Path, cli_run: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARCHWHEEL_CACHE", str(tmp_path / "cache"))
    code, out, _ = cli_run("clean", "--engine", "none", "--temp", str(tmp_path))
    assert code == 0
    assert out.startswith("nothing to clean")


def test_clean_names_the_kept_build_trees_and_leaves_them(
    tmp_path: Path, cli_run: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ARCHWHEEL_CACHE", str(cache))
    for name in ("pt-sm90", "pt"):
        (cache / "archwheel" / "work" / name / "src").mkdir(parents=True)
    code, out, err = cli_run("clean", "--engine", "none", "--temp", str(tmp_path / "t"))
    assert code == 0, err
    assert out.splitlines()[0] == (
        "note: kept build trees, left as they are: pt, pt-sm90 (archwheel clean --work NAME)"
    )
    assert (cache / "archwheel" / "work" / "pt-sm90" / "src").is_dir()
    code, out, _ = cli_run("clean", "--engine", "none", "--temp", str(tmp_path / "t"),
                           "--format", "json")  # fmt: skip
    document = json.loads(out)
    validate_schema(document, "clean")
    assert any("pt-sm90" in note for note in document["notes"])


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


@pytest.mark.parametrize("shape", ["file", "fifo", "missing", "link-to-file"])
def test_an_index_that_is_no_folder_is_exit_2(tmp_path: Path, cli_run: CliRun, shape: str) -> None:
    """``clean --index FILE`` said "nothing to clean", exit 0 (``matrix --recheck`` exits 2
    for the same): now one line, exit 2, naming it."""
    given = tmp_path / "index"
    if shape == "file":
        given.write_text("not an index")
    elif shape == "fifo":
        os.mkfifo(given)
    elif shape == "link-to-file":
        (tmp_path / "file").write_text("x")
        given.symlink_to(tmp_path / "file")
    code, out, err = cli_run("clean", "--engine", "none", "--temp", str(tmp_path / "none"),
                             "--index", str(given))  # fmt: skip
    assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
    assert str(given) in err
    assert ("no such folder" if shape == "missing" else "not a folder") in err


def test_a_tampered_index_stops_clean_before_anything_is_removed(
    tmp_path: Path, cli_run: CliRun
) -> None:
    """An index whose ``current`` leads out of it ends ``clean`` with exit 2 before the dead
    runs' folders are removed too: nothing at all is removed."""
    dead = tmp_path / "archwheel-work-x2"
    dead.mkdir()
    mark_folder(dead, _ended_owner())
    index = tmp_path / "index"
    (index / "trees").mkdir(parents=True)
    (index / "current").symlink_to(tmp_path)
    code, out, err = cli_run("clean", "--engine", "none", "--temp", str(tmp_path),
                             "--index", str(index))  # fmt: skip
    assert code == 2 and err.count("\n") == 1, (code, out, err)
    assert "not the link archwheel makes" in err
    assert dead.is_dir()
