"""nvcc's refusal of a host gcc newer than it supports, from real nvcc 13 output, read as a known
cause of a failed compile (verdicts/compile_failure.py): seen when nvcc 13.0 met sid's gcc 16;
here the host compiler is made to say it is gcc 16, so nvcc's own check prints its own line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from archwheel.verdicts.compile_failure import HOST_COMPILER, classify_compile_failure

pytestmark = [pytest.mark.nvcc]


def test_a_host_gcc_newer_than_nvcc_accepts(nvcc: Path, tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    args = [str(nvcc), "-c", "k.cu", "-o", "k.o", "-Xcompiler", "-U__GNUC__",
            "-Xcompiler", "-D__GNUC__=16"]  # fmt: skip
    done = subprocess.run(
        args, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode != 0
    lines = [" ".join(args), *(done.stdout + done.stderr).splitlines()]
    cause = classify_compile_failure(lines)
    assert cause is not None and cause.kind == HOST_COMPILER
    assert "newer than this nvcc supports" in cause.cause
    assert 'system_packages = ["g++-15"]' in cause.fix and 'NVCC_CCBIN = "g++-15"' in cause.fix
    assert "unsupported GNU version! gcc versions later than 15" in cause.evidence
    assert "\n" not in cause.one_line()
