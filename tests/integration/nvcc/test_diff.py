"""diff on two nvcc builds with different arch lists."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.builders import write_zip
from tests.support.cli import CliRun
from tests.support.diff_documents import TAG


@pytest.mark.nvcc
def test_two_builds_with_different_arch_lists(nvcc: Path, cli_run: CliRun, tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n"
                      'extern "C" void launch(float* x) { k<<<1, 32>>>(x); }\n')  # fmt: skip
    wheels = []
    for label, gencode in (
        ("1.0", ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90"]),
        ("1.1", ["-gencode=arch=compute_90,code=sm_90",
                 "-gencode=arch=compute_120,code=[sm_120,compute_120]"]),
    ):  # fmt: skip
        lib = tmp_path / f"k{label}.so"
        subprocess.run(
            [str(nvcc), "-shared", "-Xcompiler", "-fPIC", *gencode, "-o", str(lib), str(source)],
            check=True, capture_output=True,
        )  # fmt: skip
        meta = f"Metadata-Version: 2.1\nName: kern\nVersion: {label}\n".encode()
        wheels.append(
            write_zip(
                tmp_path / f"kern-{label}-{TAG}.whl",
                [("kern/_k.so", lib.read_bytes()), (f"kern-{label}.dist-info/METADATA", meta)],
            )
        )
    code, out, err = cli_run("diff", str(wheels[0]), str(wheels[1]), "--format", "json")
    assert code == 1, out + err
    doc = json.loads(out)
    (lib_change,) = doc["libraries"]
    assert lib_change["dropped"] == ["sm_80"]
    assert lib_change["added"] == ["sm_120", "compute_120"]
    assert {"key": "version", "before": "1.0", "after": "1.1"} in doc["versions"]
    # the same from saved audit documents
    saved = []
    for wheel in wheels:
        code, out, _err = cli_run("audit", str(wheel), "--format", "json")
        path = tmp_path / f"{wheel.stem}.json"
        path.write_text(out)
        saved.append(path)
    code, out, _err = cli_run("diff", str(saved[0]), str(saved[1]), "--format", "json")
    assert code == 1
    assert json.loads(out)["libraries"][0]["dropped"] == ["sm_80"]
