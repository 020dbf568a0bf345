"""A setuptools project of several small C extension modules (one per operator, as
torch-scatter has), built with archwheel's spread hook or without it: for the spread's tests and
``nox -s bench -- spread``.

Each module compiles a shared ``src/shared.c`` with its own ``MODULE`` macro (the shape of the
``build_ext --parallel`` race) and a generated source of its own that takes the compiler a
while. Real setuptools (this Python's), a real C compiler.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from archwheel.wheelbuild.compile.parallel import write_spread_hook

SHARED_C = r"""#include <Python.h>
#define STR2(x) #x
#define STR(x) STR2(x)
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
double CAT(work_, MODULE)(double x);
static PyObject *name(PyObject *self, PyObject *args) { return PyUnicode_FromString(STR(MODULE)); }
static PyObject *work(PyObject *self, PyObject *args) {
    return PyFloat_FromDouble(CAT(work_, MODULE)(1.5));
}
static PyMethodDef methods[] = {{"name", name, METH_NOARGS, NULL},
    {"work", work, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, STR(MODULE), NULL, -1, methods};
PyMODINIT_FUNC CAT(PyInit_, MODULE)(void) { return PyModule_Create(&def); }
"""


def generated(stem: str, count: int) -> str:
    """C that takes the compiler a while: ``count`` small optimised functions and their sum."""
    body = "".join(
        f"static double {stem}_f{i}(double x) {{ double s = 0; for (int k = 0; k < {i % 7 + 3}; "
        f"k++) s += x * k / (k + {i}.5); return s * {i}; }}\n"
        for i in range(count)
    )
    total = " + ".join(f"{stem}_f{i}(x)" for i in range(count))
    return body + f"double work_{stem}(double x) {{ return {total}; }}\n"


def write_project(root: Path, modules: int, functions: int) -> list[str]:
    """``modules`` extension modules ``op0``... under ``root``; their names."""
    names = [f"op{i}" for i in range(modules)]
    (root / "src").mkdir(parents=True)
    (root / "src" / "shared.c").write_text(SHARED_C)
    for name in names:
        (root / "src" / f"{name}.c").write_text(generated(name, functions))
    extensions = ",\n".join(
        f'        Extension("{n}", ["src/shared.c", "src/{n}.c"], '
        f'define_macros=[("MODULE", "{n}")], extra_compile_args=["-O2"])'
        for n in names
    )
    (root / "setup.py").write_text(
        "from setuptools import Extension, setup\n\n"
        f'setup(\n    name="many-ops",\n    version="0",\n    ext_modules=[\n{extensions},\n'
        "    ],\n)\n"
    )
    return names


@dataclass(frozen=True)
class Built:
    """One ``setup.py build_ext`` from clean: its wall and CPU seconds, its output, the
    modules it made (name -> bytes), and the compiler processes (``cc1``) of the build found
    running at once, sampled every 50 ms (mean over the samples and most)."""

    wall: float
    cpu: float  # the children's user + system time
    log: str
    modules: dict[str, bytes]
    compiles_mean: float = 0.0
    compiles_most: int = 0

    def busy(self, cores: int) -> float:
        """CPU time / (wall time x cores)."""
        return self.cpu / (self.wall * cores)


def build(root: Path, hook: Path | None, jobs: int) -> Built:
    """``setup.py build_ext`` from clean, through the spread hook in ``hook`` (written there)
    at ``jobs`` modules at once, or without it (``hook`` None)."""
    shutil.rmtree(root / "build", ignore_errors=True)
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1700000000"}
    env.pop("PYTHONPATH", None)
    if hook is not None:
        write_spread_hook(hook)
        env |= {"PYTHONPATH": str(hook), "ARCHWHEEL_SPREAD_EXTENSIONS": str(jobs)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    samples: list[int] = []
    with subprocess.Popen(
        [sys.executable, "setup.py", "build_ext"],
        cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    ) as proc:  # fmt: skip
        stop = threading.Event()
        sampler = threading.Thread(target=_sample, args=(proc.pid, samples, stop), daemon=True)
        sampler.start()
        log, _ = proc.communicate(timeout=900)
        stop.set()
        sampler.join()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise AssertionError(log[-4000:])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    (lib,) = (root / "build").glob("lib.*")
    modules = {p.name: p.read_bytes() for p in sorted(lib.glob("*.so"))}
    busy = [n for n in samples if n] or [0]
    return Built(wall, cpu, log, modules, sum(busy) / len(busy), max(samples, default=0))


def _sample(root: int, samples: list[int], stop: threading.Event) -> None:
    """Every 50 ms: how many ``cc1`` processes descend from ``root``."""
    while not stop.wait(0.05):
        parents: dict[int, int] = {}
        names: dict[int, str] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
            names[int(entry.name)] = name
        count = 0
        for pid, name in names.items():
            if name != "cc1":
                continue
            seen, walk = 0, pid
            while walk in parents and walk != root and seen < 64:
                walk, seen = parents[walk], seen + 1
            count += walk == root
        samples.append(count)


def import_names(root: Path) -> dict[str, str]:
    """Each built module's ``name()``, imported in a fresh interpreter."""
    (lib,) = (root / "build").glob("lib.*")
    code = (
        "import importlib, sys\n"
        "for n in sys.argv[1:]: print(n, importlib.import_module(n).name())\n"
    )
    names = [p.name.split(".")[0] for p in sorted(lib.glob("*.so"))]
    ran = subprocess.run(
        [sys.executable, "-c", code, *names], cwd=lib, capture_output=True, text=True, check=True
    )
    return dict(line.split(" ", 1) for line in ran.stdout.splitlines())
