"""Why a compile step failed, when the output says more than its exit code.

A compile that runs out of memory rarely says so in its exit status: the kernel's OOM killer
ends one ``cc1plus`` or ``cicc`` and the compiler driver reports "Killed signal terminated
program cc1plus" (exit 1), or an address-space limit makes the compiler print "virtual memory
exhausted" or ``std::bad_alloc``; a killed container ends with 137. Each is turned into one
message that says what ran out and what to change: fewer jobs, or more memory per job.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from archwheel.effects.engine import OOM_LIKELY
from archwheel.errors import BuildError

OOM_SIGNATURES = (
    re.compile(r"Killed signal terminated program (\S+)"),
    re.compile(r"virtual memory exhausted"),
    re.compile(r"std::bad_alloc"),
    re.compile(r"\bout of memory\b", re.IGNORECASE),
    re.compile(r"Cannot allocate memory"),
    re.compile(r"MemoryError"),
    re.compile(r"nvcc error\s*:\s*'(\S+)' died due to signal 9"),
)


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
