"""Why a compile step failed, when the output says more than its exit code.

``compile_failure_error`` is the one place a failed compile step becomes its message: a full
file system, then memory, then the other causes ``verdicts.compile_failure`` knows (the C++
standard, a missing CUDA header, nvcc not found), each one line with its fix and the path of
the full log; an unknown cause keeps the step's last line, with the log's path.

A compile that runs out of memory rarely says so in its exit status: the kernel's OOM killer
ends one ``cc1plus`` or ``cicc`` and the compiler driver reports "Killed signal terminated
program cc1plus" (exit 1), or an address-space limit makes the compiler print "virtual memory
exhausted" or ``std::bad_alloc``; a killed container ends with 137. Each is turned into one
message that says what ran out and what to change: fewer jobs, or more memory per job.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from archwheel.effects.engine import OOM_LIKELY
from archwheel.errors import BuildError
from archwheel.verdicts.compile_failure import (
    OOM_PATTERNS,
    OUT_OF_MEMORY,
    FailureContext,
    classify_compile_failure,
)

if TYPE_CHECKING:  # the type only (plan.py does not import this module)
    from archwheel.wheelbuild.planning.plan import BuildPlan

OOM_SIGNATURES = OOM_PATTERNS  # one table (verdicts/compile_failure.py)


def out_of_memory_evidence(lines: Iterable[str], message: str) -> str | None:
    """The output line that shows the build ran out of memory, or None."""
    for line in reversed(list(lines)):
        for pattern in OOM_SIGNATURES:
            if pattern.search(line):
                return line.strip()
    if OOM_LIKELY in message:
        return message
    return None


def out_of_memory_error(
    evidence: str, *, jobs: int, jobs_variable: str, memory_per_job_gib: float, recipe: Path
) -> BuildError:
    """The error for a compile that ran out of memory: fewer jobs, or more memory per job."""
    fewer = max(1, jobs // 2)
    return BuildError(
        f"the compile ran out of memory with {jobs_variable}={jobs} ({evidence[:200]})",
        hint=f"build with fewer jobs (--jobs {fewer}), or raise [build] memory_per_job_gib "
        f"(now {memory_per_job_gib:g}) in {recipe} so archwheel starts fewer jobs for the "
        "memory there is",
    )


# A compile that fills its file system: nvcc's "error while writing generated C++ file: No space
# left on device", ld's "final close failed: No space left on device", Python's OSError 28.
NO_SPACE = re.compile(r"No space left on device|Disk quota exceeded|\[Errno 28\]")


def out_of_space_evidence(lines: Iterable[str]) -> str | None:
    """The output line that shows the build filled a file system, or None."""
    for line in reversed(list(lines)):
        if NO_SPACE.search(line):
            return line.strip()
    return None


def out_of_space_error(evidence: str, *, work: Path) -> BuildError:
    """The build's work folder (``/build`` in the container) is on the host's temporary file
    system; ``/tmp`` inside the container is the engine's storage. Both are named."""
    try:
        size = f"a file system of {shutil.disk_usage(work.parent).total / 2**20:.1f} MiB"
    except OSError:
        size = "a file system of unknown size"
    return BuildError(
        f"the build ran out of disk space ({evidence[:160]}): its work folder in {work.parent} "
        f"(/build in the container; {size}) filled up; nothing was placed",
        hint="free space there or point TMPDIR at a larger file system; the container's own "
        "/tmp lives in the engine's storage (`docker system df`)",
    )


def host_out_of_space_error(exc: OSError, temp_root: Path) -> BuildError:
    """A host-side step (re-pack, repair, audit) filled its file system: which, and how full."""
    where = Path(exc.filename) if exc.filename else temp_root
    try:
        size = f"a file system of {shutil.disk_usage(temp_root).total / 2**20:.1f} MiB"
    except OSError:
        size = "a file system of unknown size"
    return BuildError(
        f"the build ran out of disk space writing {where} ({exc.strerror}): the temporary "
        f"folder {temp_root} ({size}) filled up; nothing was placed",
        hint="free space there or point TMPDIR at a larger file system",
    )


def with_log(error: BuildError, log: str | None) -> BuildError:
    """``error`` with the path of the build's full log after its hint (the same object)."""
    if log:
        where = f"the full log: {log}"
        error.hint = f"{error.hint}; {where}" if error.hint else where
    return error


def compile_failure_error(
    error: BuildError,
    *,
    tail: Sequence[str],
    evidence: Sequence[str],
    plan: BuildPlan,
    work: Path,
    log: str | None,
) -> BuildError:
    """The error a failed compile step ends the build with: its known cause and fix where
    its output shows one (``tail``: the last lines; ``evidence``: ``EvidenceLines.lines()``),
    else ``error`` itself; with the log's path either way."""
    no_room = out_of_space_evidence(tail)
    if no_room is not None:
        return with_log(out_of_space_error(no_room, work=work), log)
    recipe = plan.recipe
    oom = out_of_memory_evidence(tail, error.message)
    torch = plan.torch.wheel.version if plan.torch is not None else None
    context = FailureContext(
        toolchain=recipe.toolchain.source,
        cuda_major=recipe.toolchain.cuda.major if recipe.toolchain.cuda is not None else None,
        torch=torch,
    )
    cause = None if oom is not None else classify_compile_failure(evidence, context)
    if cause is not None and cause.kind == OUT_OF_MEMORY:
        oom = cause.evidence
    if oom is not None:
        return with_log(
            out_of_memory_error(
                oom,
                jobs=plan.jobs.jobs,
                jobs_variable=recipe.build.jobs_variable,
                memory_per_job_gib=recipe.build.memory_per_job_gib,
                recipe=recipe.path,
            ),
            log,
        )
    if cause is None:
        return with_log(error, log)
    return with_log(
        BuildError(f"the compile failed: {cause.cause} ({cause.evidence[:200]})", hint=cause.fix),
        log,
    )
