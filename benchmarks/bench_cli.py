"""How fast the command line answers what it can answer without doing work.

Measured in one run, on this machine, each a fresh process, the median of ``REPEAT`` runs
(``--quick``: 3) of

- the floor: ``python -c pass`` (the interpreter's own start);
- ``archwheel --version``, ``archwheel --help``, ``archwheel audit --help`` and a usage error
  (``archwheel audit --format nope``, refused by the parser, exit 2).

archwheel runs as ``python -m archwheel.interfaces.cli`` with this checkout's ``src`` first on
the path (as the other benchmarks run it). Target: each command <= 150 ms wall; prints each
median, its ratio to the floor and the load average, and writes them to
$ARCHWHEEL_CACHE/bench/cli.json (docs/maintainers/performance.md, "Command-line start").
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("ARCHWHEEL_CACHE", ROOT / ".cache"))
TARGET_S = 0.150
REPEAT = 10
CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]

# name -> (argv, the exit codes it answers with)
CASES: dict[str, tuple[list[str], tuple[int, ...]]] = {
    "python -c pass": ([sys.executable, "-c", "pass"], (0,)),
    "archwheel --version": ([*CLI, "--version"], (0,)),
    "archwheel --help": ([*CLI, "--help"], (0,)),
    "archwheel audit --help": ([*CLI, "audit", "--help"], (0,)),
    "archwheel audit --format nope": ([*CLI, "audit", "--format", "nope"], (2,)),
}


def median_of(argv: list[str], codes: tuple[int, ...], repeat: int) -> float:
    """The median wall time of ``repeat`` runs of ``argv`` (after one untimed run)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    times = []
    for i in range(repeat + 1):
        start = time.perf_counter()
        proc = subprocess.run(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, check=False
        )
        elapsed = time.perf_counter() - start
        if proc.returncode not in codes:
            raise SystemExit(f"{argv[-1]} exited {proc.returncode}: {proc.stderr.decode()[-300:]}")
        if i:  # the first run warms the file cache
            times.append(elapsed)
    return statistics.median(times)


def main(argv: list[str]) -> int:
    repeat = 3 if "--quick" in argv else REPEAT
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; median of {repeat} runs")
    results = {name: median_of(args, codes, repeat) for name, (args, codes) in CASES.items()}
    floor = results["python -c pass"]
    worst = 0.0
    for name, seconds in results.items():
        ratio = seconds / floor
        mark = "" if name == "python -c pass" else f"   (target <= {TARGET_S * 1000:.0f} ms)"
        print(f"{name:32} {seconds * 1000:7.1f} ms  {ratio:5.2f}x python -c pass{mark}")
        if name != "python -c pass":
            worst = max(worst, seconds)
    out = CACHE / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "cli.json").write_text(
        json.dumps(
            {"median_s": results, "floor_s": floor, "target_s": TARGET_S, "load": load},
            indent=2,
        )
    )
    return 0 if worst <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
