"""Run archwheel's benchmarks: `nox -s bench [-- NAME ...] [-- --quick]`.

Each benchmark module ``bench_<name>.py`` defines ``main(argv) -> int``. Every figure is printed
as a ratio against a baseline measured in the same run on the same machine, never compared
with a remembered number. Results are also written to ``$ARCHWHEEL_CACHE/bench/<name>.json``.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def available() -> list[str]:
    return sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))


def main(argv: list[str]) -> int:
    names = [a.replace("-", "_") for a in argv if not a.startswith("-")]  # can-load: can_load
    options = [a for a in argv if a.startswith("-")]
    unknown = [n for n in names if n not in available()]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {available()}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(HERE))
    worst = 0
    for name in names or available():
        print(f"=== bench {name} ===", flush=True)
        module = importlib.import_module(f"bench_{name}")
        worst = max(worst, int(module.main(options)))
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
