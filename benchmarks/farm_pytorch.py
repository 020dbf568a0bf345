"""PyTorch's real build graph on simulated farms: part of `nox -s bench -- farm-sim`.

Reads the recorded configured PyTorch 2.6.0 build (tests/support/data/pytorch-2.6.0-cuda:
Debian's source, CUDA 12.4, "8.0;9.0"): every build edge a plain ``ninja`` runs, with its
explicit, implicit and order-only waits (``binary/buildgraph.py``). Each step's seconds are
measured where its file was timed alone, else sampled with a fixed seed within its stratum's
measured range; links and codegen are assumptions (``verdicts/ninja_jobs.py`` says which is
which, and the output repeats it). Then the predicted wall time on 1, 2, 4, 16, 64 and 256 build
servers of 2 cores, the building machine's own 2 cores running what a farm never takes (links,
codegen), and the critical path with its heaviest steps. The check: the 1-server wall time
against the projection from the same measurements (8-10 CPU-hours for two archs, so 4-5 h on 2
cores), within 20%.
"""

from __future__ import annotations

import tarfile
import tempfile
import time
from pathlib import Path

from archwheel.binary.buildgraph import BuildGraph, read_ninja_graph
from archwheel.verdicts.farm_schedule import critical_chain, farm_walls, serial_work
from archwheel.verdicts.ninja_jobs import PYTORCH_MEASURED, PYTORCH_STRATA, pytorch_jobs

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "support" / "data" / "pytorch-2.6.0-cuda" / "configured.tar.xz"
SERVERS = (1, 2, 4, 16, 64, 256)
CORES = 2
SEED = 0
PROJECTED_WALL_H = (4.0, 5.0)  # 8-10 CPU-hours over 2 cores (the reference's projection)
TOLERANCE = 0.20
HEAVIEST = 5


def load_graph() -> BuildGraph:
    """The recorded build.ninja (with CMake's rules.ninja), read into its graph."""
    with tempfile.TemporaryDirectory(prefix="farm-pytorch-") as tmp:
        with tarfile.open(RECORDED) as archive:
            archive.extractall(tmp, filter="data")
        build = Path(tmp) / "build"

        def included(name: str) -> str | None:
            path = build / name
            return path.read_text() if path.is_file() else None

        return read_ninja_graph((build / "build.ninja").read_text(), included)


def replay() -> dict[str, object]:
    """The figures of PyTorch's graph: counts, work, predicted walls, the critical path."""
    start = time.perf_counter()
    graph = load_graph()
    reached = graph.reached()
    jobs, counts = pytorch_jobs(graph, SEED)
    one_arch, _ = pytorch_jobs(graph, SEED, archs=1)
    by_kind: dict[str, int] = {}
    for edge in reached:
        by_kind[edge.kind] = by_kind.get(edge.kind, 0) + 1
    two = farm_walls(jobs, SERVERS, CORES)
    one = farm_walls(one_arch, SERVERS, CORES)
    predicted = {
        str(n): {"two_archs": round(two[n], 1), "one_arch": round(one[n], 1)} for n in SERVERS
    }
    chain = critical_chain(jobs)
    heaviest = sorted(chain, key=lambda j: -j.seconds)[:HEAVIEST]
    return {
        "edges_in_file": len(graph.edges),
        "edges_run": len(reached),
        "edges_by_kind": dict(sorted(by_kind.items(), key=lambda kv: -kv[1])),
        "steps_by_stratum": counts,
        "seed": SEED,
        "serial_work_s": {
            "two_archs": round(serial_work(jobs), 1),
            "one_arch": round(serial_work(one_arch), 1),
        },
        "predicted_s": predicted,
        "critical_path_s": round(sum(j.seconds for j in chain), 1),
        "critical_path_steps": len(chain),
        "critical_path_heaviest": [
            {"job": j.name, "stratum": j.kind, "seconds": round(j.seconds, 1)} for j in heaviest
        ],
        "elapsed_s": round(time.perf_counter() - start, 2),
    }


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def report(figures: dict[str, object]) -> bool:
    """Print the PyTorch table; whether the 1-server wall agrees with the projection."""
    kinds = figures["edges_by_kind"]
    strata = figures["steps_by_stratum"]
    work = figures["serial_work_s"]
    predicted = figures["predicted_s"]
    assert isinstance(kinds, dict) and isinstance(strata, dict)
    assert isinstance(work, dict) and isinstance(predicted, dict)
    print(
        f"PyTorch 2.6.0 (CUDA 12.4, 8.0;9.0; Debian's source): the recorded build.ninja's "
        f"{figures['edges_run']} edges a plain ninja runs (of {figures['edges_in_file']}): "
        + ", ".join(f"{n} {k}" for k, n in kinds.items())
    )
    print("  seconds per step (CPU-s, two archs), sampled with seed "
          f"{figures['seed']} within each stratum unless measured alone:")  # fmt: skip
    for name, count in strata.items():
        if name == "measured alone":
            files = ", ".join(f"{Path(f).name} {s:g}" for f, s in PYTORCH_MEASURED.items())
            print(f"    {count:>5}  measured alone: {files}")
            continue
        s = PYTORCH_STRATA[name]
        median = f", median {s.median:g}" if s.median is not None else ""
        print(f"    {count:>5}  {name}: {s.low:g}-{s.high:g} s{median} ({s.basis})")
    one_server = float(predicted["1"]["two_archs"])
    low, high = PROJECTED_WALL_H
    ok = low * 3600 * (1 - TOLERANCE) <= one_server <= high * 3600 * (1 + TOLERANCE)
    print(
        f"  serial work: {work['two_archs'] / 3600:.2f} CPU-h two archs, "
        f"{work['one_arch'] / 3600:.2f} one arch (CUDA steps at 0.62x, flash 0.47x)"
    )
    print(
        f"  check: 1 server of {CORES} cores {_hours(one_server)} vs the projection {low:g}-"
        f"{high:g} h (8-10 CPU-h on 2 cores): "
        f"{'within' if ok else 'TARGET MISSED: outside'} {TOLERANCE:.0%}"
    )
    print(
        f"  critical path {_hours(float(str(figures['critical_path_s'])))} over "
        f"{figures['critical_path_steps']} steps; its heaviest:"
    )
    heaviest = figures["critical_path_heaviest"]
    assert isinstance(heaviest, list)
    for step in heaviest:
        print(f"    {step['seconds']:>7.1f} s  {step['job']} ({step['stratum']})")
    print(f"  {'servers':>8}  {'two archs':>10}  {'one arch':>10}  speed-up (+ the building "
          f"machine's {CORES} cores for links and codegen)")  # fmt: skip
    for n, walls in predicted.items():
        print(
            f"  {n:>8}  {_hours(walls['two_archs']):>10}  {_hours(walls['one_arch']):>10}  "
            f"{one_server / walls['two_archs']:.1f}x"
        )
    print(f"  read, timed and simulated in {figures['elapsed_s']} s")
    return ok
