"""The smoke test's model: what a step's outcome means, and the report built from them.

Pure functions and frozen objects only; the side effects (environments, child processes) live in
``smoke_env`` and ``watchdog``, and ``smoke_runner`` ties them together.

Each kernel step runs first with ``CUDA_DISABLE_PTX_JIT=1`` (only embedded cubins may serve it)
and, if that fails, again with the JIT allowed. ``decide_step`` turns the attempts into one
verdict: *native*, *JIT only*, *no kernel image*, *wrong result*, *hang*, *crash* or *error*.
CUDA error texts are mapped to failure classes by ``classify_cuda_error`` from the table
``CUDA_ERROR_PATTERNS`` (the runtime's and driver's own strings, cuda-facts.md sections 1-2).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from archwheel.effects.watchdog import ChildOutcome, ChildStatus
from archwheel.exit_codes import EXIT_INTERRUPTED, EXIT_OK, EXIT_TOOL, EXIT_VERDICT_FAILED, ExitCode
from archwheel.facts.arch import CodeKind, Target
from archwheel.facts.catalog import load_facts
from archwheel.facts.rules import image_serves, rule_for
from archwheel.facts.versions import ComputeCapability, CudaVersion
from archwheel.verdicts.vocabulary import SmokeVerdict, StepVerdict

SCHEMA_VERSION = 1

# smoke's own exit codes (exit_codes.py, docs/smoke.md). 0, 1, 2 and 4 keep their project-wide
# meaning; an interrupted smoke test exits as the CLI's Ctrl-C.
EXIT_NO_DEVICE = ExitCode.SMOKE_NO_DEVICE
EXIT_JIT_ONLY = ExitCode.SMOKE_JIT_ONLY
EXIT_NO_KERNEL_IMAGE = ExitCode.SMOKE_NO_KERNEL_IMAGE
EXIT_HANG_OR_CRASH = ExitCode.SMOKE_HANG_OR_CRASH
EXIT_CPU_ONLY = ExitCode.SMOKE_CPU_ONLY

KERNEL_STEPS: tuple[str, ...] = (
    "matmul_fp32",
    "matmul_fp16",
    "matmul_bf16",
    "conv2d_cudnn",
    "elementwise",
    "reduction",
)
SNIPPET_STEP = "snippet"

# The environment of each attempt. CUDA reads these once, at initialisation: every attempt is
# its own process. CUDA_FORCE_PTX_JIT is removed from both so that a user's setting cannot
# turn the native attempt into a JIT one.
NATIVE_ENV: Mapping[str, str] = {"CUDA_DISABLE_PTX_JIT": "1"}
JIT_UNSET: tuple[str, ...] = ("CUDA_DISABLE_PTX_JIT", "CUDA_FORCE_PTX_JIT")
# The snippet's CPU part, on a host without a device: CUDA hidden from torch, so that
# `torch.cuda.is_available()` is False and the snippet takes its CPU branch.
CPU_ENV: Mapping[str, str] = {"CUDA_VISIBLE_DEVICES": ""}
CPU_DEVICE = -1  # the device of the CPU part's step in a report


class CudaFailure(str, Enum):
    """What a CUDA error text says went wrong."""

    NO_KERNEL_IMAGE = "no-kernel-image"
    JIT_DISABLED = "jit-disabled"
    PTX_TOO_NEW = "ptx-too-new"
    INVALID_IMAGE = "invalid-image"
    ARCH_MISMATCH = "arch-mismatch"
    DRIVER_TOO_OLD = "driver-too-old"
    NO_DEVICE = "no-device"
    NO_DRIVER = "no-driver"
    OUT_OF_MEMORY = "out-of-memory"
    ILLEGAL_ACCESS = "illegal-access"
    LAUNCH_FAILURE = "launch-failure"
    OTHER = "other"


# (pattern, class, what it means). Searched in order, case-insensitively; the first match wins.
# The texts are cudaGetErrorString / cuGetErrorString / cuGetErrorName of the CUDA 12-13
# runtime and driver, and the messages PyTorch, cuBLAS and cuDNN wrap around them.
CUDA_ERROR_PATTERNS: tuple[tuple[str, CudaFailure, str], ...] = (
    (
        r"no kernel image is available for execution on the device"
        r"|CUDA_ERROR_NO_BINARY_FOR_GPU|cudaErrorNoKernelImageAvailable",
        CudaFailure.NO_KERNEL_IMAGE,
        "no cubin for this GPU and no usable PTX (error 209)",
    ),
    (
        r"PTX JIT compilation was disabled|CUDA_ERROR_JIT_COMPILATION_DISABLED"
        r"|cudaErrorJitCompilationDisabled",
        CudaFailure.JIT_DISABLED,
        "only PTX could serve this GPU and the JIT was disabled (error 223)",
    ),
    (
        r"the provided PTX was compiled with an unsupported toolchain"
        r"|CUDA_ERROR_UNSUPPORTED_PTX_VERSION|cudaErrorUnsupportedPtxVersion",
        CudaFailure.PTX_TOO_NEW,
        "the PTX is newer than the driver understands (error 222)",
    ),
    (
        r"device kernel image is invalid|CUDA_ERROR_INVALID_IMAGE|cudaErrorInvalidKernelImage"
        r"|a PTX JIT compilation failed|CUDA_ERROR_INVALID_PTX",
        CudaFailure.INVALID_IMAGE,
        "the embedded device code could not be loaded (error 200/218)",
    ),
    (
        r"CUBLAS_STATUS_ARCH_MISMATCH|CUDNN_STATUS_ARCH_MISMATCH|CUSPARSE_STATUS_ARCH_MISMATCH",
        CudaFailure.ARCH_MISMATCH,
        "a CUDA library has no kernels for this GPU",
    ),
    (
        r"CUDA driver version is insufficient for CUDA runtime version"
        r"|cudaErrorInsufficientDriver|CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"
        r"|system has unsupported display driver / cuda driver combination"
        r"|forward compatibility was attempted on non supported HW"
        r"|The NVIDIA driver on your system is too old",
        CudaFailure.DRIVER_TOO_OLD,
        "the driver is older than the CUDA runtime needs (error 35/803/804)",
    ),
    (
        r"Found no NVIDIA driver on your system|CUDA driver is a stub library"
        r"|CUDA_ERROR_NOT_INITIALIZED|NVIDIA driver is not loaded|libcuda\.so",
        CudaFailure.NO_DRIVER,
        "no usable NVIDIA driver",
    ),
    (
        r"no CUDA-capable device is detected|cudaErrorNoDevice|CUDA_ERROR_NO_DEVICE"
        r"|could not select device driver .* with capabilities: \[\[gpu\]\]"
        r"|invalid device ordinal",
        CudaFailure.NO_DEVICE,
        "no CUDA device is visible",
    ),
    (
        r"out of memory|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation",
        CudaFailure.OUT_OF_MEMORY,
        "the device ran out of memory",
    ),
    (
        r"an illegal memory access was encountered|misaligned address|illegal instruction"
        r"|CUDA_ERROR_ILLEGAL_ADDRESS",
        CudaFailure.ILLEGAL_ACCESS,
        "a kernel faulted (illegal address or instruction)",
    ),
    (
        r"unspecified launch failure|the launch timed out and was terminated"
        r"|too many resources requested for launch|CUDA_ERROR_LAUNCH_FAILED",
        CudaFailure.LAUNCH_FAILURE,
        "a kernel launch failed",
    ),
)
_COMPILED_PATTERNS = tuple(
    (re.compile(p, re.IGNORECASE), cls, meaning) for p, cls, meaning in CUDA_ERROR_PATTERNS
)

# Failures of the native attempt that mean "no cubin served this step": the JIT attempt decides.
NEEDS_JIT = frozenset(
    {
        CudaFailure.NO_KERNEL_IMAGE,
        CudaFailure.JIT_DISABLED,
        CudaFailure.INVALID_IMAGE,
        CudaFailure.ARCH_MISMATCH,
    }
)
# Failures of the JIT attempt that mean neither cubin nor PTX could serve the step.
NO_IMAGE = frozenset(
    {
        CudaFailure.NO_KERNEL_IMAGE,
        CudaFailure.JIT_DISABLED,
        CudaFailure.PTX_TOO_NEW,
        CudaFailure.INVALID_IMAGE,
        CudaFailure.ARCH_MISMATCH,
    }
)


def classify_cuda_error(text: str | None) -> CudaFailure | None:
    """The failure class of a CUDA error text; None for no text, OTHER when unrecognised."""
    if not text or not text.strip():
        return None
    for pattern, failure, _ in _COMPILED_PATTERNS:
        if pattern.search(text):
            return failure
    return CudaFailure.OTHER


def failure_meaning(failure: CudaFailure) -> str:
    """What a classified CUDA failure means, in words, for the step's explanation."""
    for _, cls, meaning in CUDA_ERROR_PATTERNS:
        if cls is failure:
            return meaning
    return "an error CUDA did not explain further"


