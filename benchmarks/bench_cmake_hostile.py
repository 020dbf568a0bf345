"""The CMake reader of ``build --plan`` (``wheelbuild.sources.cmake_project``) on hostile CMake
files: its time must grow with its input, no faster.

Each case is a generated ``CMakeLists.txt`` at two sizes, the larger 4x the smaller, read by
``read_cmake_files`` as a plan reads a source's files (the reader's own bound on a file is
1 MiB, so the larger size is 1 MiB). The ratio of the two times is printed per case; a linear
reader takes about 4x (target: at most 6x, room for noise); the quadratic ones it replaced
took 16x and more (an unclosed ``#[[``, ``"`` or ``[[`` tried again at each character, the
line of each word counted from the top of the file, every ``set()`` looking down a stack of
thousands of ``if()``). Each time is the best of three rounds.

Prints the ratios and writes them to ``$ARCHWHEEL_CACHE/bench/cmake_hostile.json``; needs
nothing but this checkout (``nox -s bench -- cmake-hostile``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from archwheel.wheelbuild.sources.cmake_project import read_cmake_files

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("ARCHWHEEL_CACHE", ROOT / ".cache"))
LARGE = 1 << 20  # the reader's bound on one file (source_check.read_build_files)
TARGET_RATIO = 6.0


def _repeat(unit: str) -> Callable[[int], str]:
    return lambda size: (unit * (size // len(unit) + 1))[:size]


def _nested_ifs(size: int) -> str:
    """Half the file opens if() blocks testing the list, half sets it inside them all."""
    half = size // 2
    opens = _repeat("if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)\n")(half)
    sets = _repeat("set(CMAKE_CUDA_ARCHITECTURES 80)\n")(half)
    return opens[: opens.rfind("\n") + 1] + sets


CASES: dict[str, Callable[[int], str]] = {
    "unclosed bracket comments": _repeat("#[[ x\n"),
    "unclosed strings": _repeat('x "'),
    "unclosed bracket arguments": _repeat("f([[ "),
    "words on one line": _repeat("w "),
    "words on many lines": _repeat("w\n"),
    "nested if() and set()": _nested_ifs,
    "a long if() condition": lambda size: (
        "if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES "
        + "A " * (size // 4)
        + ")\n"
        + _repeat("set(CMAKE_CUDA_ARCHITECTURES 80)\n")(size // 2)
        + "endif()\n"
    ),
}


def _seconds(text: str) -> float:
    """Seconds of one read: the best of three rounds, each of as many reads as fill 0.2 s (a
    read of a few milliseconds is timed over many)."""
    files = [("CMakeLists.txt", text)]
    best = float("inf")
    for _ in range(3):
        reads, start = 0, time.perf_counter()
        while reads == 0 or time.perf_counter() - start < 0.2:
            read_cmake_files(files, "cmake", "CMAKE_CUDA_ARCHITECTURES", "80")
            reads += 1
        best = min(best, (time.perf_counter() - start) / reads)
    return best


def main(argv: list[str]) -> int:
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")
    results: dict[str, dict[str, float]] = {}
    worst = 0.0
    for name, make in CASES.items():
        small, large = _seconds(make(LARGE // 4)), _seconds(make(LARGE))
        ratio = large / max(small, 1e-4)
        worst = max(worst, ratio)
        results[name] = {"small_s": round(small, 4), "large_s": round(large, 4), "ratio": ratio}
        print(f"{name}: 256 KiB {small:.3f} s, 1 MiB {large:.3f} s: {ratio:.1f}x", flush=True)
    out = CACHE / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "cmake_hostile.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"worst ratio {worst:.1f}x for 4x the input (target <= {TARGET_RATIO}x)")
    return 0 if worst <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
