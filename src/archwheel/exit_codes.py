"""Every exit code of archwheel, in one table: the contract of ``docs/exit-codes.md``.

A command returns a member of ``ExitCode``; nothing else in the package defines an exit number
(``tests/unit/test_exit_codes.py`` checks the source and that this table and the document list
the same codes with the same meaning). Generic codes (0-5, 130, 141, 143) come from a verdict or
from the class of the error that ended a command (``ERROR_CODES``: the exceptions of
``errors.py`` carry no exit code, the command line maps them here); the verdict commands add
their own ranges, chosen not to collide: ``can-run`` / ``doctor`` 10-13, ``smoke`` 20-23.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from types import MappingProxyType

from archwheel.errors import (
    ArchwheelError,
    BuildError,
    FactsError,
    InputError,
    ToolError,
    UsageError,
)


class ExitCode(IntEnum):
    """Every exit status a command can end with, as docs/exit-codes.md lists them; commands return a
    member, never a bare number."""

    # generic (every command)
    OK = 0
    VERDICT_FAILED = 1
    USAGE = 2
    INCOMPLETE = 3
    TOOL = 4
    BUILD = 5
    # can-run and doctor: the most severe verdict over every library and GPU
    SOME_JIT = 10
    NO_KERNEL_IMAGE = 11
    DRIVER_TOO_OLD = 12
    VARIANT_UNBACKED = 13  # a variant.json claims what the device code does not back
    # smoke: what really happened on the GPU
    SMOKE_NO_DEVICE = 20
    SMOKE_JIT_ONLY = 21
    SMOKE_NO_KERNEL_IMAGE = 22
    SMOKE_HANG_OR_CRASH = 23
    SMOKE_CPU_ONLY = 24
    # signals, as a shell reports them (128 + signal number)
    INTERRUPTED = 130
    OUTPUT_GONE = 141  # standard output closed or its pipe's reader gone (128 + SIGPIPE)
    TERMINATED = 143


# One line each, as docs/exit-codes.md explains them at length.
MEANING: dict[ExitCode, str] = {
    ExitCode.OK: "success",
    ExitCode.VERDICT_FAILED: "a verdict failed (something requested is missing, a mismatch)",
    ExitCode.USAGE: "usage error (arguments, arch list, recipe, version)",
    ExitCode.INCOMPLETE: "an input could not be read completely",
    ExitCode.TOOL: "an external tool or engine is missing or failed",
    ExitCode.BUILD: "a build failed",
    ExitCode.SOME_JIT: "some library runs only by JIT-compiling PTX",
    ExitCode.NO_KERNEL_IMAGE: "some library has no kernel image for some GPU",
    ExitCode.DRIVER_TOO_OLD: "the driver is too old",
    ExitCode.VARIANT_UNBACKED: "a variant.json claims an arch or driver the device code lacks",
    ExitCode.SMOKE_NO_DEVICE: "no CUDA device",
    ExitCode.SMOKE_JIT_ONLY: "some kernels ran only through the PTX JIT",
    ExitCode.SMOKE_NO_KERNEL_IMAGE: "no kernel image for some device",
    ExitCode.SMOKE_HANG_OR_CRASH: "a step hung or crashed",
    ExitCode.SMOKE_CPU_ONLY: "the CPU part passed; no CUDA device for the GPU part",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
    ExitCode.OUTPUT_GONE: "standard output is closed, or its reader went away (SIGPIPE)",
    ExitCode.TERMINATED: "terminated (SIGTERM)",
}

# The names the modules use (one binding each, no second number anywhere).
EXIT_OK = ExitCode.OK
EXIT_VERDICT_FAILED = ExitCode.VERDICT_FAILED
EXIT_USAGE = ExitCode.USAGE
EXIT_INCOMPLETE = ExitCode.INCOMPLETE
EXIT_TOOL = ExitCode.TOOL
EXIT_BUILD = ExitCode.BUILD
EXIT_INTERRUPTED = ExitCode.INTERRUPTED
EXIT_OUTPUT_GONE = ExitCode.OUTPUT_GONE
EXIT_TERMINATED = ExitCode.TERMINATED


# The exit code of each error class, for the command line (``exit_code_for``). A subclass not
# listed takes its nearest listed base's code: ``RecipeError`` and ``ArchListError`` are usage
# errors (2), ``effects.process.ProgramTimedOut`` a tool error (4).
ERROR_CODES: Mapping[type[ArchwheelError], ExitCode] = MappingProxyType(
    {
        ArchwheelError: ExitCode.USAGE,
        UsageError: ExitCode.USAGE,
        InputError: ExitCode.INCOMPLETE,
        FactsError: ExitCode.TOOL,
        ToolError: ExitCode.TOOL,
        BuildError: ExitCode.BUILD,
    }
)


def exit_code_for(error: ArchwheelError) -> ExitCode:
    """The exit code a command that ended with ``error`` returns (its class's in
    ``ERROR_CODES``, else its nearest listed base class's)."""
    for cls in type(error).__mro__:
        if issubclass(cls, ArchwheelError) and cls in ERROR_CODES:
            return ERROR_CODES[cls]
    return ExitCode.USAGE  # unreachable: ArchwheelError is listed