# --------------------------------------------------------------------------------------------
# attempts and steps


class AttemptMode(str, Enum):
    """How a step was run: with the PTX JIT disabled, with it allowed, or with CUDA hidden."""

    NATIVE = "native"  # CUDA_DISABLE_PTX_JIT=1
    JIT = "jit"  # the JIT allowed
    CPU = "cpu"  # CUDA hidden (CPU_ENV): the snippet's CPU part


@dataclass(frozen=True)
class Attempt:
    """One process that ran one step in one mode."""

    mode: AttemptMode
    child: ChildOutcome

    @property
    def result(self) -> Mapping[str, Any]:
        """The result file the payload wrote (empty when it wrote none)."""
        return self.child.result or {}

    @property
    def passed(self) -> bool:
        """The process finished and the payload reported the step correct."""
        return self.child.finished and self.result.get("ok") is True

    @property
    def skipped(self) -> str | None:
        """Why the payload skipped the step (None when it ran it)."""
        reason = self.result.get("skipped") if self.child.finished else None
        return str(reason) if reason else None

    @property
    def error(self) -> str | None:
        """The CUDA/Python error text of a failed attempt, or the watchdog's problem."""
        if self.child.finished:
            err = self.result.get("error")
            if err:
                return str(err)
            if self.result.get("ok") is False and not self.skipped:
                return str(self.result.get("mismatch") or "result differs from the CPU reference")
            return None
        return self.child.problem

    @property
    def failure(self) -> CudaFailure | None:
        """The class of the error, read from the error text or the crash's stderr."""
        if self.child.finished:
            return classify_cuda_error(self.result.get("error"))
        text = "\n".join([*self.child.stderr_tail, self.child.problem or ""])
        return classify_cuda_error(text)

    @property
    def wrong_result(self) -> bool:
        """The step ran without error and was not skipped, yet its result was wrong (beyond the
        tolerance, or not finite)."""
        return (
            self.child.finished
            and self.result.get("ok") is False
            and not self.result.get("error")
            and not self.skipped
        )

    def to_json_dict(self) -> dict[str, Any]:
        """One entry of a step's ``attempts`` in the smoke document."""
        failure = self.failure
        return {
            "mode": self.mode.value,
            "passed": self.passed,
            "error": self.error,
            "failure": failure.value if failure else None,
            "max_rel_error": _finite(self.result.get("max_rel_error")),
            "tolerance": _finite(self.result.get("tolerance")),
            "process": self.child.to_json_dict(),
        }


