"""``archwheel build`` hit in the middle of real work: SIGKILL in each phase, the work
and output file systems filling up (small tmpfs mounts), and the engine stopped and started.

Each build is the example recipe (one arch) against an undisturbed build of the same inputs. What
must hold: the run (or the next one) ends with one line naming the fault and a documented exit
code; no container is left; no wheel, no ``.part`` and no provenance without its wheel reaches the
output folder; the next run cleans what the killed one left (with a line) and makes the same
wheel (sha256). Whole builds: these run in ``nox -s faults`` (marker ``costly``), not in the
README's ``nox -s tests``; figures in docs/faults.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.components import require
from tests.support.containers_support import containers_with_label

pytestmark = [
    pytest.mark.faults, pytest.mark.costly, pytest.mark.docker, pytest.mark.nvcc,
    pytest.mark.slow,
]  # fmt: skip
CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]
ARCH = "8.0"
# the example's [repair] platform = "auto": manylinux_2_34 for a build on bookworm
WHEEL = "archwheel_example-0.1.0-py3-none-manylinux_2_34_x86_64.whl"
LEFT = "left by a build that did not finish"


@dataclass
class Builds:
    env: dict[str, str]
    volume: str
    volumes: list[str] = field(default_factory=list)

    def command(
        self, out: Path, *, temp: Path | None = None, volume: str | None = None, arch: str = ARCH
    ) -> tuple[list[str], dict[str, str], str]:
        label = f"archwheel.test={uuid.uuid4().hex}"
        args = [*CLI, "build", "--recipe", "example", "--arch", arch, "--out", str(out),
                "--ccache-volume", volume or self.volume, "--format", "json"]  # fmt: skip
        env = {**self.env, "ARCHWHEEL_RUN_LABEL": label}
        if temp is not None:
            temp.mkdir(parents=True, exist_ok=True)
            env["TMPDIR"] = str(temp)
        return args, env, label

    def run(self, out: Path, **kwargs: object) -> tuple[subprocess.CompletedProcess[str], str]:
        args, env, label = self.command(out, **kwargs)  # type: ignore[arg-type]
        proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=1800,
                              check=False)  # fmt: skip
        return proc, label

    def fresh_volume(self) -> str:
        volume = f"archwheel-test-fault-{uuid.uuid4().hex[:8]}"
        self.volumes.append(volume)
        return volume


@pytest.fixture(scope="module")
def builds(docker_engine: str) -> Iterator[Builds]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    env.pop("ARCHWHEEL_CACHE_URL", None)
    made = subprocess.run([*CLI, "base-image"], env=env, capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    found = Builds(env, f"archwheel-test-fault-{uuid.uuid4().hex[:8]}")
    found.volumes.append(found.volume)
    yield found
    subprocess.run(["docker", "volume", "rm", "--force", *found.volumes], capture_output=True,
                   check=False)  # fmt: skip


@pytest.fixture(scope="module")
def undisturbed(builds: Builds, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The wheel of an undisturbed build; it also fills the shared cache volume, so the builds
    killed later are quick and each phase is reached in seconds."""
    proc, _ = builds.run(tmp_path_factory.mktemp("undisturbed"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    sha: str = json.loads(proc.stdout)["sha256"]
    return sha


def _gone(label: str, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while containers_with_label(["docker"], label):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def _placed(folder: Path) -> list[str]:
    """What a build placed (or half-placed) in an output folder: logs aside."""
    if not folder.exists():
        return []
    return sorted(p.name for p in folder.iterdir() if p.name != "logs")


def _leftovers(temp: Path) -> list[str]:
    return sorted(p.name for p in temp.iterdir() if p.name.startswith("archwheel-"))


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` at ``where`` (root only: the CI runs as root)."""
    require(os.geteuid() == 0, "mounting a tmpfs needs root")
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=1777", "tmpfs", str(where)],
                   check=True, capture_output=True)  # fmt: skip
    try:
        yield where
    finally:
        subprocess.run(["umount", "--lazy", str(where)], check=False, capture_output=True)


# -- SIGKILL in each phase -----------------------------------------------------------------------

# The header line archwheel prints when a phase starts; the kill follows at once. The images
# phase (checked, not made: the module's first build made them), prepare (copy-source), and the
# three host-side phases after the compile. The compile itself: tests/integration/docker/
# test_build.py::test_a_sigkilled_build_leaves_no_container_and_the_next_one_cleans_up_and_matches.
PHASES = {
    "images": "== builder-image:",
    "prepare": "== copy-source:",
    "package": "== package:",
    "repair": "== repair:",
    "audit": "== audit:",
}


@pytest.mark.parametrize("phase", list(PHASES))
def test_a_build_sigkilled_in_a_phase_leaves_nothing_the_next_build_does_not_remove(
    builds: Builds, undisturbed: str, tmp_path: Path, phase: str
) -> None:
    out, temp = tmp_path / "out", tmp_path / "tmp"
    args, env, label = builds.command(out, temp=temp)
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    seen: list[str] = []
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            seen.append(line)
            if line.startswith(PHASES[phase]):
                proc.send_signal(signal.SIGKILL)
                break
        else:
            raise AssertionError(f"the build never reached {phase}: " + "".join(seen[-30:]))
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert _gone(label), containers_with_label(["docker"], label)
    assert [name for name in _placed(out) if name.endswith(".whl")] == []
    left = _leftovers(temp)
    if phase != "images":  # the staging folder (and the work folder) exist from then on
        assert left, seen[-5:]
    again, label2 = builds.run(out, temp=temp)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["sha256"] == undisturbed
    removed = [line for line in again.stderr.splitlines() if LEFT in line]
    # what the killed run left in the temporary folder, each named once by the next run
    assert sorted(name for name in left if not name.endswith(".owner")) == sorted(
        Path(line.split()[1].rstrip(",")).name for line in removed if "archwheel-" in line
    ), (left, removed)
    assert all(f"pid {proc.pid} on " in line for line in removed)
    assert _leftovers(temp) == []
    assert _placed(out) == sorted([WHEEL, f"{WHEEL}.provenance.json", f"{WHEEL}.smoke.py"])
    assert _gone(label2, 5)


# -- file systems that fill up ---------------------------------------------------------------


def test_a_work_file_system_that_fills_during_the_compile(
    builds: Builds, undisturbed: str, tmp_path: Path
) -> None:
    """A cold compile (a fresh cache volume) in a 3 MiB TMPDIR: nvcc's intermediate files do
    not fit. One line naming the file system; nothing left in it or in the output folder."""
    out = tmp_path / "out"
    volume = builds.fresh_volume()
    with small_tmpfs(tmp_path / "small", "3m") as small:
        proc, label = builds.run(out, temp=small, volume=volume)
        assert proc.returncode == 5, proc.stderr[-3000:]
        errors = [line for line in proc.stderr.splitlines() if line.startswith("archwheel: error")]
        assert len(errors) == 1 and "ran out of disk space" in errors[0], proc.stderr[-3000:]
        assert f"its work folder in {small}" in errors[0] and "No space left on device" in errors[0]
        assert "Traceback" not in proc.stderr
        assert _leftovers(small) == []
        assert _gone(label, 5)
    assert _placed(out) == []
    # the same build with room: the compiles that failed were not cached as objects
    again, _ = builds.run(tmp_path / "again", temp=tmp_path / "tmp", volume=volume)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["sha256"] == undisturbed


def test_a_cache_volume_that_fills_during_the_compile(
    builds: Builds, undisturbed: str, tmp_path: Path
) -> None:
    """The compiler cache on a 100 KiB file system (a tmpfs behind a bind volume: a tmpfs
    volume of the engine would be empty again for every container): a cold compile stores the
    first objects and then has no room. The build goes on and says so in one warning; the
    next build on the same full volume uses what was stored, and both wheels are the
    undisturbed one: a store that did not fit never serves a partial object."""
    with small_tmpfs(tmp_path / "cache", "100k") as cache:
        volume = builds.fresh_volume()
        subprocess.run(["docker", "volume", "create", "--opt", "type=none", "--opt", "o=bind",
                        "--opt", f"device={cache}", volume], check=True,
                       capture_output=True)  # fmt: skip
        try:
            first, label = builds.run(tmp_path / "first", volume=volume)
            assert first.returncode == 0, first.stderr[-3000:]
            warned = [line for line in first.stderr.splitlines()
                      if line.startswith("warning: compiler cache: the file system of volume")]  # fmt: skip
            assert len(warned) == 1, first.stderr[-3000:]
            assert volume in warned[0] and "not stored" in warned[0]
            assert "Traceback" not in first.stderr and _gone(label, 5)
            report = json.loads(first.stdout)
            assert report["sha256"] == undisturbed
            provenance = json.loads((tmp_path / "first" / f"{WHEEL}.provenance.json").read_text())
            room = provenance["compiler_cache"]["file_system"]
            assert room["size"] <= 100 * 1024 and room["free_after_compile"] < 10 * 1024, room
            stored = [p for p in cache.rglob("*") if p.is_file() and p.stat().st_size > 1024]
            assert stored, "nothing fitted: the test no longer fills the volume mid-compile"
            second, _ = builds.run(tmp_path / "second", volume=volume)
            assert second.returncode == 0, second.stderr[-3000:]
            assert json.loads(second.stdout)["sha256"] == undisturbed
            provenance = json.loads((tmp_path / "second" / f"{WHEEL}.provenance.json").read_text())
            results = [c["result"] for c in provenance["compiler_cache"]["compiles"]]
            assert "hit" in results and "miss" in results, results
        finally:
            subprocess.run(["docker", "volume", "rm", "--force", volume], capture_output=True,
                           check=False)  # fmt: skip


def test_a_temporary_file_system_that_fills_while_packaging(
    builds: Builds, undisturbed: str, tmp_path: Path
) -> None:
    """A warm build (every object from the cache: the compile writes little) in a 3 MiB TMPDIR:
    the re-pack of the wheel does not fit. One line; nothing left."""
    out = tmp_path / "out"
    with small_tmpfs(tmp_path / "small", "3m") as small:
        proc, label = builds.run(out, temp=small)
        assert proc.returncode == 5, proc.stderr[-3000:]
        errors = [line for line in proc.stderr.splitlines() if line.startswith("archwheel: error")]
        assert len(errors) == 1 and "ran out of disk space" in errors[0], proc.stderr[-3000:]
        assert str(small) in errors[0] and "Traceback" not in proc.stderr
        assert _leftovers(small) == []
        assert _gone(label, 5)
    assert _placed(out) == []


def test_an_output_folder_without_room_for_the_wheel_keeps_what_it_had(
    builds: Builds, undisturbed: str, tmp_path: Path
) -> None:
    """--out on a 300 KiB tmpfs that holds an older wheel of the same name and its provenance:
    the new wheel (about 0.5 MiB) does not fit. Nothing of the new build is placed (no
    provenance without its wheel, no part) and the old files are as they were."""
    with small_tmpfs(tmp_path / "out", "300k") as out:
        (out / WHEEL).write_bytes(b"an older wheel")
        (out / f"{WHEEL}.provenance.json").write_text('{"older": true}\n')
        proc, label = builds.run(out, temp=tmp_path / "tmp")
        assert proc.returncode == 5, proc.stderr[-3000:]
        errors = [line for line in proc.stderr.splitlines() if line.startswith("archwheel: error")]
        assert len(errors) == 1, proc.stderr[-3000:]
        assert f"{out}: cannot place {WHEEL}" in errors[0] and "nothing was placed" in errors[0]
        assert _placed(out) == sorted([WHEEL, f"{WHEEL}.provenance.json"])
        assert (out / WHEEL).read_bytes() == b"an older wheel"
        assert (out / f"{WHEEL}.provenance.json").read_text() == '{"older": true}\n'
        assert _leftovers(tmp_path / "tmp") == []
        assert _gone(label, 5)
    again, _ = builds.run(tmp_path / "again", temp=tmp_path / "tmp")
    assert again.returncode == 0 and json.loads(again.stdout)["sha256"] == undisturbed


# -- the engine stopped and started during a build ----------------------------------------------


def _dockerd() -> tuple[int, list[str]]:
    found = subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True, text=True,
                           check=False).stdout.split()  # fmt: skip
    require(len(found) == 1, "one dockerd runs on this host, started outside a service manager")
    pid = int(found[0])
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    return pid, [a.decode() for a in argv]


def _start_dockerd(argv: list[str], log: Path) -> None:
    with log.open("ab") as sink:
        subprocess.Popen(argv, stdout=sink, stderr=sink, stdin=subprocess.DEVNULL,
                         start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        assert time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.5)


def test_dockerd_stopped_during_the_compile_then_started(
    builds: Builds, undisturbed: str, tmp_path: Path
) -> None:
    """dockerd (the one .ci/run starts) stopped with SIGTERM while nvcc runs: the build ends
    with one line naming the engine; after dockerd is started again the next build removes
    what the first left and makes the same wheel."""
    pid, argv = _dockerd()
    require(shutil.which(argv[0]) is not None or Path(argv[0]).exists(), "dockerd's program")
    out, temp = tmp_path / "out", tmp_path / "tmp"
    volume = builds.fresh_volume()  # cold: the compile lasts long enough to be hit
    args, env, label = builds.command(out, temp=temp, volume=volume, arch="8.6")
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    seen: list[str] = []
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            seen.append(line)
            if "archwheel-example: 7 sources" in line:
                time.sleep(3)
                os.kill(pid, signal.SIGTERM)
                break
        else:
            raise AssertionError("the build never compiled: " + "".join(seen[-30:]))
        rest = proc.stderr.read()
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
        deadline = time.monotonic() + 60
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        _start_dockerd(argv, tmp_path / "dockerd.log")
    assert proc.returncode == 5, rest[-3000:]
    errors = [line for line in rest.splitlines() if line.startswith("archwheel: error")]
    assert len(errors) == 1, rest[-3000:]
    assert "Traceback" not in rest
    assert "out of memory" not in errors[0]
    assert "engine" in errors[0] or "stopped from outside" in errors[0], errors[0]
    assert _placed(out) == []
    assert _gone(label, 60), containers_with_label(["docker"], label)
    again, _ = builds.run(out, temp=temp, volume=volume, arch="8.6")
    assert again.returncode == 0, again.stderr[-3000:]
    assert _leftovers(temp) == []
    # the same inputs as an undisturbed 8.6 build: the one the second run compared itself with
    undisturbed_86, _ = builds.run(tmp_path / "undisturbed", temp=temp, arch="8.6")
    assert undisturbed_86.returncode == 0, undisturbed_86.stderr[-3000:]
    assert json.loads(again.stdout)["sha256"] == json.loads(undisturbed_86.stdout)["sha256"]
