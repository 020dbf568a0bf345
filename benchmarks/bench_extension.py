"""Torch-extension build speed: what everything but compiling costs, and how busy the cores are.

Measured in one run with ``archwheel build --recipe torch-scatter-2.1.2 --arch 9.0`` (issue 9,
item 5), in a fresh process each time:

1. a warm-up build makes the base, builder and torch images (not counted);
2. a cold one-arch build against the cached torch: its own empty compiler-cache volume, so
   every object is compiled. Reported: the total wall time, the compile phase, and everything
   else (images, requirements, toolkit, packaging, audit) as a share of the total
   (target <= 20%);
3. the compile phase's CPU use: the build command ends with bash's ``times`` (CPU time of the
   command and everything it waited for), divided by (compile wall time x cores)
   (target >= 0.8).

Prints the figures and writes them to ``$ARCHWHEEL_CACHE/bench/extension.json``. ``--quick``
skips the warm-up build (the images must exist). Needs a running Docker engine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("ARCHWHEEL_CACHE", ROOT / ".cache"))
CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]
RECIPE = "torch-scatter-2.1.2"
ARCH = "9.0"
TARGET_OVERHEAD = 0.20
TARGET_BUSY = 0.8
_TIMES = re.compile(r"^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$")


def timed_recipe(folder: Path) -> Path:
    """The shipped recipe with ``times`` at the end of its build command."""
    text = (ROOT / "recipes" / f"{RECIPE}.toml").read_text()
    marker = '--wheel-dir "$ARCHWHEEL_DIST" .\n'
    assert marker in text, "the recipe's command changed; update the benchmark"
    text = text.replace(marker, marker + 'echo "archwheel-bench: times"\ntimes\n')
    path = folder / f"{RECIPE}.toml"
    path.write_text(text)
    return path


def build(recipe: Path, out: Path, volume: str) -> dict[str, object]:
    command = [
        *CLI, "build", "--recipe", str(recipe), "--arch", ARCH, "--out", str(out),
        "--ccache-volume", volume, "--format", "json", "--quiet",
    ]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"build failed (exit {proc.returncode}): {proc.stderr[-3000:]}")
    result: dict[str, object] = json.loads(proc.stdout)
    result["wall_s"] = wall
    return result


def cpu_seconds(log: Path) -> float:
    """The children's user + system time from bash's ``times`` in the build log."""
    lines = log.read_text().splitlines()
    start = max(i for i, line in enumerate(lines) if "archwheel-bench: times" in line)
    found = [m for line in lines[start + 1 : start + 3] if (m := _TIMES.match(line.strip()))]
    if len(found) != 2:
        raise SystemExit(f"no `times` output in {log}")
    children = found[1]
    return (
        60 * int(children.group(1))
        + float(children.group(2))
        + 60 * int(children.group(3))
        + float(children.group(4))
    )


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="archwheel-bench-ext-") as tmp:
        folder = Path(tmp)
        recipe = timed_recipe(folder)
        if not quick:
            warm_volume = f"archwheel-bench-{uuid.uuid4().hex[:8]}"
            try:
                first = build(recipe, folder / "warmup", warm_volume)
                print(f"warm-up (images made as needed): {first['wall_s']:.1f} s", flush=True)
            finally:
                subprocess.run(
                    ["docker", "volume", "rm", "-f", warm_volume], capture_output=True, check=False
                )
        volume = f"archwheel-bench-{uuid.uuid4().hex[:8]}"
        try:
            cold = build(recipe, folder / "cold", volume)
        finally:
            subprocess.run(
                ["docker", "volume", "rm", "-f", volume], capture_output=True, check=False
            )
        timings = dict(cold["timings_s"])  # type: ignore[call-overload]
        total = float(timings["total"])
        compile_s = float(timings.get("compile", 0.0))
        overhead = total - compile_s
        busy = cpu_seconds(Path(str(cold["log"]))) / (compile_s * cores)
        figures = {
            "recipe": RECIPE,
            "arch": ARCH,
            "cores": cores,
            "cold_total_s": round(total, 1),
            "cold_wall_s": round(float(cold["wall_s"]), 1),  # type: ignore[arg-type]
            "compile_s": round(compile_s, 1),
            "not_compiling_s": round(overhead, 1),
            "not_compiling_share": round(overhead / total, 3),
            "compile_cpu_busy": round(busy, 2),
            "timings_s": timings,
            # C++ objects go through ccache too: misses well above the CUDA files' count.
            "compiler_cache": cold.get("compiler_cache"),
        }
    print(
        f"cold one-arch build against the cached torch: {total:.1f} s, compile {compile_s:.1f} s; "
        f"everything else {overhead:.1f} s = {overhead / total:.1%} of it "
        f"(target <= {TARGET_OVERHEAD:.0%})"
    )
    print(f"compile phase CPU time / (wall x {cores} cores) = {busy:.2f} (target >= {TARGET_BUSY})")
    print(f"phases: {json.dumps(timings)}")
    print(f"compiler cache of the cold build: {json.dumps(cold.get('compiler_cache'))}")
    out = CACHE / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "extension.json").write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if overhead / total <= TARGET_OVERHEAD and busy >= TARGET_BUSY else 1