def _finite(value: object) -> float | None:
    """A number fit for strict JSON (no NaN or Infinity), else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


@dataclass(frozen=True)
class StepReport:
    """One kernel step on one device: its verdict and the attempts behind it."""

    device: int
    step: str
    verdict: StepVerdict
    attempts: tuple[Attempt, ...]
    detail: str = ""  # one line: the error, the mismatch, why it was skipped
    explanation: str | None = None  # for no-kernel-image: the can-run verdict for this device

    def to_json_dict(self) -> dict[str, Any]:
        """One entry of the smoke document's ``steps``."""
        return {
            "device": self.device,
            "step": self.step,
            "verdict": self.verdict.value,
            "detail": self.detail,
            "explanation": self.explanation,
            "attempts": [a.to_json_dict() for a in self.attempts],
        }


def needs_jit_attempt(native: Attempt) -> bool:
    """Whether the native attempt failed in a way the JIT attempt may tell more about.

    A hang is not retried (the step already used its time limit), nor is a result that was
    computed natively but wrong; anything else that failed is.
    """
    if native.passed or native.skipped or native.wrong_result:
        return False
    return native.child.status is not ChildStatus.HANG


def decide_step(device: int, step: str, attempts: Sequence[Attempt]) -> StepReport:
    """Turn a step's attempts (native first, then JIT if run) into one verdict."""
    if not attempts:
        raise ValueError("a step needs at least one attempt")
    native = attempts[0]
    jit = attempts[1] if len(attempts) > 1 else None
    attempts_t = tuple(attempts)

    def report(verdict: StepVerdict, detail: str = "") -> StepReport:
        return StepReport(device, step, verdict, attempts_t, detail=detail)

    if native.skipped:
        return report(StepVerdict.SKIPPED, native.skipped)
    if native.passed:
        return report(StepVerdict.NATIVE, _error_detail(native))
    if native.child.status is ChildStatus.HANG:
        return report(StepVerdict.HANG, native.child.problem or "hang")
    if native.wrong_result:
        return report(StepVerdict.WRONG_RESULT, native.error or "")
    if jit is None:
        return _failed(device, step, attempts_t, native)
    if jit.passed:
        why = native.error or "the native attempt failed"
        return report(StepVerdict.JIT_ONLY, f"without the JIT: {_one_line(why)}")
    return _failed(device, step, attempts_t, jit)


