"""The smoke model: CUDA error texts -> failure classes, attempts -> step verdicts, the report.

Expected values are written out from cuda-facts.md (sections 1-2) and the CUDA runtime's own
error strings, not computed by the code under test.
"""

from __future__ import annotations

import ast
from typing import Any

import jsonschema
import pytest

from archwheel.effects.watchdog import ChildOutcome, ChildStatus
from archwheel.facts.versions import ComputeCapability
from archwheel.smoke.environments import payload_source
from archwheel.verdicts.smoke import (
    EXIT_HANG_OR_CRASH,
    EXIT_JIT_ONLY,
    EXIT_NO_DEVICE,
    EXIT_NO_KERNEL_IMAGE,
    KERNEL_STEPS,
    SNIPPET_STEP,
    Attempt,
    AttemptMode,
    CudaFailure,
    DeviceReport,
    SmokeReport,
    StepReport,
    check_arch_list,
    classify_cuda_error,
    decide_step,
    needs_jit_attempt,
    overall_verdict,
)
from archwheel.verdicts.vocabulary import SmokeVerdict, StepVerdict
from tests.support.real_torch import TORCH_2141_CU130
from tests.support.schemas import validate_smoke

# --------------------------------------------------------------------------------------------
# error texts


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # torch's RuntimeError around cudaErrorNoKernelImageAvailable (209)
        (
            "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
            "CUDA kernel errors might be asynchronously reported at some other API call, so the "
            "stacktrace below might be incorrect.",
            CudaFailure.NO_KERNEL_IMAGE,
        ),
        ("CUDA_ERROR_NO_BINARY_FOR_GPU", CudaFailure.NO_KERNEL_IMAGE),
        # cudaErrorUnsupportedPtxVersion (222)
        (
            "CUDA error: the provided PTX was compiled with an unsupported toolchain.",
            CudaFailure.PTX_TOO_NEW,
        ),
        ("CUDA_ERROR_UNSUPPORTED_PTX_VERSION", CudaFailure.PTX_TOO_NEW),
        # cudaErrorJitCompilationDisabled (223)
        ("CUDA error: PTX JIT compilation was disabled", CudaFailure.JIT_DISABLED),
        ("CUDA_ERROR_JIT_COMPILATION_DISABLED", CudaFailure.JIT_DISABLED),
        # cudaErrorInvalidKernelImage (200)
        ("CUDA error: device kernel image is invalid", CudaFailure.INVALID_IMAGE),
        # cudaErrorInsufficientDriver (35)
        (
            "RuntimeError: The NVIDIA driver on your system is too old (found version 12020).",
            CudaFailure.DRIVER_TOO_OLD,
        ),
        (
            "CUDA error: CUDA driver version is insufficient for CUDA runtime version",
            CudaFailure.DRIVER_TOO_OLD,
        ),
        (
            "CUDA error: forward compatibility was attempted on non supported HW",
            CudaFailure.DRIVER_TOO_OLD,
        ),
        (
            "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an "
            "NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx",
            CudaFailure.NO_DRIVER,
        ),
        ("CUDA error: no CUDA-capable device is detected", CudaFailure.NO_DEVICE),
        (
            'docker: Error response from daemon: could not select device driver "" with '
            "capabilities: [[gpu]].",
            CudaFailure.NO_DEVICE,
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB",
            CudaFailure.OUT_OF_MEMORY,
        ),
        ("CUDA error: an illegal memory access was encountered", CudaFailure.ILLEGAL_ACCESS),
        ("CUDA error: unspecified launch failure", CudaFailure.LAUNCH_FAILURE),
        (
            "RuntimeError: CUDA error: CUBLAS_STATUS_ARCH_MISMATCH when calling `cublasCreate`",
            CudaFailure.ARCH_MISMATCH,
        ),
        ("ValueError: something unrelated", CudaFailure.OTHER),
    ],
)
def test_cuda_error_texts_map_to_failure_classes(text: str, expected: CudaFailure) -> None:
    assert classify_cuda_error(text) is expected


