"""Every verdict word archwheel prints, in one place.

``Verdict`` says how a GPU gets a kernel out of a library: predicted from the binaries
(``can-run``, ``doctor``, the audit gate's explanations). ``StepVerdict`` is what one smoke step
was seen to do on a real GPU, and ``SmokeVerdict`` the outcome of a whole smoke run. Where an
observation means a prediction, it uses the same word (``native``, ``no-kernel-image``);
``jit-only`` is the observed form of ``jit`` (the step failed with the JIT disabled and passed
with it allowed). ``OBSERVED`` ties each kernel-path prediction to its observation, so that a
smoke run on a GPU can be checked against ``can-run``'s verdict for the same device.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType

from archwheel.exit_codes import ExitCode


class Verdict(str, Enum):
    """What happens when a GPU loads the code."""

    NO_DEVICE_CODE = "no-device-code"  # nothing to load: CPU only
    LINK_ONLY = "link-only"  # only relocatable device code: not loaded at run time
    NATIVE = "native"  # a cubin runs as is
    JIT = "jit"  # the driver compiles PTX at first load
    DRIVER_TOO_OLD = "driver-too-old"  # code exists but this driver cannot use it
    NO_KERNEL_IMAGE = "no-kernel-image"  # cudaErrorNoKernelImageAvailable

    @property
    def severity(self) -> int:
        """How bad the verdict is; the worst of several wins."""
        return _SEVERITY[self]

    @property
    def exit_code(self) -> int:
        """The exit code this verdict ends can-run and doctor with (docs/exit-codes.md)."""
        return _EXIT_CODES[self]


_SEVERITY: Mapping[Verdict, int] = {
    Verdict.NO_DEVICE_CODE: 0,
    Verdict.LINK_ONLY: 0,
    Verdict.NATIVE: 0,
    Verdict.JIT: 1,
    Verdict.DRIVER_TOO_OLD: 2,
    Verdict.NO_KERNEL_IMAGE: 3,
}
# can-run's exit code for each verdict (exit_codes.py, docs/exit-codes.md)
_EXIT_CODES: Mapping[Verdict, ExitCode] = {
    Verdict.NO_DEVICE_CODE: ExitCode.OK,
    Verdict.LINK_ONLY: ExitCode.OK,
    Verdict.NATIVE: ExitCode.OK,
    Verdict.JIT: ExitCode.SOME_JIT,
    Verdict.DRIVER_TOO_OLD: ExitCode.DRIVER_TOO_OLD,
    Verdict.NO_KERNEL_IMAGE: ExitCode.NO_KERNEL_IMAGE,
}


class StepVerdict(str, Enum):
    """What one smoke step did on a real GPU (observed, where ``Verdict`` is predicted)."""

    NATIVE = Verdict.NATIVE.value  # it ran with CUDA_DISABLE_PTX_JIT=1
    JIT_ONLY = "jit-only"  # the observed form of Verdict.JIT: it ran only with the JIT allowed
    NO_KERNEL_IMAGE = Verdict.NO_KERNEL_IMAGE.value
    WRONG_RESULT = "wrong-result"
    HANG = "hang"
    CRASH = "crash"
    ERROR = "error"
    SKIPPED = "skipped"
    CPU_PASSED = "cpu-passed"  # the snippet's CPU part ran (CUDA hidden) without an error


class SmokeVerdict(str, Enum):
    """A whole smoke run: the worst of its steps, or why no step could run."""

    PASSED = "passed"  # every step ran natively and matched the reference
    JIT_ONLY = StepVerdict.JIT_ONLY.value
    NO_KERNEL_IMAGE = Verdict.NO_KERNEL_IMAGE.value
    FAILED = "failed"  # wrong results or errors
    HANG_OR_CRASH = "hang-or-crash"
    NO_DEVICE = "no-device"
    CPU_ONLY = "cpu-only"  # no device: the snippet's CPU part ran and passed, the GPU part not
    ENVIRONMENT_FAILED = "environment-failed"  # the venv/container or the install failed
    TORCH_BROKEN = "torch-broken"  # the installed torch does not import
    INTERRUPTED = "interrupted"  # Ctrl-C or SIGTERM: the report holds what ran before


# A prediction of can-run and the step verdict that confirms it on the GPU.
OBSERVED: Mapping[Verdict, StepVerdict] = MappingProxyType(
    {
        Verdict.NATIVE: StepVerdict.NATIVE,
        Verdict.JIT: StepVerdict.JIT_ONLY,
        Verdict.NO_KERNEL_IMAGE: StepVerdict.NO_KERNEL_IMAGE,
    }
)