def decide_cpu_part(attempt: Attempt) -> StepReport:
    """The snippet's CPU part (one attempt, CUDA hidden): passed, skipped, or how it failed."""
    if attempt.skipped:
        return StepReport(CPU_DEVICE, SNIPPET_STEP, StepVerdict.SKIPPED, (attempt,),
                          detail=attempt.skipped)  # fmt: skip
    if attempt.passed:
        return StepReport(CPU_DEVICE, SNIPPET_STEP, StepVerdict.CPU_PASSED, (attempt,))
    if attempt.child.status is ChildStatus.HANG:
        return StepReport(CPU_DEVICE, SNIPPET_STEP, StepVerdict.HANG, (attempt,),
                          detail=attempt.child.problem or "hang")  # fmt: skip
    return _failed(CPU_DEVICE, SNIPPET_STEP, (attempt,), attempt)


def cpu_part_verdict(part: StepReport, no_device: str) -> tuple[SmokeVerdict, str]:
    """The run's verdict and message when only the CPU part could run (``no_device``: why)."""
    if part.verdict is StepVerdict.CPU_PASSED:
        return SmokeVerdict.CPU_ONLY, f"CPU part passed; GPU part not run: {no_device}"
    if part.verdict is StepVerdict.SKIPPED:
        return SmokeVerdict.NO_DEVICE, f"{no_device} (CPU part skipped: {part.detail})"
    verdict = (
        SmokeVerdict.HANG_OR_CRASH
        if part.verdict in (StepVerdict.HANG, StepVerdict.CRASH)
        else SmokeVerdict.FAILED
    )
    return (
        verdict,
        f"the CPU part failed ({part.verdict.value}: {part.detail}); GPU part not run: {no_device}",
    )


def _failed(device: int, step: str, attempts: tuple[Attempt, ...], last: Attempt) -> StepReport:
    status = last.child.status
    failure = last.failure
    detail = _one_line(last.error or "failed")
    if status is ChildStatus.HANG:
        verdict = StepVerdict.HANG
    elif failure in NO_IMAGE and all(a.failure in NO_IMAGE for a in attempts):
        verdict = StepVerdict.NO_KERNEL_IMAGE
    elif status in (ChildStatus.CRASH, ChildStatus.NOT_STARTED):
        verdict = StepVerdict.CRASH
    elif last.wrong_result:
        verdict = StepVerdict.WRONG_RESULT
    else:
        verdict = StepVerdict.ERROR
    return StepReport(device, step, verdict, attempts, detail=detail)


def _error_detail(attempt: Attempt) -> str:
    err = attempt.result.get("max_rel_error")
    return f"max relative error {err:.2g}" if isinstance(err, (int, float)) else ""


def _one_line(text: str, limit: int = 300) -> str:
    # PyTorch's CUDA errors carry advice lines ("CUDA kernel errors might be asynchronously
    # reported ..."): the first line is the error.
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return first if len(first) <= limit else first[: limit - 3] + "..."


# --------------------------------------------------------------------------------------------
# the compiled arch list against a device (facts.rules; no wheel inspection needed)


