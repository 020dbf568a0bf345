"""A compile farm on paper: a real build's compile jobs replayed on N simulated machines.

`nox -s bench -- farm-sim` reads the job records of real builds (benchmarks/data/farm-*.json,
each made by ``benchmarks/farm_record.py``, the command in its ``recorded_with``): every nvcc,
host compile and link the build started, with its wall time, and nvcc's own ``--time`` phases.
``--fresh`` records them again first (two real builds in Docker, cold: the example and
torch-scatter 2.1.2 for "8.0;9.0;12.0"; torch-scatter alone is 10+ minutes on 2 cores).

For each build it checks the model against the build itself: the job graph with every nvcc
call one job, list-scheduled on one machine of the recorded build's cores (N = 1), must give
the compile wall time the build took (first compile's start to the last link's end) within
20% (exit 1 otherwise); the ratio is printed. Then it prints the predicted compile wall time on
N = 1, 2, 4, 16, 64 machines of as many cores, for two farms: one that sends each nvcc call
whole, and one that sends nvcc's per-arch jobs as sccache-dist does (``cicc``, ``ptxas``,
``cudafe++``, the host compile), with each graph's critical path (no farm beats it). Links,
preprocessing and nvcc's driver stay on the building machine (``verdicts/compile_jobs.py``;
the scheduler: ``verdicts/farm_schedule.py``).

Then PyTorch's own build graph (``farm_pytorch.py``): the recorded PyTorch 2.6.0 build.ninja's
every edge, with per-step seconds measured or sampled from measured strata, on 1, 16, 64 and 256
build servers, with its critical path. Writes $ARCHWHEEL_CACHE/bench/farm_sim.json.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
CACHE = Path(os.environ.get("ARCHWHEEL_CACHE", ROOT / ".cache"))
MACHINES = (1, 2, 4, 16, 64)
TOLERANCE = 0.20
BUILDS = (
    ("example", "recipes/example.toml", "farm-example.json"),
    ("torch-scatter 2.1.2", "recipes/torch-scatter-2.1.2.toml", "farm-torch-scatter.json"),
)
ARCH = "8.0;9.0;12.0"
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from farm_pytorch import replay as replay_pytorch  # noqa: E402
from farm_pytorch import report as report_pytorch  # noqa: E402

from archwheel.verdicts.compile_jobs import (  # noqa: E402
    calls_from_records,
    measured_span,
    per_arch_graph,
    phases_from_rows,
    whole_call_graph,
)
from archwheel.verdicts.farm_schedule import critical_path, serial_work, simulate  # noqa: E402


def replay(fixture: dict[str, object]) -> dict[str, object]:
    """The figures of one recorded build: the N = 1 check and the predicted wall times."""
    jobs = fixture["jobs"]
    rows = fixture["nvcc_rows"]
    assert isinstance(jobs, list) and isinstance(rows, list)
    calls = calls_from_records(jobs)
    cores = int(str(fixture["cores"]))
    whole = whole_call_graph(calls)
    split = per_arch_graph(calls, phases_from_rows(rows))
    measured = measured_span(calls)
    local = simulate(whole, 1, cores).wall
    timings = fixture.get("timings_s")
    compile_step = float(timings.get("compile", 0.0)) if isinstance(timings, dict) else 0.0
    return {
        "cores": cores,
        "nvcc_calls": sum(1 for c in calls if c.kind == "nvcc"),
        "host_compiles": sum(1 for c in calls if c.kind == "compile"),
        "links": sum(1 for c in calls if c.kind == "link"),
        "per_arch_jobs": len(split),
        "farm_jobs": sum(1 for j in split if j.where == "farm"),
        "measured_compile_wall_s": round(measured, 1),
        "compile_step_s": round(compile_step, 1),
        "simulated_n1_s": round(local, 1),
        "ratio_n1": round(local / measured, 3) if measured else None,
        "serial_work_s": round(serial_work(whole), 1),
        "critical_path_s": {
            "whole_call": round(critical_path(whole), 1),
            "per_arch": round(critical_path(split), 1),
        },
        "predicted_s": {
            str(n): {
                "whole_call": round(simulate(whole, n, cores).wall, 1),
                "per_arch": round(simulate(split, n, cores).wall, 1),
            }
            for n in MACHINES
        },
    }


def report(name: str, fixture: dict[str, object], figures: dict[str, object]) -> bool:
    """Print one build's table; whether its N = 1 check holds."""
    ratio = figures["ratio_n1"]
    ok = isinstance(ratio, float) and abs(ratio - 1) <= TOLERANCE
    print(
        f"{name} ({fixture['arch']}; {figures['nvcc_calls']} nvcc calls, "
        f"{figures['host_compiles']} host compiles, {figures['links']} links; "
        f"{figures['per_arch_jobs']} jobs split per arch, {figures['farm_jobs']} of them for "
        f"a farm); recorded with: {fixture.get('recorded_with', '?')}"
    )
    print(
        f"  check: N=1 on {figures['cores']} cores simulated {figures['simulated_n1_s']} s vs "
        f"measured compile wall {figures['measured_compile_wall_s']} s: ratio {ratio} "
        f"({'within' if ok else 'TARGET MISSED: outside'} {TOLERANCE:.0%}); the compile step took "
        f"{figures['compile_step_s']} s in all (the backend's own work beside the jobs)"
    )
    paths = figures["critical_path_s"]
    assert isinstance(paths, dict)
    print(
        f"  serial work {figures['serial_work_s']} s; critical path whole-call "
        f"{paths['whole_call']} s, per-arch {paths['per_arch']} s"
    )
    print(f"  {'N machines':>10}  {'whole nvcc call':>16}  {'per-arch jobs':>14}  speed-up")
    predicted = figures["predicted_s"]
    assert isinstance(predicted, dict)
    base = predicted["1"]["whole_call"]
    for n, walls in predicted.items():
        print(
            f"  {n:>10}  {walls['whole_call']:>14.1f} s  {walls['per_arch']:>12.1f} s  "
            f"{base / walls['whole_call']:.2f}x / {base / walls['per_arch']:.2f}x"
        )
    return ok


def fresh(folder: Path) -> dict[str, Path]:
    """Record both builds again, for real (Docker; cold, without the compiler cache)."""
    from farm_record import record

    made = {}
    for name, recipe, file in BUILDS:
        out = folder / file
        if record(ROOT / recipe, ARCH, out, []) != 0:
            raise SystemExit(f"the real build of {name} failed")
        made[name] = out
    return made


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="farm-sim-") as tmp:
        paths = fresh(Path(tmp)) if "--fresh" in argv else {n: DATA / f for n, _, f in BUILDS}
        results: dict[str, object] = {}
        worst = 0
        for name, path in paths.items():
            if not path.is_file():
                print(f"{name}: no recorded jobs at {path}; record them with --fresh")
                worst = 1
                continue
            fixture = json.loads(path.read_text())
            figures = replay(fixture)
            results[name] = figures
            if not report(name, fixture, figures):
                worst = 1
        pytorch = replay_pytorch()
        results["pytorch 2.6.0 build graph"] = pytorch
        if not report_pytorch(pytorch):
            worst = 1
    out = CACHE / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "farm_sim.json").write_text(json.dumps(results, indent=2) + "\n")
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
