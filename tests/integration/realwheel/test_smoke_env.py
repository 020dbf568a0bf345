"""The real torch 2.14.1+cu130 wheel in a fresh venv, made by ``VenvEnvironment`` once per session.

This is what CI can prove without a GPU: the environment is created, the wheel installs with
its ``nvidia-*`` requirements from the configured indexes, the payload runs under the real torch
(its kernels, on the CPU, against the same references), and smoke says "no CUDA device".
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from archwheel.effects.watchdog import ChildOutcome, Watchdog
from archwheel.smoke.environments import VenvEnvironment
from archwheel.verdicts.smoke import KERNEL_STEPS, CudaFailure, classify_cuda_error
from tests.support.cli import CliRun
from tests.support.components import gpu_present
from tests.support.real_torch import TORCH_2141_CU130
from tests.support.schemas import validate_smoke

pytestmark = [pytest.mark.realwheel, pytest.mark.slow]


@pytest.fixture(scope="module")
def torch_venv(torch_wheel: Path) -> Iterator[VenvEnvironment]:
    """A fresh venv with the real torch wheel installed (about 1.5 min and 5.5 GB; removed when
    this module's tests end, not held to the end of the run)."""
    env = VenvEnvironment(wheels=(torch_wheel,), install_timeout=1800)
    try:
        setup = env.prepare(Watchdog())
        assert setup.ok, setup.problem
        yield env
    finally:
        env.close()


def run_payload(venv: VenvEnvironment, *args: str, **kw: Any) -> ChildOutcome:
    command = venv.command(
        "t",
        [*args, "--result", "{result}"],
        timeout=600,
        env=kw.get("env", {}),
        unset_env=(),
    )
    return Watchdog().run(command)


def test_the_venv_holds_torch_and_its_cuda_requirements(torch_venv: VenvEnvironment) -> None:
    assert torch_venv.root is not None
    site = next((torch_venv.root / "venv" / "lib").glob("python3.*/site-packages"))
    assert (site / "torch" / "lib" / "libtorch_cuda.so").is_file()
    # The wheel's Requires-Dist pulled the CUDA libraries it loads at run time.
    installed = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    assert "nvidia_cudnn_cu13" in installed
    assert "nvidia_nccl_cu13" in installed
    # It is isolated: archwheel (this project) is not importable there.
    assert not any(n.startswith("archwheel") for n in installed)


def test_probe_records_versions_and_says_no_device(torch_venv: VenvEnvironment) -> None:
    if gpu_present():
        pytest.skip("this test checks the no-GPU answer")
    outcome = run_payload(torch_venv, "probe")
    assert outcome.finished, outcome.problem
    probe = outcome.result
    assert probe is not None
    assert probe["torch_version"] == "2.14.1+cu130"
    assert probe["torch_cuda"] == "13.0"
    assert probe["arch_list"] == TORCH_2141_CU130
    assert str(probe["cudnn_version"]).startswith("9.")
    assert probe["cudnn_version"] == probe["cudnn_compile_version"]
    assert str(probe["nccl_version"]).startswith("2.")
    assert probe["cuda_available"] is False
    assert probe["devices"] == []
    assert classify_cuda_error(probe["cuda_error"]) is CudaFailure.NO_DRIVER


@pytest.mark.parametrize("step", KERNEL_STEPS)
def test_every_kernel_step_matches_its_reference_with_the_real_torch_on_cpu(
    torch_venv: VenvEnvironment, step: str
) -> None:
    outcome = run_payload(torch_venv, "kernel", step, "--device", "cpu")
    assert outcome.finished, outcome.problem
    result = outcome.result
    assert result is not None
    assert result["error"] is None, result["error"]
    assert result["ok"] is True
    assert 0 <= result["max_rel_error"] <= result["tolerance"]


def test_a_kernel_on_a_missing_gpu_reports_the_driver_error(torch_venv: VenvEnvironment) -> None:
    if gpu_present():
        pytest.skip("this test checks the no-GPU answer")
    outcome = run_payload(
        torch_venv, "kernel", "matmul_fp32", "--device", "0", env={"CUDA_DISABLE_PTX_JIT": "1"}
    )
    assert outcome.finished
    result = outcome.result
    assert result is not None
    assert result["ok"] is False
    assert result["env"] == {"CUDA_DISABLE_PTX_JIT": "1"}
    assert classify_cuda_error(result["error"]) is CudaFailure.NO_DRIVER


def test_a_snippet_runs_and_its_failure_is_reported(
    torch_venv: VenvEnvironment, tmp_path: Path
) -> None:
    good = tmp_path / "good.py"
    good.write_text(
        "x = torch.arange(10.0, device=device)\nassert float((x * 2).sum().cpu()) == 90.0\n"
    )
    bad = tmp_path / "bad.py"
    bad.write_text("import no_such_extension_module\n")
    ok = run_payload(torch_venv, "kernel", "snippet", "--device", "cpu", "--snippet", str(good))
    assert ok.result is not None
    assert ok.result["ok"] is True
    failed = run_payload(torch_venv, "kernel", "snippet", "--device", "cpu", "--snippet", str(bad))
    assert failed.result is not None
    assert failed.result["ok"] is False
    assert "No module named 'no_such_extension_module'" in failed.result["error"]


def test_cli_smoke_of_the_installed_torch_says_no_cuda_device(
    torch_venv: VenvEnvironment, cli_run: CliRun
) -> None:
    if gpu_present():
        pytest.skip("this test checks the no-GPU answer")
    python = str(torch_venv.venv_python)
    code, out, err = cli_run(
        "smoke", "--backend", "existing", "--python", python, "--format", "json"
    )
    assert code == 20, err
    document = json.loads(out)
    validate_smoke(document)
    assert document["verdict"] == "no-device"
    assert document["message"].startswith("no CUDA device: RuntimeError: Found no NVIDIA driver")
    assert document["software"]["torch"] == "2.14.1+cu130"
    assert document["software"]["cudnn"].startswith("9.")
    code, out, _ = cli_run("smoke", "--backend", "existing", "--python", python)
    assert code == 20
    assert "no CUDA device" in out
    assert "torch 2.14.1+cu130" in out
    assert sys.executable  # the test ran under the project's interpreter, not the venv's


def test_without_a_device_the_snippets_cpu_part_runs_and_is_its_own_verdict(
    torch_venv: VenvEnvironment, cli_run: CliRun, tmp_path: Path
) -> None:
    if gpu_present():
        pytest.skip("this test checks the no-GPU answer")
    python = str(torch_venv.venv_python)
    good = tmp_path / "good.py"
    good.write_text(
        "assert not torch.cuda.is_available()  # CUDA hidden from the CPU part\n"
        "assert device.type == 'cpu'\n"
        "x = torch.arange(10.0, device=device)\nassert float((x * 2).sum()) == 90.0\n"
    )
    code, out, err = cli_run("smoke", "--backend", "existing", "--python", python,
                             "--snippet", str(good), "--format", "json")  # fmt: skip
    assert code == 24, err
    document = json.loads(out)
    validate_smoke(document)
    assert document["verdict"] == "cpu-only"
    assert document["message"].startswith(
        "CPU part passed; GPU part not run: RuntimeError: Found no NVIDIA driver"
    )
    part = document["cpu_part"]
    assert part["verdict"] == "cpu-passed" and part["device"] == -1
    assert [a["mode"] for a in part["attempts"]] == ["cpu"]
    assert document["steps"] == []
    bad = tmp_path / "bad.py"
    bad.write_text("x = torch.ones(3)\nassert float(x.sum()) == 4.0, 'the CPU op is wrong'\n")
    code, out, err = cli_run("smoke", "--backend", "existing", "--python", python,
                             "--snippet", str(bad))  # fmt: skip
    assert code == 1, out + err
    assert "the CPU part failed (error: AssertionError: the CPU op is wrong)" in " ".join(
        out.split()
    )
