"""An arch added to a matrix published as wheel variants: the run that adds it against the first.

Measured in one run, on this machine, with ``archwheel matrix`` in a fresh process each time,
the base and builder images made first and not counted, and the compiler cache off for every
run (``--no-cache``: each cell compiles everything, so no run is helped by what another run
or another cell left in a cache):

- example: ``matrix --recipe example --python 3.11 --variants --arch 8.0 --arch 9.0`` into an
  empty index (the baseline: two cells built), then the same with ``--arch 12.0`` added into
  that index (one cell built, the two published ones reused). Target: the second run's wall
  time <= 0.75x the first's. Before the second run its plan is read (``--plan --format json``,
  not timed) and must say ``skip`` for the two published cells; after it the result must say
  ``skipped`` for them, and the index's manifest must list their wheels as kept and the new
  one's as added.
- torch-scatter 2.1.2 (unless ``--quick``): the fat ``8.0;9.0;12.0`` cell into a plain index
  (the baseline) against the one-arch ``12.0`` cell that replaces it into a variants index.
  Reported, no target (a fat build compiles three archs in one nvcc call per file, several
  archs at once: ``--threads``).

Prints the ratios and writes them to ``$ARCHWHEEL_CACHE/bench/arch_add.json``. Needs a running
Docker engine; torch-scatter also its sdist and torch 2.14.1 on the index pip is configured with.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("ARCHWHEEL_CACHE", ROOT / ".cache"))
CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]
TARGET_RATIO = 0.75
SCATTER = "torch-scatter-2.1.2"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_build import prepare_images  # noqa: E402


def _archs(archs: tuple[str, ...]) -> list[str]:
    return [a for arch in archs for a in ("--arch", arch)]


def matrix(
    recipe: str, archs: tuple[str, ...], index: Path, work: Path, *extra: str
) -> tuple[float, dict[str, Any]]:
    """One ``archwheel matrix`` without the compiler cache: its wall time and its result."""
    command = [
        *CLI, "matrix", "--recipe", recipe, "--python", "3.11", *_archs(archs),
        "--index", str(index), "--work", str(work), "--no-cache", "--format", "json", *extra,
    ]  # fmt: skip
    load = os.getloadavg()[0]
    start = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(
            f"matrix {recipe} {archs} failed (exit {proc.returncode}): {proc.stderr[-3000:]}"
        )
    result: dict[str, Any] = json.loads(proc.stdout)
    # The 1-minute load average before and after: other jobs on the machine move both runs.
    result["load_average"] = [round(load, 2), round(os.getloadavg()[0], 2)]
    return wall, result


def plan(recipe: str, archs: tuple[str, ...], index: Path) -> dict[str, Any]:
    command = [
        *CLI, "matrix", "--recipe", recipe, "--python", "3.11", *_archs(archs),
        "--index", str(index), "--variants", "--plan", "--format", "json",
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, check=True)
    document: dict[str, Any] = json.loads(proc.stdout)
    return document


def compile_seconds(work: Path) -> dict[str, float]:
    """Each built cell's compile phase, from the provenance its build wrote (by arch list)."""
    out: dict[str, float] = {}
    for path in sorted(work.rglob("*.provenance.json")):
        document = json.loads(path.read_text())
        arch = str(document["arch"]["requested"])
        out[arch] = round(float(document["timings_s"].get("compile", 0.0)), 1)
    return out


def manifest_publish(index: Path) -> dict[str, Any]:
    """The last publish of the index's current tree, as its manifest records it."""
    document = json.loads((index / "current" / "index.json").read_text())
    record: dict[str, Any] = document.get("publish") or {}
    return record


