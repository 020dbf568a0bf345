"""A matrix cold, then the same matrix again on another "machine" with the remote cache warm.

Measured in one run, on this machine, with ``archwheel matrix`` in a fresh
process each time, the base and builder images made first and not counted:

- cold: the example recipe x arch lists ("8.0;9.0", "9.0"), into empty indexes, with an empty
  local compiler-cache volume and an empty Redis server (Debian's redis-server on 127.0.0.1,
  started here) as ``--cache-url``;
- warm: the same matrix into another empty index, another work folder and another empty local
  volume (fresh local state, as a second machine would have), the server as the cold run left it.

Prints the ratio cold / warm wall time (target >= 3x), the compiles served by the server, and
the per-cell overhead outside compilation (the cell's build time minus its compile phase, and
the matrix's own time per cell: plan, audit, publish). Writes $ARCHWHEEL_CACHE/bench/matrix.json.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("ARCHWHEEL_CACHE", ROOT / ".cache"))
CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]
ARCH_LISTS = ("8.0;9.0", "9.0")
TARGET_RATIO = 3.0
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_build import prepare_images, remove_volume  # noqa: E402


def run_matrix(tmp: Path, name: str, volume: str, url: str) -> dict[str, object]:
    """The matrix, one ``archwheel matrix`` per arch list: the example's wheels of two arch
    lists have one file name, and an index refuses a name with other bytes (docs/matrix.md,
    "Arch lists and file names"), so each arch list gets an index of its own."""
    index, work = tmp / f"{name}-index", tmp / f"{name}-work"
    wall = 0.0
    for number, arch in enumerate(ARCH_LISTS):
        command = [
            *CLI, "matrix", "--recipe", "example", "--arch", arch,
            "--index", str(index / str(number)), "--work", str(work / str(number)),
            "--ccache-volume", volume, "--cache-url", url, "--format", "json",
        ]  # fmt: skip
        start = time.monotonic()
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
        wall += time.monotonic() - start
        if proc.returncode != 0:
            raise SystemExit(
                f"{name} matrix {arch} failed (exit {proc.returncode}): {proc.stderr[-3000:]}"
            )
    cells: dict[str, dict[str, float]] = {}
    found = [(root, path) for root in (work, index) for path in root.rglob("*.provenance.json")]
    for root, path in sorted(found):
        document = json.loads(path.read_text())
        timings, cache = document["timings_s"], document["compiler_cache"]
        arch = ARCH_LISTS[int(path.relative_to(root).parts[0])]  # one cell per arch list
        cells[arch] = {
            "total_s": float(timings.get("total", 0.0)),
            "compile_s": float(timings.get("compile", 0.0)),
            "local_hits": float(cache.get("local_hits", 0)),
            "remote_hits": float(cache.get("remote_hits", 0)),
            "misses": float(cache.get("misses", 0)),
        }
    if len(cells) != len(ARCH_LISTS):
        raise SystemExit(f"{name} matrix: {len(cells)} provenance files, not {len(ARCH_LISTS)}")
    rows = list(cells.values())
    compile_s = sum(c["compile_s"] for c in rows)
    build_s = sum(c["total_s"] for c in rows)
    return {
        "wall_s": round(wall, 3),
        "cells": cells,
        "compile_s": round(compile_s, 3),
        "build_outside_compile_per_cell_s": round((build_s - compile_s) / len(rows), 3),
        "matrix_outside_compile_per_cell_s": round((wall - compile_s) / len(rows), 3),
        "remote_hits": int(sum(c["remote_hits"] for c in rows)),
        "compiles": int(sum(c["local_hits"] + c["remote_hits"] + c["misses"] for c in rows)),
    }


def main(argv: list[str]) -> int:
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")
    docker = shutil.which("docker")
    if (
        docker is None
        or subprocess.run([docker, "info"], capture_output=True, check=False).returncode
    ):
        print("bench matrix needs a running Docker engine (`docker info` failed)", file=sys.stderr)
        return 1
    if shutil.which("redis-server") is None:
        print("bench matrix needs redis-server (apt-get install redis-server)", file=sys.stderr)
        return 1
    from tests.support.redis_server import redis_server

    prepare_images()
    volumes = [f"archwheel-bench-matrix-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    results: dict[str, object] = {"load_average": round(os.getloadavg()[0], 2)}
    try:
        with tempfile.TemporaryDirectory(prefix="archwheel-bench-") as folder, redis_server() as r:
            tmp = Path(folder)
            cold = run_matrix(tmp, "cold", volumes[0], r.url)
            warm = run_matrix(tmp, "warm", volumes[1], r.url)
            results.update(cold=cold, warm=warm, server_keys=r.dbsize())
    finally:
        for volume in volumes:
            remove_volume(volume)
    ratio = float(cold["wall_s"]) / float(warm["wall_s"])  # type: ignore[arg-type]
    results["ratio_cold_over_warm"] = round(ratio, 2)
    for name, run in (("cold", cold), ("warm", warm)):
        print(
            f"{name}  {run['wall_s']:7.1f} s for {len(ARCH_LISTS)} cells, "
            f"compile {run['compile_s']:6.1f} s, "
            f"{run['remote_hits']}/{run['compiles']} compiles from the server; outside "
            f"compilation per cell: {run['build_outside_compile_per_cell_s']:.1f} s in the build, "
            f"{run['matrix_outside_compile_per_cell_s']:.1f} s in the matrix",
            flush=True,
        )
    print(f"warm matrix is {ratio:.1f}x faster than cold (target >= {TARGET_RATIO}x)")
    out = CACHE / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "matrix.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0 if ratio >= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
