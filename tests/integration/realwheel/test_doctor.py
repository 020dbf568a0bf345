"""archwheel doctor on a virtual environment with the real torch 2.14.1+cu130 wheel and its nvidia-*
dependencies installed by pip: without a GPU, and on fake GPUs (a fake nvidia-smi,
tests/support/doctor_fakes.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cli import CliRun
from tests.support.doctor_fakes import no_gpu_path


@pytest.mark.realwheel
@pytest.mark.slow
def test_doctor_reports_real_torch_without_gpu(
    torch_venv: Path, cli_run: CliRun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    no_gpu_path(monkeypatch, tmp_path)
    code, out, _ = cli_run(
        "doctor", "--python", str(torch_venv), "--gpu-probe", "nvidia-smi", "--no-audit",
        "--format", "json",
    )  # fmt: skip
    assert code == 0
    doc = json.loads(out)
    assert doc["schema_version"] == 1
    assert doc["host"]["gpus"] == []
    assert doc["findings"][0].startswith("no NVIDIA GPU or driver found (nvidia-smi: nvidia-smi")
    torch = doc["environment"]["torch"]
    assert torch["version"] == "2.14.1+cu130"
    assert torch["cuda"] == "13.0"
    assert torch["cudnn"] == "9.24.0"
    assert torch["nccl"] == "2.30.7"
    assert torch["arch_flags"] == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert torch["cuda_available"] is False
    dists = doc["environment"]["distributions"]
    assert dists["nvidia-cudnn-cu13"] == "9.24.0.43"
    assert dists["nvidia-nccl-cu13"] == "2.30.7"


@pytest.mark.realwheel
@pytest.mark.slow
def test_doctor_table_without_gpu_says_so_plainly(
    torch_venv: Path, cli_run: CliRun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    no_gpu_path(monkeypatch, tmp_path)
    code, out, _ = cli_run(
        "doctor", "--python", str(torch_venv), "--gpu-probe", "nvidia-smi", "--no-audit"
    )
    assert code == 0
    assert "no NVIDIA GPU or driver found on this machine" in out
    assert "torch 2.14.1+cu130, CUDA 13.0, cuDNN 9.24.0, NCCL 2.30.7" in out


@pytest.mark.realwheel
@pytest.mark.slow
def test_doctor_audits_installed_torch_on_fake_gpus(
    torch_venv: Path,
    cli_run: CliRun,
    monkeypatch: pytest.MonkeyPatch,
    fake_nvidia_smi: Callable[[str], Path],
) -> None:
    folder = fake_nvidia_smi(
        'echo "Tesla T4, 7.5, 580.65.06"\necho "NVIDIA GeForce RTX 5090, 12.0, 580.65.06"\n'
    )
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    code, out, _ = cli_run(
        "doctor", "--python", str(torch_venv), "--gpu-probe", "nvidia-smi", "--format", "json"
    )
    doc = json.loads(out)
    assert code == 11
    t4, rtx = doc["gpus"]
    assert t4["verdict"] == "no-kernel-image"
    assert t4["basis"] == "audit of the installed torch libraries"
    failing = [lib["library"] for lib in t4["libraries"] if lib["verdict"] == "no-kernel-image"]
    assert [Path(p).name for p in failing] == ["libtorch_cuda_linalg.so"]
    assert rtx["verdict"] == "native"
    assert doc["runtime"]["status"] == "full"
