"""The compiler-cache key covers what nvcc takes from the environment.

Real nvcc, real ccache 4.7, a real Redis server reached through archwheel's relay, and
archwheel's launcher exactly as builds write it (build/remote_cache.py); each "machine" is an
empty local cache folder. The source includes a header that only ``NVCC_APPEND_FLAGS=-I...``
makes visible, as ``cusparse.h`` was in the case seen: a compile without that flag cannot
succeed, and with the launcher the cache does not make it succeed. The control shows that
ccache alone does (the bug is real, so this test can fail).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from archwheel.effects.redis_relay import RedisAddress, UnixRelay
from archwheel.wheelbuild.remote_cache import launcher_script, toolkit_id_command
from tests.support.components import require
from tests.support.redis_server import RedisServer, redis_server

pytestmark = [pytest.mark.nvcc]

KERNEL = """\
#include "extra.h"
__global__ void scale(float* x) { x[threadIdx.x] *= EXTRA_FACTOR; }
"""


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with redis_server() as running:
        yield running


@dataclass(frozen=True)
class Bench:
    root: Path
    nvcc: Path
    ccache: str
    relay: UnixRelay

    def toolkit_id(self, name: str, extra: str = "") -> Path:
        """The toolkit identity as the build's cache-key step writes it (+ ``extra``)."""
        path = self.root / name
        cuda_home = self.nvcc.parent.parent
        env = {**os.environ, "CUDA_HOME": str(cuda_home), "PATH": self.path(None)}
        subprocess.run(toolkit_id_command(str(path)), env=env, check=True, capture_output=True)
        if extra:
            path.write_text(path.read_text() + extra)
        return path

    def launcher(self, toolkit_id: Path) -> Path:
        folder = self.root / f"launcher-{toolkit_id.name}"
        folder.mkdir(exist_ok=True)
        script = folder / "ccache"
        script.write_text(launcher_script(str(toolkit_id)))
        script.chmod(0o755)
        return folder

    def path(self, launcher: Path | None) -> str:
        front = f"{launcher}:" if launcher else ""
        return f"{front}{self.nvcc.parent}:/usr/local/bin:/usr/bin:/bin"

    def compile(
        self, machine: str, launcher: Path | None, env: dict[str, str] | None = None
    ) -> tuple[int, dict[str, int]]:
        """One compile on a "machine" (its own local cache); exit code and ccache counters."""
        cache = self.root / "machines" / machine
        base = {k: v for k, v in os.environ.items() if not k.startswith(("CCACHE_", "NVCC_"))}
        run_env = {
            **base,
            **(env or {}),
            "PATH": self.path(launcher),
            "CCACHE_DIR": str(cache),
            "CCACHE_BASEDIR": str(self.root),
            "CCACHE_NOHASHDIR": "1",
            "CCACHE_COMPILERCHECK": "content",
            "CCACHE_REMOTE_STORAGE": f"redis+unix:{self.relay.path}",
        }
        src = self.root / "src"
        proc = subprocess.run(
            ["ccache", str(self.nvcc), "-c", "k.cu", "-o", f"k-{machine}.o",
             "-gencode=arch=compute_80,code=sm_80"],
            cwd=src, env=run_env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        stats = subprocess.run(
            [self.ccache, "--print-stats"], env=run_env, capture_output=True, text=True, check=True
        ).stdout
        counters = {}
        for line in stats.splitlines():
            key, _, value = line.partition("\t")
            if value.strip().isdigit():
                counters[key] = int(value)
        return proc.returncode, counters


@pytest.fixture
def bench(nvcc: Path, server: RedisServer, tmp_path: Path) -> Iterator[Bench]:
    ccache = shutil.which("ccache")
    require(ccache is not None, "ccache is not installed (apt-get install ccache)")
    assert ccache is not None
    (tmp_path / "src" / "inc").mkdir(parents=True)
    (tmp_path / "src" / "k.cu").write_text(KERNEL)
    (tmp_path / "src" / "inc" / "extra.h").write_text("#define EXTRA_FACTOR 2.0f\n")
    server.cli("FLUSHALL")
    with UnixRelay(RedisAddress("127.0.0.1", server.port)) as relay:
        yield Bench(tmp_path, nvcc, ccache, relay)


def hits(counters: dict[str, int]) -> int:
    return counters.get("direct_cache_hit", 0) + counters.get("preprocessed_cache_hit", 0)


def test_environment_flags_are_part_of_the_key(bench: Bench) -> None:
    launcher = bench.launcher(bench.toolkit_id("toolkit-id"))
    include = {"NVCC_APPEND_FLAGS": f"-I{bench.root / 'src' / 'inc'}"}

    code, first = bench.compile("one", launcher, include)
    assert code == 0 and first.get("cache_miss") == 1 and first.get("remote_storage_write", 0) > 0
    # A second machine with the same flags gets the object from the server: the cache works.
    code, second = bench.compile("two", launcher, include)
    assert code == 0 and hits(second) == 1 and second.get("remote_storage_hit") == 1
    # Without the flag the header cannot be found: the compile fails, as it must on its own.
    code, third = bench.compile("three", launcher)
    assert code != 0
    assert hits(third) == 0
    # Another flag value, another key.
    code, fourth = bench.compile("four", launcher, {**include, "NVCC_PREPEND_FLAGS": "-DX=1"})
    assert code == 0 and hits(fourth) == 0 and fourth.get("cache_miss") == 1


def test_ccache_alone_builds_what_cannot_build(bench: Bench) -> None:
    """The control: plain ccache "builds" the header-less compile from the flagged entry."""
    include = {"NVCC_APPEND_FLAGS": f"-I{bench.root / 'src' / 'inc'}"}
    code, first = bench.compile("plain-one", None, include)
    assert code == 0 and first.get("cache_miss") == 1
    code, second = bench.compile("plain-two", None)
    assert code == 0 and hits(second) == 1  # a wheel its own configuration cannot produce


def test_toolkit_identity_is_part_of_the_key(bench: Bench) -> None:
    include = {"NVCC_APPEND_FLAGS": f"-I{bench.root / 'src' / 'inc'}"}
    same = bench.launcher(bench.toolkit_id("toolkit-a"))
    code, first = bench.compile("a", same, include)
    assert code == 0 and first.get("cache_miss") == 1
    other = bench.launcher(bench.toolkit_id("toolkit-b", extra="ptxas of another build\n"))
    code, second = bench.compile("b", other, include)
    assert code == 0 and hits(second) == 0 and second.get("cache_miss") == 1
    # Same identity, other machine: a hit (the identity is stable, not random).
    again = bench.launcher(bench.toolkit_id("toolkit-c"))
    code, third = bench.compile("c", again, include)
    assert code == 0 and hits(third) == 1


def test_a_missing_toolkit_identity_compiles_without_the_cache(bench: Bench) -> None:
    launcher = bench.launcher(bench.root / "no-such-toolkit-id")
    include = {"NVCC_APPEND_FLAGS": f"-I{bench.root / 'src' / 'inc'}"}
    for machine in ("x", "y"):
        code, counters = bench.compile(machine, launcher, include)
        assert code == 0 and hits(counters) == 0 and counters.get("cache_miss", 0) == 0
