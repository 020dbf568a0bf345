"""Reproducible wheels: nvcc's own determinism (the re-pack and the comparison are in
tests/unit/wheelbuild/test_build_reproducible.py).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

# -- nvcc itself -------------------------------------------------------------------------------

KERNEL = """\
template <typename T> __global__ void axpy(int n, T a, const T* x, T* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" void run(int n, float a, const float* x, float* y) {
    axpy<float><<<(n + 255) / 256, 256>>>(n, a, x, y);
}
"""


def _compile(nvcc: Path, folder: Path, *extra: str) -> bytes:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "k.cu").write_text(KERNEL)
    subprocess.run(
        [str(nvcc), "-c", "k.cu", "-o", "k.o", "-Xcompiler", "-fPIC",
         "-gencode=arch=compute_80,code=sm_80", "-Xfatbin", "-compress-all", *extra],
        cwd=folder, check=True, capture_output=True,
    )  # fmt: skip
    return (folder / "k.o").read_bytes()


@pytest.mark.nvcc
def test_nvcc_objects_embed_the_pid_unless_objtemp(nvcc: Path, tmp_path: Path) -> None:
    """Why the example backend passes -objtemp: without it two compiles never match."""
    plain = [_compile(nvcc, tmp_path / f"plain{i}") for i in range(2)]
    assert plain[0] != plain[1]
    assert b"tmpxft_" in plain[0]
    fixed = [_compile(nvcc, tmp_path / f"objtemp{i}", "-objtemp") for i in range(2)]
    assert fixed[0] == fixed[1]
    assert b"tmpxft_" not in fixed[0]
    shutil.rmtree(tmp_path)
