"""How long a build's jobs take on N machines: list scheduling of a job graph, purely.

The model: N machines of ``cores`` slots each; machine 0 is the building machine, the only one
that runs ``local`` jobs (links, preprocessing, nvcc's driver: what a farm never takes); a
``farm`` job runs on any free slot, a build server's first. Whenever a slot frees, the ready
jobs (all they wait for done) are taken in priority order: the longest path from the job to the
end of the build first (its "bottom level", the classic critical-path list schedule), then the
longer job, then the name. A job that has no free slot of its kind waits; the next one may go.
N = 1 is the build on the machine alone. No transfer time, no toolchain upload, no scheduler
round trip is modelled: the figures are the graph's own bound for a farm with free networking.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from archwheel.verdicts.compile_jobs import Job


class GraphError(ValueError):
    """A job graph that cannot be scheduled: a missing dependency or a cycle."""


@dataclass(frozen=True)
class Placement:
    """Where and when one job ran in a simulated schedule."""

    job: str
    machine: int
    start: float
    end: float


@dataclass(frozen=True)
class Schedule:
    """A simulated run: its wall time and every job's placement."""

    machines: int
    cores: int
    wall: float
    placements: Mapping[str, Placement]

    def on_farm(self) -> int:
        """How many jobs ran on a build server (a machine other than the building one)."""
        return sum(1 for p in self.placements.values() if p.machine != 0)


def _order(jobs: Sequence[Job]) -> list[Job]:
    """The jobs in an order where each follows what it waits for; GraphError otherwise."""
    by_name = {j.name: j for j in jobs}
    if len(by_name) != len(jobs):
        raise GraphError("two jobs share a name")
    for job in jobs:
        missing = [d for d in job.deps if d not in by_name]
        if missing:
            raise GraphError(f"job {job.name!r} waits for unknown job {missing[0]!r}")
    waiting = {j.name: len(set(j.deps)) for j in jobs}
    users: dict[str, list[str]] = {j.name: [] for j in jobs}
    for job in jobs:
        for dep in set(job.deps):
            users[dep].append(job.name)
    ready = [n for n, count in waiting.items() if count == 0]
    order: list[Job] = []
    while ready:
        name = ready.pop()
        order.append(by_name[name])
        for user in users[name]:
            waiting[user] -= 1
            if waiting[user] == 0:
                ready.append(user)
    if len(order) != len(jobs):
        raise GraphError("the job graph has a cycle")
    return order


def bottom_levels(jobs: Sequence[Job]) -> dict[str, float]:
    """Each job's longest path to the end of the build, its own time included."""
    level: dict[str, float] = {}
    users: dict[str, list[str]] = {j.name: [] for j in jobs}
    for job in jobs:
        for dep in set(job.deps):
            users.setdefault(dep, []).append(job.name)
    for job in reversed(_order(jobs)):
        level[job.name] = job.seconds + max((level[u] for u in users[job.name]), default=0.0)
    return level


def critical_path(jobs: Sequence[Job]) -> float:
    """The longest chain of dependent jobs: no number of machines finishes sooner."""
    return max(bottom_levels(jobs).values(), default=0.0)


def serial_work(jobs: Sequence[Job]) -> float:
    """The seconds of all jobs together (one core, one after another)."""
    return sum(j.seconds for j in jobs)


def simulate(jobs: Sequence[Job], machines: int, cores: int) -> Schedule:
    """List-schedule ``jobs`` on ``machines`` machines of ``cores`` slots (machine 0 builds)."""
    if machines < 1 or cores < 1:
        raise ValueError("machines and cores must be at least 1")
    level = bottom_levels(jobs)
    by_name = {j.name: j for j in jobs}
    waiting = {j.name: len(set(j.deps)) for j in jobs}
    users: dict[str, list[str]] = {j.name: [] for j in jobs}
    for job in jobs:
        for dep in set(job.deps):
            users[dep].append(job.name)
    free = [cores] * machines
    ready = sorted(
        (n for n, c in waiting.items() if c == 0),
        key=lambda n: (-level[n], -by_name[n].seconds, n),
    )
    running: list[tuple[float, str, int]] = []  # (end, job, machine)
    placed: dict[str, Placement] = {}
    now = 0.0
    while ready or running:
        left = []
        for name in ready:
            machine = _slot(free, by_name[name].where == "local")
            if machine is None:
                left.append(name)
                continue
            free[machine] -= 1
            end = now + by_name[name].seconds
            placed[name] = Placement(name, machine, now, end)
            heapq.heappush(running, (end, name, machine))
        ready = left
        if not running:
            break  # nothing runs and nothing fits: cannot happen with cores >= 1
        now, name, machine = heapq.heappop(running)
        finished = [(name, machine)]
        while running and running[0][0] <= now:
            _, other, where = heapq.heappop(running)
            finished.append((other, where))
        for done, where in finished:
            free[where] += 1
            for user in users[done]:
                waiting[user] -= 1
                if waiting[user] == 0:
                    ready.append(user)
        ready.sort(key=lambda n: (-level[n], -by_name[n].seconds, n))
    wall = max((p.end for p in placed.values()), default=0.0)
    return Schedule(machines, cores, wall, MappingProxyType(placed))


def _slot(free: list[int], local: bool) -> int | None:
    """A machine with a free slot: the building machine for a local job, a build server
    first for a farm job."""
    if local:
        return 0 if free[0] > 0 else None
    for machine in range(1, len(free)):
        if free[machine] > 0:
            return machine
    return 0 if free[0] > 0 else None
