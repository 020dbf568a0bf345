"""The build's record of its nvcc compiles (wheelbuild/compile/nvcc_record.py) from real nvcc 13 runs:
``--time FILE`` through ``NVCC_APPEND_FLAGS``, nvcc started by absolute path as cpp_extension
and CMake start it, several at once appending to one file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from archwheel.wheelbuild.compile.nvcc_record import (
    RECORD_HEADER,
    cuda_sources,
    never_compiled,
    parse_nvcc_record,
)

pytestmark = [pytest.mark.nvcc]

KERNEL = "__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n"


def test_every_compile_is_recorded_with_the_archs_ptxas_made(nvcc: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "csrc" / "cuda").mkdir(parents=True)
    for name in ("csrc/cuda/a.cu", "csrc/b.cu", "csrc/unused.cu"):
        (src / name).write_text(KERNEL)
    record = tmp_path / "nvcc-time.csv"
    env = {**os.environ, "NVCC_APPEND_FLAGS": f"--time {record}"}
    # one relative to its folder, one absolute, both at once (they append to one file)
    runs = [
        subprocess.Popen(
            [str(nvcc), "-c", "csrc/cuda/a.cu", "-o", "a.o",
             "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"],
            cwd=src, env=env,
        ),
        subprocess.Popen(
            [str(nvcc), "-c", str(src / "csrc" / "b.cu"), "-o", str(tmp_path / "b.o"),
             "-gencode", "arch=compute_90,code=compute_90"],
            cwd=tmp_path, env=env,
        ),
    ]  # fmt: skip
    assert [r.wait(timeout=300) for r in runs] == [0, 0]
    parsed = parse_nvcc_record(record.read_text())
    assert parsed.archs_of("csrc/cuda/a.cu") == {"sm_80", "sm_90"}
    assert parsed.archs_of(str(src / "csrc" / "b.cu")) == frozenset()  # PTX only: no ptxas
    files = ["csrc/cuda/a.cu", "csrc/b.cu", "csrc/unused.cu", "setup.py"]
    assert cuda_sources(files) == ("csrc/b.cu", "csrc/cuda/a.cu", "csrc/unused.cu")
    assert never_compiled(cuda_sources(files), parsed.sources, str(src)) == ("csrc/unused.cu",)
    assert never_compiled(cuda_sources(files), parsed.sources, str(src), ["csrc/un*.cu"]) == ()
    # ninja (cpp_extension) gives nvcc paths relative to its build folder inside the source
    assert never_compiled(("csrc/b.cu",), ["../../csrc/b.cu"], str(src)) == ()
    # CMake (scikit-build-core) from a temporary build folder: /tmp/x/build -> /build/src
    assert never_compiled(("csrc/b.cu",), ["../../../build/src/csrc/b.cu"], "/build/src") == ()
    assert never_compiled(("csrc/b.cu",), ["../../other/b2.cu"], str(src)) == ("csrc/b.cu",)


def test_a_record_that_starts_with_the_header_is_only_appended_to(
    nvcc: Path, tmp_path: Path
) -> None:
    """nvcc writes ``RECORD_HEADER`` into a record it creates (so the work folder's is the
    same file), and appends to one that exists: a row already there survives every nvcc,
    none of them truncates it (without the header written first, two nvcc starting at once
    each truncate the new file, and one loses its rows)."""
    (tmp_path / "k.cu").write_text(KERNEL)
    fresh = tmp_path / "fresh.csv"
    args = [str(nvcc), "--dryrun", "-c", "k.cu", "-o", "k.o", "-gencode",
            "arch=compute_90,code=sm_90"]  # fmt: skip
    subprocess.run([*args, "--time", str(fresh)], cwd=tmp_path, check=True, capture_output=True)
    assert fresh.read_text().splitlines(keepends=True)[0] == RECORD_HEADER
    record = tmp_path / "record.csv"
    sentinel = "first.cu , ptxas , x , y , sm_80 , nvcc , 1.0 , ms\n"
    record.write_text(RECORD_HEADER + sentinel)
    runs = [
        subprocess.Popen([*args, "--time", str(record)], cwd=tmp_path,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(4)
    ]  # fmt: skip
    assert [r.wait(timeout=300) for r in runs] == [0, 0, 0, 0]
    lines = record.read_text().splitlines(keepends=True)
    assert lines[:2] == [RECORD_HEADER, sentinel] and lines.count(RECORD_HEADER) == 1
    assert parse_nvcc_record(record.read_text()).archs_of("k.cu") == {"sm_90"}


def test_the_record_times_the_phases_nvcc_ran_and_not_a_dry_run(nvcc: Path, tmp_path: Path) -> None:
    """nvcc's ``--time`` rows carry each phase's milliseconds: a real compile's record sums
    them per group (front end, cicc, ptxas, fatbinary, host); the rows of a ``--dryrun`` (what
    the cache launcher records for the calls sccache takes) measure nothing and are counted as
    untimed, never as seconds."""
    (tmp_path / "k.cu").write_text(KERNEL)
    args = [str(nvcc), "-c", "k.cu", "-o", "k.o", "-gencode", "arch=compute_80,code=sm_80",
            "-gencode", "arch=compute_90,code=sm_90"]  # fmt: skip
    real, dry = tmp_path / "real.csv", tmp_path / "dry.csv"
    subprocess.run([*args, "--time", str(real)], cwd=tmp_path, check=True, capture_output=True)
    subprocess.run([*args, "--dryrun", "--time", str(dry)], cwd=tmp_path, check=True,
                   capture_output=True)  # fmt: skip
    timed = parse_nvcc_record(real.read_text())
    assert set(timed.phase_seconds) == {"front end", "cicc", "ptxas", "fatbinary", "host"}
    assert all(v > 0 for v in timed.phase_seconds.values()) and timed.untimed == 0
    assert timed.describe_phases().startswith("nvcc's phases, seconds summed over its calls:")
    # the host compiler named for nvcc (NVCC_CCBIN) names the host phases: grouped the same
    named = tmp_path / "named.csv"
    env = {**os.environ, "NVCC_CCBIN": "g++"}
    subprocess.run([*args, "--time", str(named)], cwd=tmp_path, check=True, capture_output=True,
                   env=env)  # fmt: skip
    assert "g++ (compiling)" in named.read_text()
    assert set(parse_nvcc_record(named.read_text()).phase_seconds) == set(timed.phase_seconds)
    untimed = parse_nvcc_record(dry.read_text())
    assert untimed.archs_of("k.cu") == {"sm_80", "sm_90"}  # the same rows, no time
    assert dict(untimed.phase_seconds) == {} and untimed.untimed >= 7
    assert "no times" in untimed.describe_phases()