@pytest.mark.parametrize("text", [None, "", "   \n"])
def test_no_error_text_is_no_failure(text: str | None) -> None:
    assert classify_cuda_error(text) is None


# --------------------------------------------------------------------------------------------
# attempts -> step verdicts

NO_IMAGE = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
JIT_OFF = "RuntimeError: CUDA error: PTX JIT compilation was disabled"
PTX_NEW = "RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain."
OOM = "torch.OutOfMemoryError: CUDA out of memory."


def ran(mode: AttemptMode, **result: Any) -> Attempt:
    base: dict[str, Any] = {"ok": False, "error": None, "skipped": None}
    base.update(result)
    return Attempt(mode, ChildOutcome("s", ChildStatus.EXITED, 0.1, returncode=0, result=base))


def died(mode: AttemptMode, status: ChildStatus, stderr: tuple[str, ...] = ()) -> Attempt:
    child = ChildOutcome(
        "s",
        status,
        1.0,
        returncode=-11 if status is ChildStatus.CRASH else -9,
        signal_name="SIGSEGV" if status is ChildStatus.CRASH else None,
        stderr_tail=stderr,
        problem=f"step 's' {status.value}",
    )
    return Attempt(mode, child)


N, J = AttemptMode.NATIVE, AttemptMode.JIT


@pytest.mark.parametrize(
    ("attempts", "verdict"),
    [
        ([ran(N, ok=True, max_rel_error=1e-7)], StepVerdict.NATIVE),
        ([ran(N, skipped="the device does not support bfloat16")], StepVerdict.SKIPPED),
        ([ran(N, error=NO_IMAGE), ran(J, ok=True)], StepVerdict.JIT_ONLY),
        ([ran(N, error=JIT_OFF), ran(J, ok=True)], StepVerdict.JIT_ONLY),
        ([ran(N, error=NO_IMAGE), ran(J, error=NO_IMAGE)], StepVerdict.NO_KERNEL_IMAGE),
        ([ran(N, error=JIT_OFF), ran(J, error=PTX_NEW)], StepVerdict.NO_KERNEL_IMAGE),
        ([ran(N, max_rel_error=0.5)], StepVerdict.WRONG_RESULT),
        ([ran(N, error=NO_IMAGE), ran(J, max_rel_error=0.5)], StepVerdict.WRONG_RESULT),
        ([died(N, ChildStatus.HANG)], StepVerdict.HANG),
        ([ran(N, error=NO_IMAGE), died(J, ChildStatus.HANG)], StepVerdict.HANG),
        ([died(N, ChildStatus.CRASH), died(J, ChildStatus.CRASH)], StepVerdict.CRASH),
        ([ran(N, error=OOM), ran(J, error=OOM)], StepVerdict.ERROR),
        # a crash whose stderr says "no kernel image" in both modes is still missing images
        (
            [
                died(N, ChildStatus.CRASH, (NO_IMAGE,)),
                died(J, ChildStatus.CRASH, (NO_IMAGE,)),
            ],
            StepVerdict.NO_KERNEL_IMAGE,
        ),
    ],
)
def test_decide_step(attempts: list[Attempt], verdict: StepVerdict) -> None:
    assert decide_step(0, "matmul_fp32", attempts).verdict is verdict


@pytest.mark.parametrize(
    ("attempt", "retry"),
    [
        (ran(N, ok=True), False),
        (ran(N, skipped="no snippet"), False),
        (ran(N, max_rel_error=0.5), False),  # ran natively, wrongly: the JIT proves nothing
        (died(N, ChildStatus.HANG), False),  # already used its time limit
        (ran(N, error=NO_IMAGE), True),
        (ran(N, error=OOM), True),
        (died(N, ChildStatus.CRASH), True),
    ],
)
def test_which_native_failures_get_a_jit_attempt(attempt: Attempt, retry: bool) -> None:
    assert needs_jit_attempt(attempt) is retry


