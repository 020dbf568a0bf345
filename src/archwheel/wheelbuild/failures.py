"""Why a compile step failed, when the output says more than its exit code.

A compile that runs out of memory rarely says so in its exit status: the kernel's OOM killer
ends one ``cc1plus`` or ``cicc`` and the compiler driver reports "Killed signal terminated
program cc1plus" (exit 1), or an address-space limit makes the compiler print "virtual memory
exhausted" or ``std::bad_alloc``; a killed container ends with 137. Each is turned into one
message that says what ran out and what to change: fewer jobs, or more memory per job.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

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
    if "(exit 137)" in message:
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
