"""Checks that need an NVIDIA GPU and driver (marker `gpu`; skipped with the reason elsewhere).

They prove on hardware what the rest of the suite proves from binaries: that the rules in
cuda_facts.toml, `archwheel can-run` and the smoke test agree with what the driver really does.
On the development GPU (an H200, compute capability 9.0), `gpu/truth_table.sh` runs the same
truth table in one call of the device tool (docs/smoke.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import CliRun
from tests.support.paths import ROOT

pytestmark = pytest.mark.gpu


def test_truth_table_agrees_with_the_rules(nvcc: Path, tmp_path: Path) -> None:
    """Tiny kernels for 8.0, 8.0+PTX, 9.0, 9.0a, 10.0, 12.0+PTX ... run natively, by JIT or not at
    all exactly as the rules (and can-run) say, on whatever GPU this is."""
    build = tmp_path / "build"
    subprocess.run(
        [sys.executable, str(ROOT / "gpu" / "truth_table.py"), "build", "--out", str(build),
         "--nvcc", str(nvcc)],
        check=True,
    )  # fmt: skip
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "gpu" / "truth_table.py"), "table", "--build", str(build),
         "--out", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    document = json.loads(next(out.glob("*.json")).read_text())
    assert document["rows"]
    assert document["mismatches"] == 0


def test_smoke_real_torch_wheel_runs_natively(cli_run: CliRun, torch_wheel: Path) -> None:
    """torch 2.14.1+cu130 carries SASS for every current data-center GPU: every kernel must
    run with CUDA_DISABLE_PTX_JIT=1 and match its CPU reference."""
    code, out, err = cli_run("smoke", str(torch_wheel), "--format", "json")
    document = json.loads(out)
    assert code == 0, (document.get("verdict"), err[-2000:])
    assert document["verdict"] == "passed"
    assert {s["verdict"] for s in document["steps"]} <= {"native", "skipped"}


def test_doctor_sees_the_gpu(cli_run: CliRun) -> None:
    code, out, _ = cli_run("doctor", "--format", "json")
    document = json.loads(out)
    assert code in (0, 10, 11, 12)
    assert document["gpus"], "doctor found no GPU on a machine where nvidia-smi lists one"
