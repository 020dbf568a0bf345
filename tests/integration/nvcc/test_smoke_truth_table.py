"""The CPU-runnable parts of the GPU truth table (gpu/truth_table.py, gpu/truth_table.sh).

On a GPU machine the script itself is the test (docs/smoke.md). Here: the kernels build with
nvcc 13 into exactly the images each case names, the runtime route gives cudart's real error
without a driver, the table says "no CUDA device" with smoke's code, and smoke asks can-run
about the inputs through one function. The hand-written H200 expectations and the comparison
logic are checked in tests/unit/smoke/test_smoke_truth_table.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from archwheel.verdicts.smoke import CudaFailure, classify_cuda_error
from tests.support.components import gpu_present
from tests.support.paths import ROOT

SCRIPT = ROOT / "gpu" / "truth_table.py"


def fatbin_images(data: bytes) -> list[str]:
    """Entry names of a raw fatbin, read per cuda-facts.md section 5 (independent of archwheel)."""
    names: list[str] = []
    pos = 0
    while pos + 16 <= len(data):
        magic, _version, header, size = struct.unpack_from("<IHHQ", data, pos)
        assert magic == 0xBA55ED50, hex(magic)
        entry, end = pos + header, pos + header + size
        while entry < end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            (sm,) = struct.unpack_from("<I", data, entry + 0x1C)
            (flags,) = struct.unpack_from("<Q", data, entry + 0x28)
            suffix = "a" if flags & 0x100000 else "f" if flags & 0x200000 else ""
            prefix = {1: "compute", 2: "sm"}[kind]
            names.append(f"{prefix}_{sm}{suffix}")
            entry += entry_header + payload
        pos = (end + 7) & ~7
    return sorted(names)


@pytest.fixture(scope="module")
def built(nvcc: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("truth-table-build")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "build", "--out", str(out), "--nvcc", str(nvcc)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.nvcc
@pytest.mark.slow
def test_each_case_builds_exactly_its_images(built: Path) -> None:
    manifest = json.loads((built / "manifest.json").read_text())
    expected = {
        "8.0": ["sm_80"],
        "8.0+PTX": ["compute_80", "sm_80"],
        "9.0": ["sm_90"],
        "9.0a": ["sm_90a"],
        "10.0": ["sm_100"],
        "12.0+PTX": ["compute_120", "sm_120"],
        "compute_90": ["compute_90"],
        "9.0+PTX": ["compute_90", "sm_90"],
    }
    assert set(manifest["cases"]) == set(expected)
    for case, images in expected.items():
        info = manifest["cases"][case]
        assert sorted(info["images"]) == images, case
        fatbin = (built / info["fatbin"]).read_bytes()
        assert fatbin_images(fatbin) == images, case
        assert (built / info["library"]).stat().st_size > 0


@pytest.mark.nvcc
@pytest.mark.slow
def test_runtime_route_reports_cudart_s_own_error_without_a_driver(
    built: Path, tmp_path: Path
) -> None:
    if gpu_present():
        pytest.skip("checks the answer of a machine without a driver")
    result = tmp_path / "r.json"
    subprocess.run(
        [sys.executable, str(SCRIPT), "run-one", "--case", "9.0", "--route", "runtime",
         "--build", str(built), "--result", str(result)],
        env={**os.environ, "CUDA_DISABLE_PTX_JIT": "1"},
        check=True,
    )  # fmt: skip
    data = json.loads(result.read_text())
    assert data["ok"] is False
    assert data["env"] == {"CUDA_DISABLE_PTX_JIT": "1"}
    assert data["code"] == 35
    assert data["error"] == (
        "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version"
    )
    assert classify_cuda_error(data["error"]) is CudaFailure.DRIVER_TOO_OLD


@pytest.mark.nvcc
@pytest.mark.slow
def test_table_without_a_gpu_says_no_cuda_device(built: Path, tmp_path: Path) -> None:
    if gpu_present():
        pytest.skip("checks the answer of a machine without a GPU")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "table", "--build", str(built), "--out", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        check=False,
    )
    assert proc.returncode == 20
    assert proc.stdout.startswith("no CUDA device: OSError: libcuda.so.1")
    document = json.loads((out / "truth_table.json").read_text())
    assert document["rows"] == []
    assert "No CUDA device" in (out / "truth_table.md").read_text()


@pytest.mark.nvcc
@pytest.mark.slow
def test_smoke_asks_can_run_about_the_inputs_through_one_function(built: Path) -> None:
    from archwheel.facts.versions import ComputeCapability
    from archwheel.smoke.runner import can_run_for

    sm80 = can_run_for([built / "sm80.fatbin"])(ComputeCapability(9, 0), None)
    sm90 = can_run_for([built / "sm90.fatbin"])(ComputeCapability(9, 0), None)
    if importlib.util.find_spec("archwheel.verdicts.compat") is None:
        # The compatibility verdicts are not installed: smoke degrades to the arch-list check.
        assert sm80 is None
        assert sm90 is None
        return
    assert sm80 is not None
    assert sm80.startswith("sm80.fatbin: no-kernel-image")
    assert sm90 is not None
    assert sm90.startswith("sm90.fatbin: native")
