"""``housekeeping.clean``: the clean use case as a library call, without a container engine
(``engine="none"``), over a real temporary folder an ended run left."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from archwheel.effects.owner import Owner, mark_folder
from archwheel.housekeeping import CleanRequest, clean
from archwheel.housekeeping.cleaning import retired_volume_notes


def _ended_owner() -> Owner:
    code = "from archwheel.effects.owner import current_owner; print(current_owner().token())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    owner = Owner.parse(out.stdout)
    assert owner is not None
    return owner


class RecordingIndexReader:
    """Stands for ``matrix.unfinished_publishes`` (a floor above): records each call."""

    def __init__(self, dead: Path) -> None:
        self.dead = dead
        self.calls: list[tuple[str, bool, bool]] = []  # index, remove, the folder still there

    def __call__(self, index: Path, *, remove: bool) -> tuple[str, ...]:
        self.calls.append((index.name, remove, self.dead.exists()))
        return ("trees/unfinished",)


def test_the_indexes_are_read_before_anything_is_removed(tmp_path: Path) -> None:
    dead = tmp_path / "temp" / "archwheel-work-x1"
    dead.mkdir(parents=True)
    mark_folder(dead, _ended_owner())
    reader = RecordingIndexReader(dead)
    request = CleanRequest(
        engine="none", temp_roots=(tmp_path / "temp",), indexes=(tmp_path / "i1", tmp_path / "i2")
    )
    report = clean(request, unfinished_trees=reader)
    assert reader.calls == [
        ("i1", False, True),
        ("i2", False, True),
        ("i1", True, False),  # removed after the folders
        ("i2", True, False),
    ]
    assert [(x.name, x.removed) for x in report.leftovers] == [(str(dead), True)]
    assert report.index_trees == {str(p): ("trees/unfinished",) for p in request.indexes}
    assert report.exit_code == 0 and report.notes == ()


def test_a_dry_run_removes_nothing_and_reads_each_index_once(tmp_path: Path) -> None:
    dead = tmp_path / "archwheel-work-x2"
    dead.mkdir()
    mark_folder(dead, _ended_owner())
    reader = RecordingIndexReader(dead)
    request = CleanRequest(
        engine="none", temp_roots=(tmp_path,), indexes=(tmp_path / "i",), dry_run=True
    )
    report = clean(request, unfinished_trees=reader)
    assert reader.calls == [("i", False, True)]
    assert dead.is_dir() and [x.removed for x in report.leftovers] == [False]
    assert report.to_json_dict()["dry_run"] is True


def test_indexes_without_a_reader_of_their_layout_are_a_caller_s_mistake(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no reader of its layout"):
        clean(CleanRequest(engine="none", temp_roots=(tmp_path,), indexes=(tmp_path,)))


class VolumesStandIn:
    """Stands for a container engine's volume list (no engine may run in the unit tests)."""

    name = "podman"

    def __init__(self, *volumes: str) -> None:
        self.volumes = set(volumes)

    def volume_exists(self, name: str) -> bool:
        return name in self.volumes


def test_a_retired_volume_that_exists_is_named_with_the_command_that_frees_it() -> None:
    retired = {"archwheel-ccache": "the ccache cache of earlier archwheel versions"}
    notes = retired_volume_notes(VolumesStandIn("archwheel-ccache", "other"), retired)
    assert notes == [
        "volume archwheel-ccache is the ccache cache of earlier archwheel versions: "
        "`podman volume rm archwheel-ccache` frees it"
    ]
    assert retired_volume_notes(VolumesStandIn("other"), retired) == []
