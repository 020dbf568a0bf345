"""The farm simulation (``verdicts.farm_schedule``): list scheduling of a job graph on N
machines, against schedules whose optimum is known by hand, the critical-path and work
bounds, and the building machine's own jobs."""

from __future__ import annotations

import itertools
import random

import pytest

from archwheel.verdicts.compile_jobs import Job
from archwheel.verdicts.farm_schedule import (
    GraphError,
    critical_chain,
    critical_path,
    farm_walls,
    serial_work,
    simulate,
)


def test_critical_path_first_finds_the_known_optimum() -> None:
    # x(1) -> y(5), and z(4), w(3) on one machine of 2 cores. The work is 13 s, so no schedule
    # beats 7 s: x and z first, y after x, w after z gives 7. Taking the longest ready job first
    # (z, w) would start the y chain at 3 and end at 9.
    jobs = [
        Job("x", 1.0),
        Job("y", 5.0, ("x",)),
        Job("z", 4.0),
        Job("w", 3.0),
    ]
    schedule = simulate(jobs, machines=1, cores=2)
    assert schedule.wall == pytest.approx(7.0)
    assert schedule.placements["y"].start == pytest.approx(1.0)


def test_balanced_independent_jobs_pack_both_cores() -> None:
    # 3, 2, 2, 1 on 2 cores: 3+1 and 2+2, the optimum 4 s (the work over the cores).
    jobs = [Job("a", 3.0), Job("b", 2.0), Job("c", 2.0), Job("d", 1.0)]
    assert simulate(jobs, machines=1, cores=2).wall == pytest.approx(4.0)


def test_one_machine_takes_the_serial_work_over_its_cores() -> None:
    jobs = [Job(f"j{i}", 1.5) for i in range(6)]
    assert serial_work(jobs) == pytest.approx(9.0)
    assert simulate(jobs, machines=1, cores=2).wall == pytest.approx(serial_work(jobs) / 2)
    assert simulate(jobs, machines=1, cores=1).wall == pytest.approx(serial_work(jobs))


def _random_graph(seed: int, size: int = 60) -> list[Job]:
    rng = random.Random(seed)
    jobs: list[Job] = []
    for i in range(size):
        picks = range(rng.randrange(3)) if i else range(0)
        deps = tuple(sorted({jobs[rng.randrange(i)].name for _ in picks}))
        where = "local" if rng.random() < 0.2 else "farm"
        jobs.append(Job(f"j{i:03d}", rng.uniform(0.1, 10.0), deps, where))  # type: ignore[arg-type]
    return jobs


@pytest.mark.parametrize("seed", range(5))
def test_no_schedule_beats_the_critical_path_or_the_work_over_the_slots(seed: int) -> None:
    jobs = _random_graph(seed)
    path = critical_path(jobs)
    for machines in (1, 2, 4, 16, 64):
        schedule = simulate(jobs, machines, cores=2)
        assert schedule.wall >= path - 1e-9
        assert schedule.wall >= serial_work(jobs) / (2 * machines) - 1e-9
        # whenever the critical chain waits, the slots it could take are all busy
        assert schedule.wall <= serial_work(jobs) / 2 + path + 1e-9
        farm_only = [Job(j.name, j.seconds, j.deps, "farm") for j in jobs]
        # Graham: a greedy list schedule on identical slots is within work/slots + path
        graham = simulate(farm_only, machines, cores=2).wall
        assert graham <= serial_work(jobs) / (2 * machines) + path + 1e-9
        for job in jobs:
            placed = schedule.placements[job.name]
            assert placed.end - placed.start == pytest.approx(job.seconds)
            for dep in job.deps:
                assert schedule.placements[dep].end <= placed.start + 1e-9


def test_enough_machines_reach_the_critical_path() -> None:
    jobs = _random_graph(7)
    farm_only = [Job(j.name, j.seconds, j.deps, "farm") for j in jobs]
    assert simulate(farm_only, machines=64, cores=2).wall == pytest.approx(critical_path(jobs))