def test_jit_only_keeps_the_native_error_as_evidence() -> None:
    report = decide_step(0, "conv2d_cudnn", [ran(N, error=NO_IMAGE), ran(J, ok=True)])
    assert report.detail == (
        "without the JIT: RuntimeError: CUDA error: no kernel image is available for execution "
        "on the device"
    )


def _steps(*verdicts: StepVerdict) -> list[StepReport]:
    return [StepReport(0, f"s{i}", v, ()) for i, v in enumerate(verdicts)]


@pytest.mark.parametrize(
    ("verdicts", "overall"),
    [
        ([StepVerdict.NATIVE, StepVerdict.SKIPPED], SmokeVerdict.PASSED),
        ([StepVerdict.NATIVE, StepVerdict.JIT_ONLY], SmokeVerdict.JIT_ONLY),
        ([StepVerdict.JIT_ONLY, StepVerdict.NO_KERNEL_IMAGE], SmokeVerdict.NO_KERNEL_IMAGE),
        ([StepVerdict.NO_KERNEL_IMAGE, StepVerdict.WRONG_RESULT], SmokeVerdict.FAILED),
        ([StepVerdict.ERROR, StepVerdict.NATIVE], SmokeVerdict.FAILED),
        ([StepVerdict.WRONG_RESULT, StepVerdict.HANG], SmokeVerdict.HANG_OR_CRASH),
        ([StepVerdict.CRASH], SmokeVerdict.HANG_OR_CRASH),
        ([StepVerdict.SKIPPED], SmokeVerdict.FAILED),  # nothing ran is not a pass
        ([], SmokeVerdict.FAILED),
    ],
)
def test_overall_verdict_precedence(verdicts: list[StepVerdict], overall: SmokeVerdict) -> None:
    assert overall_verdict(_steps(*verdicts)) is overall


@pytest.mark.parametrize(
    ("verdict", "code"),
    [
        (SmokeVerdict.PASSED, 0),
        (SmokeVerdict.FAILED, 1),
        (SmokeVerdict.TORCH_BROKEN, 1),
        (SmokeVerdict.ENVIRONMENT_FAILED, 4),
        (SmokeVerdict.NO_DEVICE, 20),
        (SmokeVerdict.JIT_ONLY, 21),
        (SmokeVerdict.NO_KERNEL_IMAGE, 22),
        (SmokeVerdict.HANG_OR_CRASH, 23),
    ],
)
def test_documented_exit_codes(verdict: SmokeVerdict, code: int) -> None:
    report = SmokeReport((), "venv", "venv /tmp/x", verdict, "m")
    assert report.exit_code == code
    assert (EXIT_NO_DEVICE, EXIT_JIT_ONLY, EXIT_NO_KERNEL_IMAGE, EXIT_HANG_OR_CRASH) == (
        20,
        21,
        22,
        23,
    )


# --------------------------------------------------------------------------------------------
# the compiled arch list against a device


