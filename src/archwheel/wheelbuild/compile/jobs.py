"""How many compile jobs a build runs: bounded by the cores AND by the memory.

A CUDA translation unit can need gigabytes (PyTorch's flash-attention and CUTLASS files several
GB each, more with every extra arch), so ``MAX_JOBS`` = number of cores runs a 16-core, 32 GB
machine out of memory. The job count is ``min(cores, available memory / memory per job)``, at
least 1; the recipe says how much memory one job needs. Cores and memory respect cgroup
limits (a CI runner's container sees the host's ``/proc/meminfo``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from archwheel.errors import UsageError

GIB = 1 << 30
# The most compile jobs a build takes (``--jobs``): ninja and make start that many compilers.
MAX_JOBS = 1024


@dataclass(frozen=True)
class HostResources:
    """The cores and available memory of this host (cgroup limits applied), for ``choose_jobs``."""

    cpus: int
    memory_bytes: int  # memory available to new processes

    @property
    def memory_gib(self) -> float:
        """The available memory in GiB."""
        return self.memory_bytes / GIB


@dataclass(frozen=True)
class JobCount:
    """The compile job count of a build, the core and memory bounds, and the plan's reason."""

    jobs: int
    by_cpu: int
    by_memory: int
    requested: int | None
    reason: str


def check_jobs(jobs: int | None) -> None:
    """``UsageError`` unless ``jobs`` (``--jobs``) is None or 1 to ``MAX_JOBS``."""
    if jobs is not None and not 1 <= jobs <= MAX_JOBS:
        raise UsageError(f"--jobs must be at least 1 and at most {MAX_JOBS}, not {jobs}")


def choose_jobs(
    host: HostResources, memory_per_job_gib: float, requested: int | None = None
) -> JobCount:
    """The job count and why: ``2 (2 cores; 21.3 GiB available / 2 GiB per job = 10)``."""
    by_cpu = max(1, host.cpus)
    by_memory = max(1, int(host.memory_gib // memory_per_job_gib))
    budget = (
        f"{host.cpus} cores; {host.memory_gib:.1f} GiB available / "
        f"{memory_per_job_gib:g} GiB per job = {by_memory}"
    )
    if requested is not None:
        jobs = max(1, requested)
        warning = " (more than the memory allows: expect swapping or OOM kills)"
        reason = f"{jobs} as requested ({budget}){warning if jobs > by_memory else ''}"
        return JobCount(jobs, by_cpu, by_memory, requested, reason)
    jobs = min(by_cpu, by_memory)
    return JobCount(jobs, by_cpu, by_memory, None, f"{jobs} ({budget})")


def detect_host_resources(
    proc: Path = Path("/proc"), cgroup: Path = Path("/sys/fs/cgroup")
) -> HostResources:
    """Read this host's cores and available memory from ``proc`` and ``cgroup`` (v2 or v1)."""
    return HostResources(_cpus(cgroup), _memory(proc, cgroup))


def _cpus(cgroup: Path) -> int:
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        count = os.cpu_count() or 1
    quota = _read(cgroup / "cpu.max")  # cgroup v2: "max 100000" or "200000 100000"
    if quota:
        parts = quota.split()
        if len(parts) == 2 and parts[0] != "max":
            count = min(count, max(1, int(int(parts[0]) / int(parts[1]))))
    else:  # cgroup v1
        q, p = (
            _read(cgroup / "cpu" / "cpu.cfs_quota_us"),
            _read(cgroup / "cpu" / "cpu.cfs_period_us"),
        )
        if q and p and int(q) > 0:
            count = min(count, max(1, int(q) // int(p)))
    return max(1, count)


def _memory(proc: Path, cgroup: Path) -> int:
    available = 0
    for line in (_read(proc / "meminfo") or "").splitlines():
        if line.startswith("MemAvailable:"):
            available = int(line.split()[1]) * 1024
    limits = []
    for limit_file, usage_file in (
        (cgroup / "memory.max", cgroup / "memory.current"),
        (cgroup / "memory" / "memory.limit_in_bytes", cgroup / "memory" / "memory.usage_in_bytes"),
    ):
        limit, usage = _read(limit_file), _read(usage_file)
        if limit and limit.isdigit() and int(limit) < (1 << 60):
            limits.append(int(limit) - int(usage or 0))
    if limits:
        available = min([available, *limits]) if available else min(limits)
    return max(available, 256 << 20)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
