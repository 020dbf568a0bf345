"""Owner records (``effects.owner``): who made a container or a folder, and whether that run is
alive. Real processes: a child that has exited is dead, this process is alive."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from archwheel.effects.owner import (
    OWNER_SUFFIX,
    Owner,
    current_owner,
    dead_folders,
    liveness,
    mark_folder,
    owned_folders,
    owned_tempdir,
    remove_dead_folders,
    remove_owned,
)


def _dead_owner() -> Owner:
    """The owner record of a real process that has ended."""
    code = "from archwheel.effects.owner import current_owner; print(current_owner().token())"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    owner = Owner.parse(proc.stdout)
    assert owner is not None
    return owner


def test_this_process_is_alive_and_an_ended_one_is_dead() -> None:
    here = current_owner()
    assert liveness(here) == "alive"
    assert liveness(_dead_owner()) == "dead"


def test_a_reused_pid_with_another_start_time_is_dead() -> None:
    here = current_owner()
    assert liveness(replace(here, start=here.start + 1)) == "dead"


def test_another_boot_is_dead_and_another_host_is_never_judged() -> None:
    here = current_owner()
    assert liveness(replace(here, boot="another-boot")) == "dead"
    assert liveness(replace(here, host="elsewhere")) == "unknown"
    assert liveness(replace(_dead_owner(), host="elsewhere")) == "unknown"


@pytest.mark.parametrize(
    "text",
    ["", "garbage", "h:b:12", "h:b:x:1", "h:b:1:-2", ":b:1:2", "h::1:2", "h:b:١:2"],
)
def test_a_record_that_names_no_owner_is_none(text: str) -> None:
    assert Owner.parse(text) is None


def test_a_token_reads_back() -> None:
    here = current_owner()
    assert Owner.parse(here.token()) == here
    assert Owner.parse(here.token() + "\n") == here


def test_only_dead_owners_folders_are_removed(tmp_path: Path) -> None:
    dead = tmp_path / "archwheel-work-dead"
    dead.mkdir()
    (dead / "object.o").write_bytes(b"x")
    mark_folder(dead, _dead_owner())
    live = owned_tempdir("archwheel-stage-", tmp_path)
    foreign = tmp_path / "archwheel-work-foreign"
    foreign.mkdir()
    mark_folder(foreign, replace(_dead_owner(), host="elsewhere"))
    plain = tmp_path / "archwheel-work-plain"  # no record: not ours to judge
    plain.mkdir()
    garbled = tmp_path / "archwheel-smoke-garbled"
    garbled.mkdir()
    garbled.with_name(garbled.name + OWNER_SUFFIX).write_text("not an owner\n")
    other = tmp_path / "something-else"
    other.mkdir()
    mark_folder(other, _dead_owner())  # another prefix: not an archwheel temporary folder
    assert [r.folder for r in dead_folders(tmp_path)] == [dead]
    states = {r.folder.name: r.state for r in owned_folders(tmp_path, "archwheel-")}
    assert states == {
        "archwheel-work-dead": "dead",
        "archwheel-stage-" + live.name.removeprefix("archwheel-stage-"): "alive",
        "archwheel-work-foreign": "unknown",
        "archwheel-smoke-garbled": "unknown",
    }
    assert [r.folder for r in remove_dead_folders(tmp_path)] == [dead]
    assert not dead.exists() and not dead.with_name(dead.name + OWNER_SUFFIX).exists()
    for kept in (live, foreign, plain, garbled, other):
        assert kept.is_dir()
    remove_owned(live)
    assert not live.exists() and not live.with_name(live.name + OWNER_SUFFIX).exists()


def test_a_record_whose_folder_is_gone_is_removed_too(tmp_path: Path) -> None:
    gone = tmp_path / "archwheel-cache-gone"
    record = mark_folder(gone, _dead_owner())
    assert [r.folder for r in remove_dead_folders(tmp_path)] == [gone]
    assert not record.exists()


def test_a_killed_writers_partial_file_is_dead_and_a_live_ones_is_not(tmp_path: Path) -> None:
    import os
    import signal

    from archwheel.effects.files import atomic_writer
    from archwheel.effects.owner import dead_parts, remove_dead_parts

    code = (
        "import sys, time\nfrom pathlib import Path\n"
        "from archwheel.effects.files import atomic_writer\n"
        "with atomic_writer(Path(sys.argv[1])) as f:\n"
        "    f.write(b'half a wheel'); f.flush(); print('writing', flush=True); time.sleep(600)\n"
    )
    target = tmp_path / "pkg-1.0-py3-none-any.whl"
    child = subprocess.Popen([sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE,
                             text=True)  # fmt: skip
    assert child.stdout is not None and child.stdout.readline().strip() == "writing"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    [left] = [p for p in tmp_path.iterdir() if p.name.endswith(".part")]
    assert not target.exists()
    (tmp_path / ".other.part").write_bytes(b"not ours: no writer in its name")
    with atomic_writer(tmp_path / "live.whl") as handle:
        handle.write(b"in progress")
        assert dead_parts(tmp_path) == [left]  # this process's part is alive
        assert remove_dead_parts(tmp_path) == [left]
    assert not left.exists()
    assert (tmp_path / ".other.part").exists() and (
        tmp_path / "live.whl"
    ).read_bytes() == b"in progress"