@dataclass(frozen=True)
class ArchListCheck:
    """Which entries of torch's compiled arch list can serve a device, by the CUDA rules."""

    cc: str
    arch_list: tuple[str, ...]
    native: tuple[str, ...]  # cubins that run on the device
    jit: tuple[str, ...]  # PTX the driver could compile for it
    unparsed: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """``native``, ``jit`` or ``no-kernel-image``: the best the compiled arch list offers this
        device."""
        if self.native:
            return "native"
        if self.jit:
            return "jit"
        return "no-kernel-image"

    def one_line(self) -> str:
        """The check in words, citing the rules it applies."""
        facts = load_facts()
        listed = " ".join(self.arch_list) or "(empty)"
        if self.native:
            return f"compiled arch list [{listed}] has {', '.join(self.native)} for {self.cc}"
        if self.jit:
            return (
                f"compiled arch list [{listed}] has no cubin for {self.cc}, only PTX "
                f"{', '.join(self.jit)} (JIT at first launch) [rule ptx-jit]"
            )
        rule = facts.rule("sass-same-major").split(";")[0]
        return (
            f"compiled arch list [{listed}] has no cubin and no PTX usable on {self.cc}: "
            f"{rule} [rules sass-same-major, ptx-jit]"
        )

    def to_json_dict(self) -> dict[str, Any]:
        """The ``arch_list_check`` object of a device in the smoke document."""
        return {
            "cc": self.cc,
            "arch_list": list(self.arch_list),
            "verdict": self.verdict,
            "native": list(self.native),
            "jit": list(self.jit),
            "unparsed": list(self.unparsed),
            "message": self.one_line(),
        }


def check_arch_list(
    arch_list: Iterable[str], cc: ComputeCapability, cuda: CudaVersion | None = None
) -> ArchListCheck:
    """Apply the SASS and PTX rules to each name of ``torch.cuda.get_arch_list()`` (``cuda``:
    torch's CUDA, which decides whether discrete cubins serve an integrated GPU)."""
    names = tuple(arch_list)
    native: list[str] = []
    jit: list[str] = []
    unparsed: list[str] = []
    for name in names:
        try:
            kind, target = Target.from_name(name)
        except Exception:
            unparsed.append(name)
            continue
        if image_serves(kind, target, cc, cuda=cuda):
            rule = rule_for(kind, target)
            (native if kind is CodeKind.SASS else jit).append(f"{name} [{rule}]")
    return ArchListCheck(str(cc), names, tuple(native), tuple(jit), tuple(unparsed))


# --------------------------------------------------------------------------------------------
# the report


VERDICT_EXIT_CODES: Mapping[SmokeVerdict, int] = {
    SmokeVerdict.PASSED: EXIT_OK,
    SmokeVerdict.FAILED: EXIT_VERDICT_FAILED,
    SmokeVerdict.TORCH_BROKEN: EXIT_VERDICT_FAILED,
    SmokeVerdict.ENVIRONMENT_FAILED: EXIT_TOOL,
    SmokeVerdict.NO_DEVICE: EXIT_NO_DEVICE,
    SmokeVerdict.JIT_ONLY: EXIT_JIT_ONLY,
    SmokeVerdict.NO_KERNEL_IMAGE: EXIT_NO_KERNEL_IMAGE,
    SmokeVerdict.HANG_OR_CRASH: EXIT_HANG_OR_CRASH,
    SmokeVerdict.CPU_ONLY: EXIT_CPU_ONLY,
    SmokeVerdict.INTERRUPTED: EXIT_INTERRUPTED,
}

# When steps disagree, the first verdict in this order is the run's.
_STEP_PRECEDENCE: tuple[tuple[frozenset[StepVerdict], SmokeVerdict], ...] = (
    (frozenset({StepVerdict.HANG, StepVerdict.CRASH}), SmokeVerdict.HANG_OR_CRASH),
    (frozenset({StepVerdict.WRONG_RESULT, StepVerdict.ERROR}), SmokeVerdict.FAILED),
    (frozenset({StepVerdict.NO_KERNEL_IMAGE}), SmokeVerdict.NO_KERNEL_IMAGE),
    (frozenset({StepVerdict.JIT_ONLY}), SmokeVerdict.JIT_ONLY),
)


def overall_verdict(steps: Iterable[StepReport]) -> SmokeVerdict:
    """The run's verdict from its steps, the most severe first; a run where every step was skipped
    fails."""
    seen = {s.verdict for s in steps}
    for verdicts, overall in _STEP_PRECEDENCE:
        if seen & verdicts:
            return overall
    if seen - {StepVerdict.SKIPPED}:
        return SmokeVerdict.PASSED
    return SmokeVerdict.FAILED  # nothing ran: not a pass


