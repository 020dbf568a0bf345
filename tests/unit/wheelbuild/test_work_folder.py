"""The build's work folder is written by the build (a recipe's command, an sdist's setup.py,
inside the container) and read by archwheel on the host, often as root: nothing there is
followed out of it or waited on. The runner's readers of it, on real links and FIFOs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from archwheel.errors import BuildError
from archwheel.wheelbuild.compile.remote_cache import SERVER_LOG
from archwheel.wheelbuild.planning.plan import BUILD
from archwheel.wheelbuild.run import workfolder
from archwheel.wheelbuild.run.cache_report import cache_nearly_full
from tests.support.fuzz import watchdog


def test_the_built_wheel_must_be_a_regular_file(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    dist.mkdir()
    host_file = tmp_path / "host-secret"
    host_file.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    (dist / "demo-1.0-py3-none-any.whl").symlink_to(host_file)
    with pytest.raises(BuildError, match="as a link or a special file"):
        workfolder.built_wheels(dist)
    (dist / "demo-1.0-py3-none-any.whl").unlink()
    os.mkfifo(dist / "demo-1.0-py3-none-any.whl")
    with pytest.raises(BuildError, match="as a link or a special file"):
        workfolder.built_wheels(dist)
    (dist / "demo-1.0-py3-none-any.whl").unlink()
    (dist / "demo-1.0-py3-none-any.whl").write_bytes(b"wheel")
    (dist / "notes.txt").symlink_to(host_file)  # not a wheel: not looked at
    assert workfolder.built_wheels(dist) == [dist / "demo-1.0-py3-none-any.whl"]


def test_a_dist_folder_made_a_link_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "demo-1.0-py3-none-any.whl").write_bytes(b"wheel")
    (tmp_path / "dist").symlink_to(elsewhere)
    with pytest.raises(BuildError, match="a symbolic link"):
        workfolder.built_wheels(tmp_path / "dist")
    assert workfolder.built_wheels(tmp_path / "missing") == []


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_the_compile_log_is_not_waited_on_or_followed(tmp_path: Path, kind: str) -> None:
    log = tmp_path / SERVER_LOG.removeprefix(BUILD + "/")
    log.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(log)
    else:
        target = tmp_path / "host.log"
        target.write_text("x] [a.o]: compile result: cache miss\n")  # read, it would be one record
        log.symlink_to(target)
    with watchdog(20):
        assert workfolder.read_compiles(tmp_path) == ()


def test_the_cache_volume_room_is_read_from_real_df_output(tmp_path: Path) -> None:
    text = subprocess.run(["df", "-Pk", str(tmp_path)], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip
    room = workfolder.parse_df(text)
    fs = os.statvfs(tmp_path)
    assert room is not None and room.size == fs.f_blocks * fs.f_frsize // 1024 * 1024
    assert abs(room.free - fs.f_bavail * fs.f_frsize) < 64 * 2**20  # others write meanwhile
    assert workfolder.parse_df("") is None
    assert workfolder.parse_df("df: /sccache: No such file or directory\n") is None


@pytest.mark.parametrize(
    ("size", "free", "full"),
    [
        (100 * 1024, 0, True),  # the fault test's tmpfs
        (6 * 2**20, 6 * 2**20 - 140 * 1024, False),  # a small volume, mostly free
        (6 * 2**20, 500 * 1024, True),  # less than a tenth of it free
        (100 * 2**30, 200 * 2**20, True),  # a large disk nearly full
        (100 * 2**30, 2 * 2**30, False),
    ],
)
def test_a_cache_is_nearly_full_below_a_tenth_or_256_mib(size: int, free: int, full: bool) -> None:
    assert cache_nearly_full(workfolder.CacheRoom(size, free)) is full