@pytest.mark.parametrize(
    ("arch_list", "cc", "verdict", "native", "jit"),
    [
        # torch 2.14.1+cu130's get_arch_list(), on the GPUs of cuda-facts.md section 4
        (TORCH_2141_CU130, "9.0", "native", ["sm_90"], []),
        (TORCH_2141_CU130, "8.9", "native", ["sm_80", "sm_86"], []),
        (TORCH_2141_CU130, "10.3", "native", ["sm_100"], []),
        (TORCH_2141_CU130, "12.1", "native", ["sm_120"], []),
        (TORCH_2141_CU130, "7.0", "no-kernel-image", [], []),  # Volta: removed in CUDA 13
        (TORCH_2141_CU130, "11.0", "no-kernel-image", [], []),  # Thor: not in the list, no PTX
        # an extension built with 8.0+PTX, on an H200
        (["sm_80", "compute_80"], "9.0", "jit", [], ["compute_80"]),
        # PTX newer than the device never helps
        (["sm_80", "compute_120"], "9.0", "no-kernel-image", [], []),
        # 'a' cubins run only on exactly their compute capability
        (["sm_90a"], "9.0", "native", ["sm_90a"], []),
        (["sm_90a"], "10.0", "no-kernel-image", [], []),
        # 'f' cubins run within their family with equal or higher minor
        (["sm_100f"], "10.3", "native", ["sm_100f"], []),
        (["sm_100f"], "12.0", "no-kernel-image", [], []),
    ],
)
def test_arch_list_against_device(
    arch_list: list[str], cc: str, verdict: str, native: list[str], jit: list[str]
) -> None:
    check = check_arch_list(arch_list, ComputeCapability.parse(cc))
    assert check.verdict == verdict
    assert [n.split(" ")[0] for n in check.native] == native
    assert [n.split(" ")[0] for n in check.jit] == jit


def test_arch_list_check_cites_rules_and_keeps_unparsed_names() -> None:
    check = check_arch_list(["sm_80", "compute_80", "garbage"], ComputeCapability(9, 0))
    assert check.unparsed == ("garbage",)
    assert "[ptx-jit]" in check.one_line()
    none = check_arch_list(TORCH_2141_CU130, ComputeCapability(7, 0))
    assert "sass-same-major" in none.one_line()
    assert "no cubin and no PTX usable on 7.0" in none.one_line()


# --------------------------------------------------------------------------------------------
# the report document


def test_report_json_validates_against_the_checked_in_schema() -> None:
    steps = [
        decide_step(0, "matmul_fp32", [ran(N, ok=True, max_rel_error=1e-7, tolerance=1e-4)]),
        decide_step(0, "conv2d_cudnn", [ran(N, error=NO_IMAGE), ran(J, ok=True)]),
        decide_step(0, "reduction", [died(N, ChildStatus.HANG)]),
        # a non-finite number must not reach the JSON
        decide_step(0, "elementwise", [ran(N, max_rel_error=float("inf"))]),
    ]
    check = check_arch_list(TORCH_2141_CU130, ComputeCapability(9, 0))
    report = SmokeReport(
        inputs=("torch.whl",),
        backend="venv",
        environment="venv /tmp/x",
        verdict=overall_verdict(steps),
        message="a step hung",
        probe={"torch_version": "2.14.1+cu130", "arch_list": TORCH_2141_CU130},
        devices=(DeviceReport(0, "NVIDIA H200", "9.0", 150 << 30, check),),
        steps=tuple(steps),
    )
    document = report.to_json_dict()
    validate_smoke(document)
    assert document["exit_code"] == 23
    assert document["steps"][3]["attempts"][0]["max_rel_error"] is None


def test_schema_rejects_a_report_without_a_verdict() -> None:
    document = SmokeReport((), "venv", "e", SmokeVerdict.NO_DEVICE, "no CUDA device").to_json_dict()
    validate_smoke(document)
    del document["verdict"]
    with pytest.raises(jsonschema.ValidationError):
        validate_smoke(document)


# -- the payload's own copy of the step list -----------------------------------------------------


def payload_constants() -> dict[str, Any]:
    """The payload's top-level literal constants, read from its source (it is never imported:
    it runs only inside the environment under test)."""
    found: dict[str, Any] = {}
    for node in ast.parse(payload_source()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                try:
                    found[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    continue
    return found


def test_the_payload_runs_exactly_the_steps_the_verdicts_know() -> None:
    payload = payload_constants()
    assert payload["STEPS"] == (*KERNEL_STEPS, SNIPPET_STEP)
    assert set(payload["TOLERANCES"]) == set(KERNEL_STEPS)
    assert set(payload["STEP_DTYPES"]) <= set(KERNEL_STEPS)
