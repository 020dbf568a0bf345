"""can-load across torch releases: torchvision 0.29.1 against three CUDA torch releases read from
the package index pip is configured with, against can-load of one local torch wheel.

Measured in one run, on this machine, each a fresh process:
- baseline: `archwheel can-load TORCHVISION --with TORCH-2.14.1.whl` (the wheel on disk);
- cold: `archwheel can-load TORCHVISION --torch 2.13.0,2.14.1,2.15.0` with an empty cache folder
  (every torch read over the network by range requests);
- warm: the same again (the loader's views of the three torches kept by the cold run).

Printed: the bytes read from the network against the three wheels' size (the first target was
<= 5%: unreachable for torch's own libraries, whose tables patchelf moved to their end:
docs/verdicts.md, "Across torch releases"), and the time per torch against the baseline.
Needs the network (the index); writes $ARCHWHEEL_CACHE/bench/can_load_range.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_can_load import fetch

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("ARCHWHEEL_CACHE", ROOT / ".cache"))
RELEASES = "2.13.0,2.14.1,2.15.0"


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "archwheel.interfaces.cli", *argv, "--format", "json"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-500:]}")
    return seconds, json.loads(proc.stdout)


def main(options: list[str]) -> int:
    vision = fetch("torchvision==0.29.1")
    torch = fetch("torch==2.14.1")
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="archwheel-bench-range-") as scratch:
        env = {**os.environ, "ARCHWHEEL_CACHE": scratch}
        base, _ = _run(["can-load", str(vision), "--with", str(torch)], env)
        cold, first = _run(["can-load", str(vision), "--torch", RELEASES], env)
        warm, second = _run(["can-load", str(vision), "--torch", RELEASES], env)
    count = len(first["torches"])
    fetched, total = int(first["bytes_fetched"]), int(first["bytes_of_wheels"])
    share = fetched / total if total else 0.0
    print(f"load average at the start: {load:.2f}")
    print(f"baseline, can-load --with one local torch: {base:.2f} s")
    print(
        f"cold, {count} torches from the index: {cold:.1f} s ({cold / count / base:.1f}x the "
        f"baseline per torch), {fetched >> 20} of {total >> 20} MiB read ({100 * share:.1f}%)"
    )
    print(
        f"warm, the same again: {warm:.2f} s ({warm / count / base:.2f}x the baseline per torch), "
        f"{int(second['bytes_fetched']) >> 20} MiB read"
    )
    print("verdicts: " + ", ".join(f"{t['version']} {t['verdict']}" for t in first["torches"]))
    out = CACHE / "bench"
    out.mkdir(parents=True, exist_ok=True)
    figures = {
        "load": load, "baseline_s": base, "cold_s": cold, "warm_s": warm,
        "bytes_fetched": fetched, "bytes_of_wheels": total, "share": share,
    }  # fmt: skip
    (out / "can_load_range.json").write_text(json.dumps(figures, indent=2) + "\n")
    return 0
