"""The shared compiler cache's server failing in the middle of real builds: a server
that answers garbage, one that hangs, and Debian's redis-server killed with SIGKILL during the
compile and started again. Each build is the example recipe, cold (a fresh local cache volume,
so every compile asks the server), against an undisturbed build of the same inputs.

What must hold: the build ends 0 with one warning line naming the remote-cache errors, the wheel
is byte-identical to the undisturbed one (a cache fault costs time, never bytes), no container
is left, and after a restart the next build fills the server again. Whole builds: these run in
``nox -s faults`` (marker ``costly``), not in the README's ``nox -s tests``; figures in
docs/faults.md.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.containers_support import containers_with_label
from tests.support.faulty_redis import Mode, faulty_redis
from tests.support.redis_server import redis_server

pytestmark = [
    pytest.mark.faults, pytest.mark.costly, pytest.mark.docker, pytest.mark.nvcc,
    pytest.mark.slow,
]  # fmt: skip
CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]
ARCH = "8.0"
WARNING = "remote-cache errors during the build"


@dataclass
class Builds:
    env: dict[str, str]
    volumes: list[str] = field(default_factory=list)

    def command(self, out: Path, url: str | None) -> tuple[list[str], dict[str, str], str]:
        volume = f"archwheel-test-fault-{uuid.uuid4().hex[:8]}"
        self.volumes.append(volume)
        label = f"archwheel.test={uuid.uuid4().hex}"
        args = [*CLI, "build", "--recipe", "example", "--arch", ARCH, "--out", str(out),
                "--ccache-volume", volume, "--format", "json"]  # fmt: skip
        if url:
            args += ["--cache-url", url]
        return args, {**self.env, "ARCHWHEEL_RUN_LABEL": label}, label

    def run(
        self, out: Path, url: str | None = None
    ) -> tuple[subprocess.CompletedProcess[str], str]:
        args, env, label = self.command(out, url)
        proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=1800,
                              check=False)  # fmt: skip
        return proc, label


@pytest.fixture(scope="module")
def builds(docker_engine: str) -> Iterator[Builds]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    env.pop("ARCHWHEEL_CACHE_URL", None)
    made = subprocess.run([*CLI, "base-image"], env=env, capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    found = Builds(env)
    yield found
    subprocess.run(["docker", "volume", "rm", "--force", *found.volumes], capture_output=True,
                   check=False)  # fmt: skip


@pytest.fixture(scope="module")
def undisturbed(builds: Builds, tmp_path_factory: pytest.TempPathFactory) -> str:
    proc, _ = builds.run(tmp_path_factory.mktemp("undisturbed"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    sha: str = json.loads(proc.stdout)["sha256"]
    return sha


def remote_record(result: dict[str, object]) -> dict[str, object]:
    provenance = json.loads(Path(str(result["provenance"])).read_text())
    remote = provenance["compiler_cache"]["remote"]
    assert isinstance(remote, dict)
    return remote


def check_faulted(proc: subprocess.CompletedProcess[str], label: str, undisturbed: str) -> None:
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["sha256"] == undisturbed  # a cache fault costs time, never bytes
    warnings = [line for line in proc.stderr.splitlines() if WARNING in line]
    assert len(warnings) == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    remote = remote_record(result)
    assert int(str(remote["errors"])) + int(str(remote.get("relay_failures", 0))) > 0
    assert containers_with_label(["docker"], label) == []


@pytest.mark.parametrize("mode", ["garbage", "hang"])
def test_a_server_that_answers_wrong_costs_the_cache_not_the_build(
    builds: Builds, undisturbed: str, tmp_path: Path, mode: Mode
) -> None:
    with faulty_redis(mode) as server:
        proc, label = builds.run(tmp_path / "out", server.url)
        assert server.commands > 0  # the compiles did ask it
    check_faulted(proc, label, undisturbed)


def test_redis_killed_during_the_compile_then_restarted(
    builds: Builds, undisturbed: str, tmp_path: Path
) -> None:
    with redis_server() as server:
        args, env, label = builds.command(tmp_path / "killed", server.url)
        proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)  # fmt: skip
        seen: list[str] = []
        assert proc.stderr is not None
        deadline = time.monotonic() + 900
        for line in proc.stderr:
            seen.append(line)
            if "archwheel-example: 7 sources" in line:
                time.sleep(3)  # nvcc is compiling; sccache has asked the server for each step
                os.kill(server.pid, signal.SIGKILL)
                break
            assert time.monotonic() < deadline, "".join(seen[-20:])
        else:
            raise AssertionError("the build ended before compiling: " + "".join(seen[-30:]))
        out, rest = proc.communicate(timeout=1800)
        port = server.port
    check_faulted(
        subprocess.CompletedProcess(args, proc.returncode, out, "".join(seen) + rest),
        label, undisturbed,
    )  # fmt: skip
    # the server back (empty: no persistence), on the same port: the next build fills it
    with redis_server(port=port) as again:
        proc2, label2 = builds.run(tmp_path / "again", again.url)
        assert proc2.returncode == 0, proc2.stderr[-3000:]
        assert json.loads(proc2.stdout)["sha256"] == undisturbed
        assert WARNING not in proc2.stderr
        assert again.dbsize() > 0
    assert containers_with_label(["docker"], label2) == []
