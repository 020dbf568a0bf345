"""A project of many small extension modules: its compile's core use, built as the project
builds it (setuptools' serial ``build_ext``) and spread by archwheel's hook
(wheelbuild/compile/spread_hook.py) at one module per core.

The project (tests/support/c_extensions.py): ``MODULES`` C extension modules (torch-scatter's
shape: one per operator), each compiling a shared source with its own macro and a generated
source of ``FUNCTIONS`` optimised functions, a few seconds of compile each. Both builds run
here, from clean, one after the other, with this Python's setuptools and C compiler; no
container and no torch, so the figure is the spread's alone. Reported: wall time, the
children's CPU time, CPU / (wall x cores), the compilers (``cc1``) of the build running at
once (sampled every 50 ms: what the build asks of the cores, whatever other jobs take), the
ratio of wall times, the load average before and after, and whether both builds made the same
module bytes. ``--quick``: 3 modules.
Written to $ARCHWHEEL_CACHE/bench/spread.json (docs/maintainers/performance.md, "Many small
extension modules").
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.support.c_extensions import build, write_project  # noqa: E402

CACHE = Path(os.environ.get("ARCHWHEEL_CACHE", ROOT / ".cache"))
MODULES = 6
FUNCTIONS = 300


def main(argv: list[str]) -> int:
    modules = 3 if "--quick" in argv else MODULES
    cores = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="bench-spread-") as tmp:
        root = Path(tmp) / "project"
        write_project(root, modules, FUNCTIONS)
        load_before = os.getloadavg()
        serial = build(root, None, 1)
        spread = build(root, Path(tmp) / "hook", cores)
        load_after = os.getloadavg()
    same = serial.modules == spread.modules
    result = {
        "modules": modules,
        "functions_per_module": FUNCTIONS,
        "cores": cores,
        "serial": {"wall_s": round(serial.wall, 2), "cpu_s": round(serial.cpu, 2),
                   "busy": round(serial.busy(cores), 2),
                   "compiles_at_once_mean": round(serial.compiles_mean, 2),
                   "compiles_at_once_most": serial.compiles_most},
        "spread": {"wall_s": round(spread.wall, 2), "cpu_s": round(spread.cpu, 2),
                   "busy": round(spread.busy(cores), 2),
                   "compiles_at_once_mean": round(spread.compiles_mean, 2),
                   "compiles_at_once_most": spread.compiles_most},
        "wall_ratio": round(spread.wall / serial.wall, 2),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in load_after],
        "same_module_bytes": same,
    }  # fmt: skip
    print(json.dumps(result, indent=2), flush=True)
    out = CACHE / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "spread.json").write_text(json.dumps(result, indent=2) + "\n")
    if not same:
        print("WRONG RESULT: the spread build made other module bytes", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
