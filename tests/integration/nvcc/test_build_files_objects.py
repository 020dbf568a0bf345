"""A build.ninja proved, its CUDA steps compiled with their own commands, the objects audited.

The same shape as PyTorch's configured build (CMake's CUDA rule, FLAGS per build, the sm_90a
addition RowwiseScaledMM.cu gets from cmake/Codegen.cmake), with tiny kernels: the proof says
what each object will hold before any compile, and the audit of the relocatable objects
(ET_REL ``.o`` with a ``.nv_fatbin`` section) says what they hold after.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from archwheel.binary.buildfile import read_ninja
from tests.support.cli import CliRun

KERNEL = "__global__ void k(float* x, float y) { x[threadIdx.x] += y; }\n"
TWO = "-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90"


@pytest.mark.nvcc
def test_steps_compiled_by_their_own_command_hold_what_the_proof_said(
    nvcc: Path, cli_run: CliRun, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    kernels = src / "aten/src/ATen/native/cuda"
    kernels.mkdir(parents=True)
    (kernels / "Fill.cu").write_text(KERNEL)
    (kernels / "RowwiseScaledMM.cu").write_text(KERNEL)
    build = tmp_path / "build"
    build.mkdir()
    (build / "build.ninja").write_text(
        f"NVCC = {nvcc}\n"
        "rule CUDA_COMPILER__torch_cuda_unscanned_Release\n"
        "  command = ${LAUNCHER}$NVCC -forward-unknown-to-host-compiler $DEFINES $FLAGS "
        "-x cu -c $in -o $out\n"
        f"build Fill.cu.o: CUDA_COMPILER__torch_cuda_unscanned_Release {kernels}/Fill.cu\n"
        f"  FLAGS = {TWO} -Xfatbin -compress-all\n"
        "build RowwiseScaledMM.cu.o: CUDA_COMPILER__torch_cuda_unscanned_Release "
        f"{kernels}/RowwiseScaledMM.cu\n"
        f"  FLAGS = {TWO} -gencode arch=compute_90a,code=sm_90a\n"
    )
    (tmp_path / "version.txt").write_text("2.6.0\n")  # beside the build folder, as in PyTorch
    code, out, err = cli_run(
        "build-files", str(build), "--arch", "8.0;9.0", "--nvcc", "13.0", "--format", "json"
    )
    assert code == 0, out + err
    proof = json.loads(out)
    assert (proof["cuda_steps"], proof["exact"], proof["with_additions"]) == (2, 1, 1)
    assert proof["torch"] == "2.6.0"
    assert [(a["image"], a["rule"]) for a in proof["additions"]] == [
        ("sm_90a", "pytorch-rowwise-scaled-mm-sm90a")
    ]
    for step in read_ninja((build / "build.ninja").read_text()).cuda:
        subprocess.run(step.argv, cwd=build, check=True, capture_output=True)
    for name, expect, sass in (
        ("Fill.cu.o", "8.0;9.0", ["sm_80", "sm_90"]),
        ("RowwiseScaledMM.cu.o", "8.0;9.0;9.0a", ["sm_80", "sm_90", "sm_90a"]),
    ):
        code, out, err = cli_run("audit", str(build / name), "--expect", expect, "--format", "json")
        assert code == 0, out + err
        (library,) = json.loads(out)["inputs"][0]["libraries"]
        assert library["file_kind"] == "relocatable"
        images = [(i["kind"], i["arch"], i["count"]) for i in library["images"]]
        assert images == [("sass", arch, 1) for arch in sass]  # one cubin each, no PTX
