"""archwheel doctor: host probes, the torch probe, per-GPU verdicts and the command.

No GPU exists here, so the GPU side uses a fake NVML module (``FakeNvml``) and fake nvidia-smi
scripts (``fake_nvidia_smi``, tests/support/doctor_fakes.py); everything else is real: real
subprocess probes, a half-installed fake torch that fails to import, and one that crashes the
interpreter. The command on a virtual environment with the real torch 2.14.1+cu130 wheel is in
tests/integration/realwheel/test_doctor.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from archwheel.binary.model import InputInventory
from archwheel.doctor.diagnose import diagnose
from archwheel.effects.host import (
    GpuInfo,
    GpuProbeResult,
    NvidiaSmiProbe,
    NvmlProbe,
    ProbeFailed,
    PythonEnvironment,
    PythonProbe,
    TorchInfo,
    format_cudnn,
    parse_nvidia_smi_csv,
    probe_gpus,
    torch_info,
)
from archwheel.errors import ToolError
from archwheel.facts.versions import ComputeCapability, CudaVersion, DriverVersion
from archwheel.verdicts.vocabulary import Verdict
from tests.support.cli import CliRun
from tests.support.doctor_fakes import no_gpu_path
from tests.support.inventory_builders import torch_2_14_1_cu130
from tests.support.venvs import make_venv


def _write_fake_torch(site: Path, body: str) -> None:
    """A fake, half-installed torch: dist-info says it is there; importing it fails."""
    (site / "torch").mkdir(parents=True, exist_ok=True)
    (site / "torch" / "__init__.py").write_text(body)
    info = site / "torch-2.7.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.7.0+cu128\n")
    (info / "RECORD").write_text("")


def _fake_torch_venv(tmp_path: Path, body: str) -> Path:
    python = make_venv(tmp_path / "venv")
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    _write_fake_torch(site, body)
    return python


class FakeNvmlError(Exception):
    pass


class FakeNvml:
    """A fake of the pynvml functions NvmlProbe uses (no GPU exists here)."""

    def __init__(
        self, gpus: list[tuple[str, tuple[int, int]]], driver: str, cuda: int, fail: bool = False
    ) -> None:
        self.gpus = gpus
        self.driver = driver
        self.cuda = cuda
        self.fail = fail
        self.shutdown_called = False

    def nvmlInit(self) -> None:
        if self.fail:
            raise FakeNvmlError("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:
        self.shutdown_called = True

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return self.cuda

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return self.gpus[handle][0].encode()

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        return self.gpus[handle][1]


# -- GPU probes ---------------------------------------------------------------------------------


def test_parse_nvidia_smi_csv() -> None:
    gpus = parse_nvidia_smi_csv(
        "NVIDIA H100 80GB HBM3, 9.0, 570.86.10\n\nTesla K80, [N/A], 470.57.02\ngarbage\n"
    )
    assert [(g.index, g.name, str(g.cc) if g.cc else None, g.driver) for g in gpus] == [
        (0, "NVIDIA H100 80GB HBM3", "9.0", "570.86.10"),
        (1, "Tesla K80", None, "470.57.02"),
    ]


def test_nvidia_smi_probe_with_a_fake(fake_nvidia_smi: Callable[[str], Path]) -> None:
    folder = fake_nvidia_smi('echo "NVIDIA GeForce RTX 5090, 12.0, 575.51.03"\n')
    result = NvidiaSmiProbe(str(folder / "nvidia-smi")).probe()
    assert result.source == "nvidia-smi"
    assert [(g.name, str(g.cc)) for g in result.gpus] == [("NVIDIA GeForce RTX 5090", "12.0")]
    assert result.driver == DriverVersion.parse("575.51.03")
    assert result.cuda_driver_version == CudaVersion(12, 9)
    assert result.cuda_driver_source == "facts"


def test_nvidia_smi_failure_is_reported(fake_nvidia_smi: Callable[[str], Path]) -> None:
    folder = fake_nvidia_smi(
        'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."\n'
        "exit 9\n"
    )
    with pytest.raises(ProbeFailed, match="exited 9: NVIDIA-SMI has failed"):
        NvidiaSmiProbe(str(folder / "nvidia-smi")).probe()


def test_nvidia_smi_hang_is_cut_off(fake_nvidia_smi: Callable[[str], Path]) -> None:
    folder = fake_nvidia_smi("exec sleep 60\n")
    with pytest.raises(ProbeFailed, match="did not answer"):
        NvidiaSmiProbe(str(folder / "nvidia-smi"), timeout=1).probe()


def test_nvml_probe_with_a_fake() -> None:
    fake = FakeNvml([("NVIDIA A100-SXM4-80GB", (8, 0)), ("NVIDIA L4", (8, 9))], "580.65.06", 13000)
    result = NvmlProbe(fake).probe()
    assert result.source == "nvml"
    assert [(g.name, str(g.cc)) for g in result.gpus] == [
        ("NVIDIA A100-SXM4-80GB", "8.0"),
        ("NVIDIA L4", "8.9"),
    ]
    assert result.cuda_driver_version == CudaVersion(13, 0)
    assert result.cuda_driver_source == "nvml"
    assert fake.shutdown_called


def test_probe_chain_falls_back_and_keeps_each_error(
    fake_nvidia_smi: Callable[[str], Path],
) -> None:
    folder = fake_nvidia_smi('echo "Tesla T4, 7.5, 580.65.06"\n')
    broken = FakeNvml([], "", 0, fail=True)
    result = probe_gpus((NvmlProbe(broken), NvidiaSmiProbe(str(folder / "nvidia-smi"))))
    assert result.source == "nvidia-smi"
    assert [e.probe for e in result.errors] == ["nvml"]
    assert "libnvidia-ml.so.1 is not installed" in result.errors[0].message


def test_no_driver_at_all(tmp_path: Path) -> None:
    broken = FakeNvml([], "", 0, fail=True)
    result = probe_gpus((NvmlProbe(broken), NvidiaSmiProbe(str(tmp_path / "nvidia-smi"))))
    assert not result.has_driver
    assert result.gpus == ()
    assert [e.probe for e in result.errors] == ["nvml", "nvidia-smi"]


# -- the torch probe ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "text"), [(92400, "9.24.0"), (90100, "9.1.0"), (8902, "8.9.2"), (None, None), (0, None)]
)
def test_format_cudnn(raw: int | None, text: str | None) -> None:
    assert format_cudnn(raw) == text


def test_torch_info_falls_back_to_the_build_config_for_arch_flags() -> None:
    config = (
        "  - Build settings: CUDA_FLAGS= -gencode arch=compute_80,code=sm_80 "
        "-gencode arch=compute_90,code=[sm_90,compute_90] -Xfatbin"
    )
    info = torch_info(
        {"version": "2.7.0+cu128", "cuda": "12.8", "config": [config], "errors": {}}, "2.7.0"
    )
    assert info.arch_flags == ("sm_80", "sm_90", "compute_90")
    assert info.arch_flags_source == "torch.__config__.show() CUDA_FLAGS"


def test_torch_info_reports_each_failed_field() -> None:
    info = torch_info(
        {"version": "2.7.0", "errors": {"cudnn": "RuntimeError: cuDNN not found"}}, "2.7.0"
    )
    assert info.cudnn is None
    assert [e.one_line() for e in info.errors] == ["torch.cudnn: RuntimeError: cuDNN not found"]


def test_doctor_with_a_python_that_is_not_one(cli_run: CliRun) -> None:
    code, out, _ = cli_run("doctor", "--python", "/bin/true", "--gpu-probe", "nvidia-smi")
    assert code == 3
    assert "the environment could not be inspected" in out
    assert "python probe exited 0: no output" in out


def test_python_probe_of_a_missing_interpreter(tmp_path: Path) -> None:
    env = PythonProbe(str(tmp_path / "nope" / "python")).probe()
    assert not env.torch.installed
    assert "is not an executable Python interpreter" in env.errors[0].message


def test_half_installed_torch_is_reported_not_raised(tmp_path: Path) -> None:
    python = _fake_torch_venv(
        tmp_path,
        "raise OSError('libcudnn.so.9: cannot open shared object file: "
        "No such file or directory')\n",
    )
    env = PythonProbe(str(python)).probe()
    assert env.torch.installed
    assert env.torch.version == "2.7.0+cu128"
    assert env.torch.import_error == (
        "OSError: libcudnn.so.9: cannot open shared object file: No such file or directory"
    )


def test_torch_import_that_kills_the_interpreter(tmp_path: Path) -> None:
    python = _fake_torch_venv(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    env = PythonProbe(str(python)).probe()
    assert env.torch.installed
    assert env.torch.import_error is not None
    assert "killed by signal 11" in env.torch.import_error


# -- diagnosis (pure, with fakes of the probes) -------------------------------------------------

_TORCH = TorchInfo(
    installed=True,
    version="2.14.1+cu130",
    cuda="13.0",
    cudnn="9.24.0",
    nccl="2.30.7",
    arch_flags=("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
    arch_flags_source="torch._C._cuda_getArchFlags()",
    cuda_available=True,
    device_count=2,
)
_ENV = PythonEnvironment("/venv/bin/python", "3.11.7", torch=_TORCH)


def _host(driver: str, *gpus: tuple[str, str]) -> GpuProbeResult:
    return GpuProbeResult(
        "nvidia-smi",
        tuple(
            GpuInfo(i, name, ComputeCapability.parse(cc), driver)
            for i, (name, cc) in enumerate(gpus)
        ),
        DriverVersion.parse(driver),
        None,
        None,
    )


def _hand_built_scanner(distribution: str, python: str | None) -> InputInventory:
    assert distribution == "torch"
    return torch_2_14_1_cu130()


def test_diagnosis_names_the_broken_library_and_a_fix() -> None:
    host = _host("580.65.06", ("Tesla T4", "7.5"), ("NVIDIA GeForce RTX 5090", "12.0"))
    report = diagnose(host, _ENV, scanner=_hand_built_scanner)
    t4, rtx = report.diagnoses
    assert t4.verdict is Verdict.NO_KERNEL_IMAGE
    assert t4.headline.startswith("no kernel image in libtorch_cuda_linalg.so")
    assert t4.fixes[0].startswith(
        "this build (torch 2.14.1+cu130) has no sm_75 in libtorch_cuda_linalg.so: install an "
        "official torch build for cu118, cu126, cu128, cu129"
    )
    assert t4.fixes[0].endswith("or build with `nox -s build -- --arch 7.5`")
    assert rtx.verdict is Verdict.NATIVE
    assert rtx.fixes == ()
    assert report.exit_code == 11
    assert "torch/lib/libtorch_cuda_linalg.so has no sm_75 although the build flags list it" in (
        report.findings
    )


def test_diagnosis_for_a_gpu_the_build_lacks_entirely() -> None:
    flags_only = PythonEnvironment(
        "/venv/bin/python",
        "3.11.7",
        torch=TorchInfo(
            installed=True,
            version="2.6.0+cu126",
            cuda="12.6",
            arch_flags=("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
            arch_flags_source="torch._C._cuda_getArchFlags()",
        ),
    )
    host = _host("570.86.10", ("NVIDIA GeForce RTX 5090", "12.0"))
    report = diagnose(host, flags_only, audit=False, scanner=_hand_built_scanner)
    (rtx,) = report.diagnoses
    assert rtx.verdict is Verdict.NO_KERNEL_IMAGE
    assert rtx.basis.startswith("torch build flags")
    assert rtx.fixes == (
        "this build (torch 2.6.0+cu126) has no sm_120: install a cu128-or-later build of "
        "torch >= 2.7, or build with `nox -s build -- --arch 12.0`",
    )


def test_diagnosis_with_a_driver_too_old_for_the_runtime() -> None:
    host = _host("575.51.03", ("NVIDIA GeForce RTX 5090", "12.0"))
    report = diagnose(host, _ENV, scanner=_hand_built_scanner)
    assert report.runtime is not None
    assert report.runtime.blocks
    assert report.diagnoses[0].verdict is Verdict.DRIVER_TOO_OLD
    assert report.exit_code == 12
    assert any(
        f.startswith("driver 575.51.03 is too old for torch's CUDA 13.0") for f in report.findings
    )


def test_diagnosis_survives_a_failing_audit() -> None:
    def broken(distribution: str, python: str | None) -> InputInventory:
        raise ToolError("the binary scanner cannot be loaded")

    host = _host("580.65.06", ("Tesla T4", "7.5"))
    report = diagnose(host, _ENV, scanner=broken)
    assert report.audit_error == "the binary scanner cannot be loaded"
    assert report.diagnoses[0].basis.startswith("torch build flags")
    assert report.diagnoses[0].verdict is Verdict.NATIVE  # the flags claim sm_75


def test_diagnosis_without_gpu_and_without_torch() -> None:
    host = GpuProbeResult(None, (), None, None, None)
    report = diagnose(
        host, PythonEnvironment("/usr/bin/python3", "3.11.7"), scanner=_hand_built_scanner
    )
    assert report.diagnoses == ()
    assert report.findings[0].startswith("no NVIDIA GPU or driver found")
    assert report.findings[1] == "torch is not installed in /usr/bin/python3"
    assert report.exit_code == 0


# -- the command, without torch --------------------------------------------------------------------


@pytest.mark.slow
def test_doctor_without_torch(
    bare_venv: Path, cli_run: CliRun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    no_gpu_path(monkeypatch, tmp_path)
    code, out, _ = cli_run("doctor", "--python", str(bare_venv), "--gpu-probe", "nvidia-smi")
    assert code == 0
    assert "torch: not installed" in out
    assert f"torch is not installed in {bare_venv}" in " ".join(out.split())


@pytest.mark.parametrize(
    ("cuda", "verdict"),
    [
        ("12.8", Verdict.NO_KERNEL_IMAGE),
        ("13.0", Verdict.NO_KERNEL_IMAGE),
        ("13.2", Verdict.NATIVE),
    ],
)
def test_diagnosis_for_jetson_orin_follows_the_integrated_gpu_rule(
    cuda: str, verdict: Verdict
) -> None:
    # sm_80/sm_86 do not run on the integrated 8.7 before CUDA 13.2 (rule sass-integrated).
    flags_only = PythonEnvironment(
        "/venv/bin/python",
        "3.12.3",
        torch=TorchInfo(
            installed=True,
            version=f"2.14.1+cu{cuda.replace('.', '')}",
            cuda=cuda,
            arch_flags=("sm_80", "sm_86", "sm_90"),
            arch_flags_source="torch._C._cuda_getArchFlags()",
        ),
    )
    host = _host("590.44.01", ("Orin (nvgpu)", "8.7"))
    report = diagnose(host, flags_only, audit=False, scanner=_hand_built_scanner)
    (orin,) = report.diagnoses
    assert orin.verdict is verdict
    if verdict is Verdict.NO_KERNEL_IMAGE:
        assert [r.rule_id for r in orin.reasons] == ["sass-integrated"]


def test_audited_torch_on_jetson_orin_has_no_kernel_image() -> None:
    # The official cu130 wheel carries sm_80 and sm_86, none of which runs on Orin under 13.0.
    report = diagnose(
        _host("580.65.06", ("Orin (nvgpu)", "8.7")), _ENV, scanner=_hand_built_scanner
    )
    (orin,) = report.diagnoses
    assert orin.verdict is Verdict.NO_KERNEL_IMAGE
    assert any(r.rule_id == "sass-integrated" for r in orin.reasons)
