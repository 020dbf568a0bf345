"""Run archwheel's benchmarks: `nox -s bench [-- NAME ...] [-- --quick]`.

Each benchmark module ``bench_<name>.py`` defines ``main(argv) -> int``. Every figure is printed
as a ratio against a baseline measured in the same run on the same machine, never compared
with a remembered number. Results are also written to ``$ARCHWHEEL_CACHE/bench/<name>.json``.
"""

from __future__ import annotations

import compileall
import importlib
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def available() -> list[str]:
    return sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))


def compile_bytecode() -> None:
    """Compile archwheel's modules to bytecode, as ``pip install`` does for an installed wheel.

    The benchmarks run the editable install of this checkout; where ``PYTHONDONTWRITEBYTECODE``
    is set (this project's machines set it), nothing would ever write the ``.pyc`` files and
    every fresh process would compile about 50 modules from source: 0.05-0.1 s of each
    command's start that no installed copy pays."""
    spec = importlib.util.find_spec("archwheel")
    if spec is None or not spec.submodule_search_locations:
        return
    for folder in spec.submodule_search_locations:
        compileall.compile_dir(folder, quiet=1)
    print("archwheel's modules compiled to bytecode (as pip install does)", flush=True)


def main(argv: list[str]) -> int:
    names = [a.replace("-", "_") for a in argv if not a.startswith("-")]  # can-load: can_load
    options = [a for a in argv if a.startswith("-")]
    unknown = [n for n in names if n not in available()]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {available()}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(HERE))
    compile_bytecode()
    worst = 0
    for name in names or available():
        print(f"=== bench {name} ===", flush=True)
        module = importlib.import_module(f"bench_{name}")
        worst = max(worst, int(module.main(options)))
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
