"""How long a build's jobs take on N machines: list scheduling of a job graph, purely.

The model: N machines of ``cores`` slots each; machine 0 is the building machine, the only one
that runs ``local`` jobs (links, preprocessing, nvcc's driver: what a farm never takes); a
``farm`` job runs on any free slot, a build server's first. Whenever a slot frees, the ready
jobs (all they wait for done) are taken in priority order: the longest path from the job to the
end of the build first (its "bottom level", the classic critical-path list schedule), then the
longer job, then the name. A job that has no free slot of its kind waits; the next one may go.
N = 1 is the build on the machine alone. ``farm_walls`` keeps the building machine to its local
jobs (N build servers beside it) and takes, for each N, the best schedule on up to N servers, so
more servers are never slower. No transfer time, no toolchain upload, no scheduler
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


def critical_chain(jobs: Sequence[Job]) -> tuple[Job, ...]:
    """The jobs of the longest chain, first to last (its seconds add up to ``critical_path``)."""
    if not jobs:
        return ()
    level = bottom_levels(jobs)
    by_name = {j.name: j for j in jobs}
    users: dict[str, list[str]] = {j.name: [] for j in jobs}
    for job in jobs:
        for dep in set(job.deps):
            users[dep].append(job.name)
    name = max(level, key=lambda n: (level[n], n))
    chain = [by_name[name]]
    while users[name]:
        name = max(users[name], key=lambda n: (level[n], n))
        chain.append(by_name[name])
    return tuple(chain)


def simulate(
    jobs: Sequence[Job], machines: int, cores: int, build_machine_compiles: bool = True
) -> Schedule:
    """List-schedule ``jobs`` on ``machines`` machines of ``cores`` slots (machine 0 builds).

    With ``build_machine_compiles`` False the building machine runs its ``local`` jobs only and
    every ``farm`` job waits for a build server (machines 1 ..; at least two machines then)."""
    if machines < 1 or cores < 1:
        raise ValueError("machines and cores must be at least 1")
    if not build_machine_compiles and machines < 2:
        raise ValueError("a farm without the building machine's cores needs a build server")
    level = bottom_levels(jobs)
    by_name = {j.name: j for j in jobs}
    waiting = {j.name: len(set(j.deps)) for j in jobs}
    users: dict[str, list[str]] = {j.name: [] for j in jobs}
    for job in jobs:
        for dep in set(job.deps):
            users[dep].append(job.name)
    free = [cores] * machines
    servers = list(range(1, machines))  # a heap of the build servers with a free slot
    # two ready heaps (local, farm) in one priority order: the longest path to the end first
    ready: dict[bool, list[tuple[float, float, str]]] = {True: [], False: []}

    def make_ready(name: str) -> None:
        job = by_name[name]
        heapq.heappush(ready[job.where == "local"], (-level[name], -job.seconds, name))

    for name, count in waiting.items():
        if count == 0:
            make_ready(name)
    running: list[tuple[float, str, int]] = []  # (end, job, machine)
    placed: dict[str, Placement] = {}
    now = 0.0
    while ready[True] or ready[False] or running:
        while True:
            local = ready[True][0] if ready[True] and free[0] > 0 else None
            while servers and free[servers[0]] == 0:
                heapq.heappop(servers)
            farm_fits = bool(servers) or (build_machine_compiles and free[0] > 0)
            farm = ready[False][0] if ready[False] and farm_fits else None
            if local is None and farm is None:
                break
            take_local = farm is None or (local is not None and local < farm)
            _, _, name = heapq.heappop(ready[take_local])
            machine = 0 if take_local or not servers else servers[0]
            free[machine] -= 1
            end = now + by_name[name].seconds
            placed[name] = Placement(name, machine, now, end)
            heapq.heappush(running, (end, name, machine))
        if not running:
            break  # nothing runs and nothing fits: cannot happen with cores >= 1
        now, name, machine = heapq.heappop(running)
        finished = [(name, machine)]
        while running and running[0][0] <= now:
            _, other, where = heapq.heappop(running)
            finished.append((other, where))
        for done, where in finished:
            free[where] += 1
            if where != 0 and free[where] == 1:
                heapq.heappush(servers, where)
            for user in users[done]:
                waiting[user] -= 1
                if waiting[user] == 0:
                    make_ready(user)
    wall = max((p.end for p in placed.values()), default=0.0)
    return Schedule(machines, cores, wall, MappingProxyType(placed))


def farm_walls(jobs: Sequence[Job], servers: Sequence[int], cores: int) -> dict[int, float]:
    """The predicted wall time on each number of build servers of ``cores`` slots, beside a
    building machine of as many slots that runs only the ``local`` jobs.

    A list schedule is not monotone in the machines it gets (Graham's anomalies: one more
    server can change the order jobs start in and end later), but a farm of N servers can
    always leave some idle, so each N gets the best schedule on any of the sizes asked for up
    to N: more servers are never slower."""
    walls: dict[int, float] = {}
    best = float("inf")
    for n in sorted(set(servers)):
        if n < 1:
            raise ValueError("a farm needs at least one build server")
        best = min(best, simulate(jobs, n + 1, cores, build_machine_compiles=False).wall)
        walls[n] = best
    return walls
