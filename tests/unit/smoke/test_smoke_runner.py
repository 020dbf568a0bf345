"""The smoke runner end to end with real child processes and a FAKE GPU payload.

No GPU exists on CI, so ``FakeGpuEnvironment`` runs tests/support/data/fake_gpu_payload.py, which acts
out a device and per-step outcomes (including a real hang and a real SIGSEGV). Everything else
is the real code: the watchdog, the native-then-JIT protocol, the verdicts and the report.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archwheel.effects.watchdog import ChildCommand, Watchdog
from archwheel.facts.versions import ComputeCapability, DriverVersion
from archwheel.smoke.environments import SetupOutcome
from archwheel.smoke.runner import SmokeSettings, run_smoke
from archwheel.verdicts.vocabulary import SmokeVerdict, StepVerdict
from tests.support.paths import DATA
from tests.support.real_torch import TORCH_2141_CU130
from tests.support.schemas import validate_smoke

FAKE_PAYLOAD = DATA / "fake_gpu_payload.py"
H200 = {"index": 0, "name": "NVIDIA H200 (fake)", "cc": "9.0", "total_memory": 150 << 30}
NO_IMAGE = "RuntimeError: CUDA error: no kernel image is available for execution on the device"


@dataclass
class FakeGpuEnvironment:
    """A mock environment: the fake payload under this interpreter, with a scenario."""

    scenario: Mapping[str, Any]
    log: Path
    snippet: str | None = None
    backend: str = "venv"
    closed: bool = False
    prepared: list[str] = field(default_factory=list)

    @property
    def description(self) -> str:
        return "fake GPU environment"

    def prepare(self, watchdog: Watchdog) -> SetupOutcome:
        self.prepared.append("yes")
        return SetupOutcome(())

    def command(
        self,
        name: str,
        payload_args: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str],
        unset_env: Sequence[str],
    ) -> ChildCommand:
        full_env = {
            **env,
            "FAKE_GPU_SCENARIO": json.dumps(self.scenario),
            "FAKE_GPU_LOG": str(self.log),
        }
        return ChildCommand(
            name,
            (sys.executable, str(FAKE_PAYLOAD), *payload_args),
            timeout=timeout,
            env=full_env,
            unset_env=tuple(unset_env),
        )

    def snippet_path(self) -> str | None:
        return self.snippet

    def close(self) -> None:
        self.closed = True


def attempts_logged(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_every_outcome_in_one_run(tmp_path: Path, monkeypatch: Any) -> None:
    # A user's CUDA_FORCE_PTX_JIT must not leak into either attempt.
    monkeypatch.setenv("CUDA_FORCE_PTX_JIT", "1")
    scenario = {
        "devices": [H200],
        "arch_list": TORCH_2141_CU130,
        "steps": {
            "matmul_fp16": {"native": f"error:{NO_IMAGE}", "jit": "ok"},
            "matmul_bf16": {"native": "skip:the device does not support bfloat16"},
            "conv2d_cudnn": {"native": f"error:{NO_IMAGE}", "jit": f"error:{NO_IMAGE}"},
            "elementwise": {"native": "hang"},
            "reduction": {"native": "segv", "jit": "segv"},
        },
    }
    log = tmp_path / "attempts.jsonl"
    env = FakeGpuEnvironment(scenario, log)
    seen: list[tuple[str, str]] = []

    def fake_can_run(cc: ComputeCapability, driver: DriverVersion | None) -> str | None:
        seen.append((str(cc), str(driver)))
        return None  # can-run unavailable: smoke explains from the arch list

    report = run_smoke(
        env,
        ["torch.whl"],
        SmokeSettings(step_timeout=3),
        watchdog=Watchdog(grace_seconds=0.5),
        can_run=fake_can_run,
    )
    verdicts = {s.step: s.verdict for s in report.steps}
    assert verdicts == {
        "matmul_fp32": StepVerdict.NATIVE,
        "matmul_fp16": StepVerdict.JIT_ONLY,
        "matmul_bf16": StepVerdict.SKIPPED,
        "conv2d_cudnn": StepVerdict.NO_KERNEL_IMAGE,
        "elementwise": StepVerdict.HANG,
        "reduction": StepVerdict.CRASH,
    }
    assert report.verdict is SmokeVerdict.HANG_OR_CRASH
    assert report.exit_code == 23
    assert env.closed
    assert seen == [("9.0", str(DriverVersion.parse("580.159.03")))]

    by_step = {s.step: s for s in report.steps}
    assert "elementwise-dev0-native" in by_step["elementwise"].detail
    assert "did not finish within 3 s" in by_step["elementwise"].detail
    assert "SIGSEGV" in by_step["reduction"].detail
    # no kernel image is explained for the device, citing the rules
    explanation = by_step["conv2d_cudnn"].explanation or ""
    assert "no cubin for this GPU and no usable PTX" in explanation
    assert "sm_90" in explanation

    # The protocol: native first with CUDA_DISABLE_PTX_JIT=1, JIT only after a failure that is
    # not a hang, each attempt its own process, CUDA_FORCE_PTX_JIT removed from both.
    runs = [(a["step"], a["mode"]) for a in attempts_logged(log)]
    assert runs == [
        ("matmul_fp32", "native"),
        ("matmul_fp16", "native"),
        ("matmul_fp16", "jit"),
        ("matmul_bf16", "native"),
        ("conv2d_cudnn", "native"),
        ("conv2d_cudnn", "jit"),
        ("elementwise", "native"),
        ("reduction", "native"),
        ("reduction", "jit"),
    ]
    for attempt in attempts_logged(log):
        assert attempt["CUDA_FORCE_PTX_JIT"] is None
        expected = "1" if attempt["mode"] == "native" else None
        assert attempt["CUDA_DISABLE_PTX_JIT"] == expected
    validate_smoke(report.to_json_dict())


def test_all_native_on_two_devices_passes_and_runs_the_snippet(tmp_path: Path) -> None:
    second = {**H200, "index": 1}
    log = tmp_path / "attempts.jsonl"
    env = FakeGpuEnvironment(
        {"devices": [H200, second], "arch_list": TORCH_2141_CU130}, log, snippet="/x/snippet.py"
    )
    report = run_smoke(env, ["ext.whl"], SmokeSettings(step_timeout=30))
    assert report.verdict is SmokeVerdict.PASSED
    assert report.exit_code == 0
    assert len(report.steps) == 2 * 7
    assert {s.verdict for s in report.steps} == {StepVerdict.NATIVE}
    snippet_runs = [a for a in attempts_logged(log) if a["step"] == "snippet"]
    assert [a["snippet"] for a in snippet_runs] == ["/x/snippet.py", "/x/snippet.py"]
    assert report.message.startswith("every kernel ran natively")
    validate_smoke(report.to_json_dict())


def test_jit_only_everywhere_is_its_own_exit_code(tmp_path: Path) -> None:
    jit_only = {"native": "error:CUDA error: PTX JIT compilation was disabled", "jit": "ok"}
    scenario = {
        "devices": [H200],
        "arch_list": ["sm_80", "compute_80"],
        "steps": {"matmul_fp32": jit_only, "reduction": jit_only},
    }
    report = run_smoke(
        FakeGpuEnvironment(scenario, tmp_path / "log"),
        ["ext.whl"],
        SmokeSettings(step_timeout=30, steps=("matmul_fp32", "reduction")),
    )
    assert report.verdict is SmokeVerdict.JIT_ONLY
    assert report.exit_code == 21
    assert report.devices[0].arch_check is not None
    assert report.devices[0].arch_check.verdict == "jit"


def test_no_device_says_so_plainly(tmp_path: Path) -> None:
    scenario = {
        "devices": [],
        "arch_list": TORCH_2141_CU130,
        "cuda_error": "RuntimeError: Found no NVIDIA driver on your system. Please check ...",
    }
    log = tmp_path / "log"
    report = run_smoke(FakeGpuEnvironment(scenario, log), ["torch.whl"])
    assert report.verdict is SmokeVerdict.NO_DEVICE
    assert report.exit_code == 20
    assert (
        report.message
        == "no CUDA device: RuntimeError: Found no NVIDIA driver on your system. Please check ..."
    )
    assert report.steps == ()
    assert attempts_logged(log) == []  # no kernel was attempted
    validate_smoke(report.to_json_dict())


def test_a_device_filter_that_matches_nothing_is_no_device(tmp_path: Path) -> None:
    report = run_smoke(
        FakeGpuEnvironment({"devices": [H200]}, tmp_path / "log"),
        ["torch.whl"],
        SmokeSettings(devices=(3,)),
    )
    assert report.verdict is SmokeVerdict.NO_DEVICE
    assert "no CUDA device with index (3,)" in report.message


def test_a_hanging_probe_still_gives_a_report(tmp_path: Path) -> None:
    env = FakeGpuEnvironment({"probe": "hang", "devices": [H200]}, tmp_path / "log")
    report = run_smoke(
        env, ["torch.whl"], SmokeSettings(step_timeout=1), watchdog=Watchdog(grace_seconds=0.5)
    )
    assert report.verdict is SmokeVerdict.HANG_OR_CRASH
    assert "the probe failed" in report.message
    assert env.closed
    validate_smoke(report.to_json_dict())


def test_torch_that_does_not_import_is_a_failed_verdict(tmp_path: Path) -> None:
    env = FakeGpuEnvironment(
        {"torch_import_error": "ImportError: libcudnn.so.9: cannot open shared object file"},
        tmp_path / "log",
    )
    report = run_smoke(env, ["torch.whl"])
    assert report.verdict is SmokeVerdict.TORCH_BROKEN
    assert report.exit_code == 1
    assert "libcudnn.so.9" in report.message


def test_can_run_verdict_is_preferred_and_its_failure_is_contained(tmp_path: Path) -> None:
    scenario = {
        "devices": [H200, {**H200, "index": 1}],
        "arch_list": ["sm_80"],
        "steps": {"matmul_fp32": {"native": f"error:{NO_IMAGE}", "jit": f"error:{NO_IMAGE}"}},
    }
    calls: list[int] = []

    def flaky_can_run(cc: ComputeCapability, driver: DriverVersion | None) -> str | None:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("scanner exploded")
        return "no kernel image: libfoo.so has sm_80 only; add 9.0 [rule sass-same-major]"

    report = run_smoke(
        FakeGpuEnvironment(scenario, tmp_path / "log"),
        ["ext.whl"],
        SmokeSettings(step_timeout=30, steps=("matmul_fp32",)),
        can_run=flaky_can_run,
    )
    assert report.verdict is SmokeVerdict.NO_KERNEL_IMAGE
    assert report.exit_code == 22
    first, second = report.steps
    assert "can-run for 9.0: no kernel image: libfoo.so has sm_80 only" in (first.explanation or "")
    assert report.devices[1].can_run is None
    assert report.devices[1].can_run_problem == "can-run failed: RuntimeError: scanner exploded"
    # without can-run's verdict, the arch list explains the missing image
    assert "compiled arch list [sm_80] has no cubin and no PTX usable on 9.0" in (
        second.explanation or ""
    )


def test_an_interrupt_still_gives_the_report_and_kills_the_running_step(tmp_path: Path) -> None:
    scenario = {
        "devices": [H200],
        "arch_list": TORCH_2141_CU130,
        "steps": {"matmul_fp16": {"native": "hang"}},
    }
    log = tmp_path / "log"
    env = FakeGpuEnvironment(scenario, log)

    def interrupt_when_the_hang_starts() -> None:
        for _ in range(600):
            if any(a["step"] == "matmul_fp16" for a in attempts_logged(log)):
                time.sleep(0.3)
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.05)

    threading.Thread(target=interrupt_when_the_hang_starts, daemon=True).start()
    report = run_smoke(env, ["torch.whl"], SmokeSettings(step_timeout=120))
    assert report.verdict is SmokeVerdict.INTERRUPTED
    assert report.exit_code == 130
    assert report.message == "interrupted after 1 step (passed so far)"
    assert [s.step for s in report.steps] == ["matmul_fp32"]
    assert env.closed
    hung_pid = next(a["pid"] for a in attempts_logged(log) if a["step"] == "matmul_fp16")
    time.sleep(0.2)
    assert (
        not Path(f"/proc/{hung_pid}").exists()
        or "Z" in Path(f"/proc/{hung_pid}/stat").read_text().split(")")[-1].split()[:1]
    )
    validate_smoke(report.to_json_dict())


def test_no_device_runs_the_snippets_cpu_part_with_cuda_hidden(tmp_path: Path) -> None:
    scenario = {"devices": [], "cuda_error": "RuntimeError: Found no NVIDIA driver"}
    log = tmp_path / "log"
    report = run_smoke(FakeGpuEnvironment(scenario, log, snippet="snippet.py"), ["ext.whl"])
    assert report.verdict is SmokeVerdict.CPU_ONLY
    assert report.exit_code == 24
    assert (
        report.message == "CPU part passed; GPU part not run: RuntimeError: Found no NVIDIA driver"
    )
    assert report.steps == ()
    assert report.cpu_part is not None and report.cpu_part.verdict is StepVerdict.CPU_PASSED
    [attempt] = attempts_logged(log)
    assert attempt["device"] == "cpu" and attempt["step"] == "snippet"
    assert attempt["CUDA_VISIBLE_DEVICES"] == "" and attempt["CUDA_DISABLE_PTX_JIT"] is None
    validate_smoke(report.to_json_dict())


def test_a_failing_or_hanging_cpu_part_is_a_failure_not_no_device(tmp_path: Path) -> None:
    for behaviour, verdict, code in (
        ("error:AssertionError: wrong", SmokeVerdict.FAILED, 1),
        ("wrong", SmokeVerdict.FAILED, 1),
        ("segv", SmokeVerdict.HANG_OR_CRASH, 23),
    ):
        scenario = {"devices": [], "steps": {"snippet": {"cpu:jit": behaviour}}}
        env = FakeGpuEnvironment(scenario, tmp_path / f"log-{code}", snippet="snippet.py")
        report = run_smoke(env, ["ext.whl"])
        assert report.verdict is verdict, behaviour
        assert report.exit_code == code
        assert report.message.startswith("the CPU part failed (")
        assert report.message.endswith("GPU part not run: torch.cuda.is_available() is False")
        validate_smoke(report.to_json_dict())


def test_no_device_and_no_snippet_stays_no_device(tmp_path: Path) -> None:
    log = tmp_path / "log"
    report = run_smoke(FakeGpuEnvironment({"devices": []}, log), ["ext.whl"])
    assert report.verdict is SmokeVerdict.NO_DEVICE and report.cpu_part is None
    assert attempts_logged(log) == []