def example(tmp: Path) -> tuple[dict[str, Any], list[str]]:
    """The example: two cells, then a third arch added. Returns the figures and what is wrong."""
    index = tmp / "example-index"
    first_archs, second_archs = ("8.0", "9.0"), ("8.0", "9.0", "12.0")
    first_wall, first = matrix("example", first_archs, index, tmp / "w1", "--variants")
    print(f"example  first  {first_archs}: {first_wall:7.1f} s, load {first['load_average']}")
    planned = plan("example", second_archs, index)
    second_wall, second = matrix("example", second_archs, index, tmp / "w2", "--variants")
    print(f"example  second {second_archs}: {second_wall:7.1f} s, load {second['load_average']}")
    actions = {c["arch"]: c["action"] for c in planned["cells"]}
    verdicts = {c["arch"]: c["verdict"] for c in second["cells"]}
    record = manifest_publish(index)
    wrong = []
    if actions != {"8.0": "skip", "9.0": "skip", "12.0": "build"}:
        wrong.append(f"the plan of the added arch is {actions}")
    if verdicts != {"8.0": "skipped", "9.0": "skipped", "12.0": "published"}:
        wrong.append(f"the run of the added arch gave {verdicts}")
    if len(record.get("added", [])) != 1 or len(record.get("kept", [])) != 2:
        wrong.append(f"the index's manifest records the last publish as {record}")
    ratio = second_wall / first_wall
    figures = {
        "first": {"archs": list(first_archs), "wall_s": round(first_wall, 2),
                  "load_average": first["load_average"],
                  "compile_s": compile_seconds(tmp / "w1"),
                  "verdicts": {c["arch"]: c["verdict"] for c in first["cells"]}},
        "second": {"archs": list(second_archs), "wall_s": round(second_wall, 2),
                   "load_average": second["load_average"],
                   "compile_s": compile_seconds(tmp / "w2"), "plan": actions,
                   "verdicts": verdicts, "manifest_publish": record},
        "ratio_second_over_first": round(ratio, 3),
    }  # fmt: skip
    return figures, wrong


def scatter(tmp: Path) -> dict[str, Any]:
    """torch-scatter: the fat three-arch cell against the one-arch cell that replaces it."""
    fat_wall, fat = matrix(SCATTER, ("8.0;9.0;12.0",), tmp / "fat-index", tmp / "fat")
    print(f"{SCATTER} fat 8.0;9.0;12.0: {fat_wall:7.1f} s", flush=True)
    one_wall, one = matrix(SCATTER, ("12.0",), tmp / "one-index", tmp / "one", "--variants")
    print(f"{SCATTER} one cell 12.0:    {one_wall:7.1f} s", flush=True)
    return {
        "fat": {
            "wall_s": round(fat_wall, 2),
            "compile_s": compile_seconds(tmp / "fat"),
            "load_average": fat["load_average"],
        },
        "one": {
            "wall_s": round(one_wall, 2),
            "compile_s": compile_seconds(tmp / "one"),
            "load_average": one["load_average"],
        },
        "ratio_one_over_fat": round(one_wall / fat_wall, 3),
    }


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")
    docker = shutil.which("docker")
    if (
        docker is None
        or subprocess.run([docker, "info"], capture_output=True, check=False).returncode
    ):
        print("bench arch-add needs a running Docker engine (docker info failed)", file=sys.stderr)
        return 1
    prepare_images()
    results: dict[str, Any] = {"load_average": round(os.getloadavg()[0], 2), "cache": "off"}
    out = CACHE / "bench"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="archwheel-bench-") as folder:
        figures, wrong = example(Path(folder))
        results["example"] = figures
        (out / "arch_add.json").write_text(json.dumps(results, indent=2) + "\n")
        ratio = figures["ratio_second_over_first"]
        print(
            f"example: adding 12.0 took {ratio:.2f}x the two-cell run "
            f"(target <= {TARGET_RATIO}x); plan {figures['second']['plan']}",
            flush=True,
        )
        if not quick:
            results["torch_scatter"] = scatter(Path(folder))
            print(
                f"{SCATTER}: the 12.0 cell took "
                f"{results['torch_scatter']['ratio_one_over_fat']:.2f}x the fat build",
                flush=True,
            )
    results["load_average_end"] = round(os.getloadavg()[0], 2)
    (out / "arch_add.json").write_text(json.dumps(results, indent=2) + "\n")
    for line in wrong:
        print(f"WRONG RESULT: {line}")
    if ratio > TARGET_RATIO:
        print(f"TARGET MISSED: {ratio:.2f}x > {TARGET_RATIO}x")
    return 1 if wrong or ratio > TARGET_RATIO else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
