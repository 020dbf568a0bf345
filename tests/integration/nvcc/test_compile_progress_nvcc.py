"""The compile progress from real nvcc 13 runs: three ``.cu`` files compiled one after another
for two archs, each nvcc appending its ``--time`` rows (through ``NVCC_APPEND_FLAGS``, as every
archwheel extension build has it) to a record that starts with its header, as the work folder's
does, while the watcher's thread reads it (wheelbuild/run/compile_watch.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from archwheel.wheelbuild.compile.nvcc_progress import CompileProgress
from archwheel.wheelbuild.compile.nvcc_record import RECORD_HEADER
from archwheel.wheelbuild.run.compile_watch import CompileWatch

pytestmark = [pytest.mark.nvcc]

KERNEL = "__global__ void k{n}(float* x) {{ x[threadIdx.x] *= {n}.0f; }}\n"


def test_each_file_nvcc_finishes_is_reported_with_its_phases(nvcc: Path, tmp_path: Path) -> None:
    src = tmp_path / "csrc"
    src.mkdir()
    names = ["a.cu", "b.cu", "c.cu"]
    for n, name in enumerate(names):
        (src / name).write_text(KERNEL.format(n=n + 1))
    record = tmp_path / "nvcc-time.csv"
    record.write_text(RECORD_HEADER)
    env = {**os.environ, "NVCC_APPEND_FLAGS": f"--time {record}"}
    reports: list[CompileProgress] = []
    with CompileWatch(record, len(names), reports.append, interval=0.05):
        for name in names:
            subprocess.run(
                [str(nvcc), "-c", f"csrc/{name}", "-o", f"{name}.o",
                 "-gencode", "arch=compute_80,code=sm_80",
                 "-gencode", "arch=compute_90,code=sm_90"],
                cwd=tmp_path, env=env, check=True, timeout=300,
            )  # fmt: skip
    done = [r.done for r in reports]
    assert done == sorted(done) and done[-1] == 3, done
    assert set(done) >= {1, 2, 3}  # one report at least for each file done (each took seconds)
    last = reports[-1]
    assert last.total == 3
    assert dict(last.phases) == {"cicc": 6, "ptxas": 6, "fatbinary": 3, "host": 3}
    assert last.left_s == 0.0
    assert last.describe().startswith("compiled 3 of 3 .cu files (cicc 6, ptxas 6, fatbinary 3")
