"""can-load speed: torchvision 0.29.1 against torch 2.14.1, compared with audit on the same two.

Measured in one run, on this machine, each a fresh process (best of ``--repeat N``, default 3;
``--quick`` runs each once):
- baseline: `archwheel audit TORCHVISION TORCH --format json`;
- archwheel: `archwheel can-load TORCHVISION --with TORCH --format json`.

Target (issue 11): can-load <= 2x the audit. Prints the ratio and writes it to
$ARCHWHEEL_CACHE/bench/can_load.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("ARCHWHEEL_CACHE", ROOT / ".cache"))
TARGET = 2.0


def fetch(spec: str) -> Path:
    dest = CACHE / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    name, _, version = spec.partition("==")
    pattern = f"{name}-{version}*.whl"
    found = sorted(dest.glob(pattern))
    if not found:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "-d", str(dest), spec],
            check=True,
        )  # fmt: skip
        found = sorted(dest.glob(pattern))
    return found[-1]


def timed(args: list[str], repeat: int) -> float:
    best = float("inf")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "archwheel.interfaces.cli", *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, check=False,
        )  # fmt: skip
        elapsed = time.perf_counter() - start
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{args[0]} failed ({proc.returncode}): {proc.stderr.decode()[-300:]}")
        best = min(best, elapsed)
    return best


def main(argv: list[str]) -> int:
    repeat = 1 if "--quick" in argv else 3
    torch = fetch("torch==2.14.1")
    vision = fetch("torchvision==0.29.1")
    audit_s = timed(["audit", str(vision), str(torch), "--format", "json"], repeat)
    load_s = timed(["can-load", str(vision), "--with", str(torch), "--format", "json"], repeat)
    ratio = load_s / audit_s
    print(f"audit (baseline) {audit_s:6.2f} s")
    print(f"can-load         {load_s:6.2f} s   {ratio:.2f}x the audit (target <= {TARGET}x)")
    out = CACHE / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "can_load.json").write_text(
        json.dumps({"audit_s": audit_s, "can_load_s": load_s, "ratio": ratio, "target": TARGET})
    )
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