def test_local_jobs_stay_on_the_building_machine() -> None:
    # Four links that only the building machine (2 cores) may run: more servers change nothing.
    links = [Job(f"link{i}", 2.0, (), "local", "link") for i in range(4)]
    compiles = [Job(f"cc{i}", 2.0) for i in range(8)]
    schedule = simulate([*links, *compiles], machines=8, cores=2)
    assert all(schedule.placements[j.name].machine == 0 for j in links)
    assert schedule.wall == pytest.approx(4.0)
    assert schedule.on_farm() == 8


def test_a_graph_that_cannot_run_is_refused() -> None:
    with pytest.raises(GraphError, match="unknown job"):
        simulate([Job("a", 1.0, ("b",))], 1, 1)
    with pytest.raises(GraphError, match="cycle"):
        simulate([Job("a", 1.0, ("b",)), Job("b", 1.0, ("a",))], 1, 1)
    with pytest.raises(ValueError, match="at least 1"):
        simulate([Job("a", 1.0)], 0, 2)


def test_the_critical_chain_of_a_hand_made_graph() -> None:
    # gen(3) -> a(10) -> link(2) -> mod(1); gen -> b(4) -> link; c(12) -> mod.
    # Chains: gen a link mod = 16, gen b link mod = 10, c mod = 13: the first is critical.
    jobs = [
        Job("gen", 3.0, (), "local"),
        Job("a", 10.0, ("gen",)),
        Job("b", 4.0, ("gen",)),
        Job("c", 12.0),
        Job("link", 2.0, ("a", "b"), "local"),
        Job("mod", 1.0, ("link", "c"), "local"),
    ]
    chain = critical_chain(jobs)
    assert [j.name for j in chain] == ["gen", "a", "link", "mod"]
    assert sum(j.seconds for j in chain) == pytest.approx(critical_path(jobs)) == 16.0
    # with servers enough, the farm reaches it; the building machine compiled nothing
    schedule = simulate(jobs, machines=4, cores=2, build_machine_compiles=False)
    assert schedule.wall == pytest.approx(16.0)
    assert all(schedule.placements[n].machine != 0 for n in ("a", "b", "c"))
    assert critical_chain([]) == ()


def test_without_the_building_machine_one_server_runs_every_compile() -> None:
    # 8 compiles of 2 s on one server of 2 cores: 8 s, though the building machine is idle
    compiles = [Job(f"cc{i}", 2.0) for i in range(8)]
    assert simulate(compiles, 2, 2, build_machine_compiles=False).wall == pytest.approx(8.0)
    assert simulate(compiles, 2, 2).wall == pytest.approx(4.0)  # it helps when it may
    with pytest.raises(ValueError, match="build server"):
        simulate(compiles, 1, 2, build_machine_compiles=False)


def test_a_list_schedule_alone_can_get_slower_with_a_server_more() -> None:
    # Graham's anomaly, found in this random graph: 4 servers end sooner than 5
    jobs = _random_graph(9)
    walls = [simulate(jobs, n + 1, 2, build_machine_compiles=False).wall for n in (4, 5)]
    assert walls[1] > walls[0]
    assert farm_walls(jobs, (4, 5), 2)[5] == pytest.approx(walls[0])


@pytest.mark.parametrize("seed", range(40))
def test_more_servers_are_never_slower(seed: int) -> None:
    jobs = _random_graph(seed)
    sizes = (1, 2, 3, 4, 5, 6, 8, 16, 64)
    walls = farm_walls(jobs, sizes, cores=2)
    assert list(walls) == list(sizes)
    assert all(walls[a] >= walls[b] for a, b in itertools.pairwise(sizes))
    assert walls[64] >= critical_path(jobs) - 1e-9
    farm_jobs = sum(j.seconds for j in jobs if j.where == "farm")
    assert walls[1] >= farm_jobs / 2 - 1e-9  # one server of 2 cores does every compile
