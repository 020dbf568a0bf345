"""can-load speed: torchvision 0.29.1 against torch 2.14.1, compared with the audit of torch.

Measured in one run, on this machine, each a fresh process (best of ``--repeat N``, default 3;
``--quick`` runs each once):
- baseline: `archwheel audit TORCH --format json` (every ELF member of torch inflated);
- archwheel: `archwheel can-load TORCHVISION --with TORCH --format json`.

Target: can-load <= 0.3x the audit of the torch wheel (the first target was 2x the
audit of both wheels; both ratios are printed). Writes them to $ARCHWHEEL_CACHE/bench/can_load.json.
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
TARGET = 0.3


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
    print(f"load average (1/5/15 min): {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
    audit_s = timed(["audit", str(torch), "--format", "json"], repeat)
    both_s = timed(["audit", str(vision), str(torch), "--format", "json"], repeat)
    load_s = timed(["can-load", str(vision), "--with", str(torch), "--format", "json"], repeat)
    ratio = load_s / audit_s
    print(f"audit of torch (baseline)       {audit_s:6.2f} s")
    print(f"audit of torchvision and torch  {both_s:6.2f} s")
    print(f"can-load                        {load_s:6.2f} s   {ratio:.2f}x the audit of torch "
          f"(target <= {TARGET}x), {load_s / both_s:.2f}x the audit of both")  # fmt: skip
    print(f"load average (1/5/15 min): {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
    out = CACHE / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "can_load.json").write_text(
        json.dumps(
            {
                "audit_torch_s": audit_s,
                "audit_both_s": both_s,
                "can_load_s": load_s,
                "ratio": ratio,
                "target": TARGET,
                "load_average": os.getloadavg()[0],
            }
        )
    )
    if ratio > TARGET:
        print(f"TARGET MISSED: can-load / audit of torch = {ratio:.2f} > {TARGET}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
