"""Build speed of the example recipe: warm compiler cache against cold, and time per arch count.

Measured in one run, on this machine, with `archwheel build --recipe example` in a fresh
process each time (the base and builder images are made first and not counted):

- cold builds of 1, 2 and 3 archs (8.0; 8.0;9.0; 8.0;9.0;12.0), each with its own empty
  compiler-cache volume: total wall time, compile phase, wheel size;
- a warm rebuild of the 2-arch list with the volume its cold build filled.

Target: the warm rebuild at least 3x faster than the cold build. Prints the ratios
and writes them to $ARCHWHEEL_CACHE/bench/build.json. `--quick` measures only the 2-arch cold
and warm builds. Needs a running Docker engine.
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

from archwheel.facts.catalog import load_facts

FACTS = load_facts()

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("ARCHWHEEL_CACHE", ROOT / ".cache"))
CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]
ARCH_LISTS = ("8.0", "8.0;9.0", "8.0;9.0;12.0")
TARGET_WARM_RATIO = 3.0


def prepare_images() -> None:
    """Make the base and builder images now, so no measured build pays for them."""
    from archwheel.effects.engine import ContainerEngine, EngineSettings
    from archwheel.effects.pipconfig import PipSettings
    from archwheel.effects.settings import Settings
    from archwheel.wheelbuild.images.baseimage import ensure_base_image
    from archwheel.wheelbuild.images.builder_image import (
        BuilderImageSpec,
        context_hash,
        ensure_builder_image,
    )
    from archwheel.wheelbuild.recipes.recipe_lookup import find_recipe

    settings = Settings.from_environ(os.environ)
    recipe = find_recipe("example", settings.recipe_dirs(), facts=FACTS)
    engine = ContainerEngine(EngineSettings.create("docker", settings), echo=None)
    base = ensure_base_image(
        engine,
        suite=recipe.toolchain.base_image.split(":", 1)[1],
        mirror=settings.debian_mirror,
    )
    spec = BuilderImageSpec(
        recipe.toolchain.base_image,
        recipe.toolchain,
        recipe.default_python,
        context_hash(settings.docker_dir()),
    )
    ensure_builder_image(
        engine, spec, base.image_id, docker_dir=settings.docker_dir(), pip=PipSettings.from_host()
    )


def build(arch: str, volume: str, out: Path) -> dict[str, float]:
    command = [
        *CLI, "build", "--recipe", "example", "--arch", arch, "--out", str(out),
        "--ccache-volume", volume, "--format", "json", "--quiet",
    ]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"build of {arch} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    result = json.loads(proc.stdout)
    return {
        "wall_s": wall,
        "compile_s": float(result["timings_s"].get("compile", 0.0)),
        "wheel_bytes": float(Path(result["wheel"]).stat().st_size),
        # every sub-phase sccache counts (C/C++, CUDA, CUDA (Device code), PTX, CUBIN)
        "cache_hits": float(result["compiler_cache"].get("local_hits", 0))
        + float(result["compiler_cache"].get("remote_hits", 0)),
        # nvcc calls answered whole, before any sccache step (whole_call.py)
        "whole_call_hits": float(result["compiler_cache"].get("whole_call_hits", 0)),
        "wheel_sha256_prefix": float(int(result["sha256"][:12], 16)) if "sha256" in result else 0.0,
    }


def remove_volume(name: str) -> None:
    subprocess.run(["docker", "volume", "rm", "--force", name], capture_output=True, check=False)


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")
    docker = shutil.which("docker")
    answers = docker is not None and (
        subprocess.run([docker, "info"], capture_output=True, check=False).returncode == 0
    )
    if not answers:
        print(
            "bench build needs a running Docker engine (`docker info` failed); see "
            ".ci/setup-engine.sh",
            file=sys.stderr,
        )
        return 1
    prepare_images()
    volumes: list[str] = []
    passed = False
    results: dict[str, object] = {"load_average": round(os.getloadavg()[0], 2)}
    try:
        with tempfile.TemporaryDirectory(prefix="archwheel-bench-") as tmp:
            cold: dict[str, dict[str, float]] = {}
            for arch in ARCH_LISTS if not quick else ("8.0;9.0",):
                volume = f"archwheel-bench-{uuid.uuid4().hex[:8]}"
                volumes.append(volume)
                cold[arch] = build(arch, volume, Path(tmp) / f"cold-{len(cold)}")
                print(
                    f"cold  {arch:<14} {cold[arch]['wall_s']:7.1f} s total, "
                    f"{cold[arch]['compile_s']:7.1f} s compile, "
                    f"wheel {cold[arch]['wheel_bytes'] / 1024:7.0f} KiB",
                    flush=True,
                )
                if arch == "8.0;9.0":
                    warm = build(arch, volume, Path(tmp) / "warm")
                    print(
                        f"warm  {arch:<14} {warm['wall_s']:7.1f} s total, "
                        f"{warm['compile_s']:7.1f} s compile "
                        f"({warm['whole_call_hits']:.0f} nvcc calls whole, "
                        f"{warm['cache_hits']:.0f} sccache steps hit), wheel "
                        + (
                            "identical"
                            if warm["wheel_sha256_prefix"] == cold[arch]["wheel_sha256_prefix"]
                            else "DIFFERS"
                        ),
                        flush=True,
                    )
            ratio = cold["8.0;9.0"]["wall_s"] / warm["wall_s"]
            passed = ratio >= TARGET_WARM_RATIO
            print(f"warm rebuild is {ratio:.1f}x faster than cold (target >= {TARGET_WARM_RATIO}x)")
            results["cold"] = {k: {m: round(v, 3) for m, v in d.items()} for k, d in cold.items()}
            results["warm_2arch"] = {m: round(v, 3) for m, v in warm.items()}
            results["ratio_cold_over_warm"] = round(ratio, 2)
            if not quick:
                base = cold["8.0"]
                print("archs  total   compile  wheel   (ratios against 1 arch)")
                for arch, row in cold.items():
                    n = arch.count(";") + 1
                    print(
                        f"{n:>5}  {row['wall_s'] / base['wall_s']:5.2f}x  "
                        f"{row['compile_s'] / base['compile_s']:6.2f}x  "
                        f"{row['wheel_bytes'] / base['wheel_bytes']:5.2f}x"
                    )
    finally:
        for volume in volumes:
            remove_volume(volume)
    out = CACHE / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "build.json").write_text(json.dumps(results, indent=2) + "\n")
    if not passed:
        print(f"FAILED: warm rebuild only {results['ratio_cold_over_warm']}x faster")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