@dataclass(frozen=True)
class DeviceReport:
    """One GPU the probe found: its name, compute capability and memory, and what torch's arch list
    and can-run say of it."""

    index: int
    name: str
    cc: str
    total_memory: int | None
    arch_check: ArchListCheck | None
    can_run: str | None = None  # archwheel can-run's verdict for this device, when available
    can_run_problem: str | None = None  # why can-run gave no verdict, when it failed

    def to_json_dict(self) -> dict[str, Any]:
        """One entry of the smoke document's ``devices``."""
        return {
            "index": self.index,
            "name": self.name,
            "cc": self.cc,
            "total_memory": self.total_memory,
            "arch_list_check": self.arch_check.to_json_dict() if self.arch_check else None,
            "can_run": self.can_run,
            "can_run_problem": self.can_run_problem,
        }


@dataclass(frozen=True)
class StageReport:
    """A setup stage (environment, install, probe): how it went, with the evidence."""

    name: str
    ok: bool
    seconds: float
    detail: str = ""
    log_tail: tuple[str, ...] = ()

    def to_json_dict(self) -> dict[str, Any]:
        """One entry of the smoke document's ``stages``."""
        return {
            "name": self.name,
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "detail": self.detail,
            "log_tail": list(self.log_tail),
        }


@dataclass(frozen=True)
class SmokeReport:
    """Everything one smoke run established. Always produced, whatever happened."""

    inputs: tuple[str, ...]
    backend: str
    environment: str  # where it ran: the venv path, the container image
    verdict: SmokeVerdict
    message: str  # one line: the verdict in words
    stages: tuple[StageReport, ...] = ()
    probe: Mapping[str, Any] = field(default_factory=dict)
    devices: tuple[DeviceReport, ...] = ()
    steps: tuple[StepReport, ...] = ()
    notes: tuple[str, ...] = ()
    cpu_part: StepReport | None = None  # the snippet with CUDA hidden, when there is no device

    @property
    def exit_code(self) -> int:
        """The exit code the run's verdict maps to (``VERDICT_EXIT_CODES``, docs/exit-codes.md)."""
        return VERDICT_EXIT_CODES[self.verdict]

    @property
    def ok(self) -> bool:
        """The run's verdict is a pass (exit 0)."""
        return self.verdict is SmokeVerdict.PASSED

    def to_json_dict(self) -> dict[str, Any]:
        """The smoke JSON document."""
        probe = self.probe
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": "archwheel smoke",
            "inputs": list(self.inputs),
            "backend": self.backend,
            "environment": self.environment,
            "verdict": self.verdict.value,
            "exit_code": self.exit_code,
            "message": self.message,
            "software": {
                "python": probe.get("python"),
                "torch": probe.get("torch_version"),
                "torch_cuda": probe.get("torch_cuda"),
                "cudnn": probe.get("cudnn_version"),
                "cudnn_compile": probe.get("cudnn_compile_version"),
                "nccl": probe.get("nccl_version"),
                "driver": probe.get("driver_version"),
                "cuda_driver_api": probe.get("cuda_driver_api_version"),
                "arch_list": list(probe.get("arch_list") or []),
                "cuda_error": probe.get("cuda_error"),
                "torch_import_error": probe.get("torch_import_error"),
            },
            "stages": [s.to_json_dict() for s in self.stages],
            "devices": [d.to_json_dict() for d in self.devices],
            "steps": [s.to_json_dict() for s in self.steps],
            "cpu_part": self.cpu_part.to_json_dict() if self.cpu_part else None,
            "notes": list(self.notes),
        }


def verdict_message(verdict: SmokeVerdict, steps: Sequence[StepReport], devices: int) -> str:
    """The one line a release engineer reads first."""
    counts: dict[StepVerdict, int] = {}
    for s in steps:
        counts[s.verdict] = counts.get(s.verdict, 0) + 1
    tally = ", ".join(f"{n} {v.value}" for v, n in sorted(counts.items(), key=lambda kv: kv[0]))
    where = f"on {devices} device{'s' if devices != 1 else ''}"
    text = {
        SmokeVerdict.PASSED: f"every kernel ran natively and matched the CPU reference {where}",
        SmokeVerdict.JIT_ONLY: f"some kernels ran only through the PTX JIT {where}",
        SmokeVerdict.NO_KERNEL_IMAGE: f"some kernels have no kernel image {where}",
        SmokeVerdict.FAILED: f"some kernels failed or gave wrong results {where}",
        SmokeVerdict.HANG_OR_CRASH: f"a step hung or crashed {where}",
    }.get(verdict, verdict.value)
    return f"{text} ({tally})" if tally else text
