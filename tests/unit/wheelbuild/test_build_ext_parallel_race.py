"""setuptools' ``build_ext --parallel`` against a project whose modules compile the same source:
the race that keeps archwheel from turning it on by default (wheelbuild/compile/parallel.py),
and archwheel's own spread of the modules (wheelbuild/compile/spread_hook.py), which builds the
same project two modules at a time with each module's own objects, ten times out of ten.

The project is torch-scatter's shape in plain C (no torch, no nvcc): two modules, ``alpha`` and
``beta``, both compile ``src/common.c``, with a different ``FLAVOR`` and ``MODULE`` each (as
torch-scatter's ``_segment_coo_cpu`` and ``_segment_coo_cuda`` compile ``csrc/segment_coo.cpp``,
``-DWITH_CUDA`` in one, its ``PyInit_`` chosen by the macro). distutils names each object from
its source's path under the one ``build_temp``, so both write ``build/temp.../src/common.o``.

Timing is made by real compiles, not sleeps: ``alpha`` first compiles a modest ``a_first.c``
and then ``common.c``; ``beta`` compiles ``common.c`` at once and then a large ``z_last.c``
(distutils sorts each module's sources). Two at a time, ``alpha`` rewrites ``common.o`` while
``beta`` is still busy with ``z_last.c``, and ``beta`` links ``alpha``'s object: it has no
``PyInit_beta``. One at a time, each module links its own.

Real setuptools (the one this Python has), a real C compiler, real imports of the modules.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from archwheel.wheelbuild.compile.jobs import GIB, HostResources, choose_jobs
from archwheel.wheelbuild.compile.parallel import (
    SPREAD_DIR,
    ParallelSwitches,
    choose_parallel,
    ninja_off_in,
    write_spread_hook,
)
from tests.support.components import require

CC = (sysconfig.get_config_var("CC") or "cc").split()[0]  # what distutils compiles with

pytestmark = [pytest.mark.slow]

COMMON_C = r"""/* Compiled into both modules, with a different FLAVOR and MODULE each. */
#include <Python.h>
#define STR2(x) #x
#define STR(x) STR2(x)
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
static PyObject *flavor(PyObject *self, PyObject *args) { return PyUnicode_FromString(STR(FLAVOR)); }
static PyMethodDef methods[] = {{"flavor", flavor, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, STR(MODULE), NULL, -1, methods};
PyMODINIT_FUNC CAT(PyInit_, MODULE)(void) { return PyModule_Create(&def); }
"""

SETUP_PY = textwrap.dedent(
    """\
    from setuptools import Extension, setup
    from setuptools.command.build_ext import build_ext


    class BuildExt(build_ext):
        use_ninja = False  # the literal archwheel reads, as in torch-scatter's setup.py


    setup(
        name="race-demo",
        version="0",
        ext_modules=[
            Extension("alpha", ["src/a_first.c", "src/common.c"],
                      define_macros=[("FLAVOR", "1"), ("MODULE", "alpha")]),
            Extension("beta", ["src/common.c", "src/z_last.c"],
                      define_macros=[("FLAVOR", "2"), ("MODULE", "beta")]),
        ],
        cmdclass={"build_ext": BuildExt},
    )
    """
)

CHECK = """\
import alpha
print("alpha", alpha.flavor())
try:
    import beta
    print("beta", beta.flavor())
except ImportError as e:
    print("beta", e)
"""


def functions(stem: str, count: int) -> str:
    """C source that takes the compiler a while: ``count`` small optimised functions."""
    return "".join(
        f"double {stem}_f{i}(double x) {{ double s = 0; for (int k = 0; k < {i % 7 + 3}; k++) "
        f"s += x * k / (k + {i}.5); return s * {i}; }}\n"
        for i in range(count)
    )


def project(root: Path) -> Path:
    require(shutil.which(CC) is not None, f"no C compiler ({CC}): the race is between compiles")
    require(
        (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file(),
        "no Python.h for this Python: the modules cannot be compiled",
    )
    (root / "src").mkdir(parents=True)
    (root / "setup.py").write_text(SETUP_PY)
    (root / "src" / "common.c").write_text(COMMON_C)
    (root / "src" / "a_first.c").write_text(functions("a_first", 200))
    (root / "src" / "z_last.c").write_text(functions("z_last", 700))
    return root


def build(root: Path, env: dict[str, str]) -> dict[str, str]:
    """``setup.py build_ext`` with ``env`` added; each module's answer (its flavor, or why
    it did not import)."""
    return answers(build_log(root, env), root)


def build_log(root: Path, env: dict[str, str]) -> str:
    """``setup.py build_ext`` from clean with ``env`` added; its output."""
    shutil.rmtree(root / "build", ignore_errors=True)
    done = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext"],
        cwd=root,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def answers(log: str, root: Path) -> dict[str, str]:
    """Each built module's answer: its flavor, or why it did not import."""
    (lib,) = (root / "build").glob("lib.*")
    ran = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=lib, capture_output=True, text=True, check=True
    )
    return dict(line.split(" ", 1) for line in ran.stdout.splitlines())


def test_build_ext_parallel_links_the_other_modules_object(tmp_path: Path) -> None:
    """The race is real: with ``parallel = 2`` (archwheel's DIST_EXTRA_CONFIG mechanism),
    ``beta`` links ``alpha``'s ``common.o``. Should setuptools ever give modules objects of
    their own, this fails, and wheelbuild/compile/parallel.py's rule can be revisited."""
    root = project(tmp_path / "demo")
    config = tmp_path / "parallel.cfg"
    config.write_text("[build_ext]\nparallel = 2\n")
    tries = [build(root, {"DIST_EXTRA_CONFIG": str(config)}) for _ in range(2)]
    assert all(got["alpha"] == "1" for got in tries), tries
    assert any("PyInit_beta" in got["beta"] for got in tries), tries


def test_archwheels_plan_builds_each_module_from_its_own_objects(tmp_path: Path) -> None:
    """The environment archwheel's plan gives this project's compile step (it turns ninja off,
    two jobs): each module links its own objects."""
    root = project(tmp_path / "demo")
    two_jobs = choose_jobs(HostResources(cpus=2, memory_bytes=20 * GIB), 2.0)
    ninja_off = ninja_off_in([("setup.py", SETUP_PY)])
    assert ninja_off == ("setup.py:6",)
    plan = choose_parallel(ParallelSwitches(), two_jobs, archs=1, ninja_off=ninja_off)
    assert plan.spread == 2 and not plan.build_ext
    env = hooked(dict(plan.env), tmp_path)
    if plan.config:  # what workfolder.py writes where the plan turns build_ext --parallel on
        config = tmp_path / "parallel.cfg"
        config.write_text(plan.config)
        env["DIST_EXTRA_CONFIG"] = str(config)
    assert build(root, env) == {"alpha": "1", "beta": "2"}


def hooked(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The plan's environment with its hook folder written where the host can see it (the
    container's ``SPREAD_DIR``, as workfolder.py writes it, under ``tmp_path``)."""
    folder = tmp_path / "spread"
    write_spread_hook(folder)
    assert env["PYTHONPATH"] == SPREAD_DIR
    return {**env, "PYTHONPATH": str(folder)}


def test_the_spread_builds_each_module_from_its_own_objects_ten_times_of_ten(
    tmp_path: Path,
) -> None:
    """The same project, two modules at once in archwheel's spread: each links its own
    ``common.o`` (built in its own folder) in every one of ten builds; the hook says it built
    them two at a time (the timing that makes setuptools' ``--parallel`` link the other
    module's object)."""
    root = project(tmp_path / "demo")
    two_jobs = choose_jobs(HostResources(cpus=2, memory_bytes=20 * GIB), 2.0)
    plan = choose_parallel(ParallelSwitches(), two_jobs, archs=1, ninja_off=("setup.py:6",))
    env = hooked(dict(plan.env), tmp_path)
    runs = []
    for _ in range(10):
        log = build_log(root, env)
        assert "2 extension module(s), 2 at a time" in log, log
        runs.append(answers(log, root))
        temp = next((root / "build").glob("temp.*"))
        objects = sorted(p.relative_to(temp).as_posix() for p in temp.rglob("common.o"))
        assert objects == ["archwheel-ext/alpha/src/common.o", "archwheel-ext/beta/src/common.o"]
    assert runs == [{"alpha": "1", "beta": "2"}] * 10


def test_the_switch_turns_the_spread_off(tmp_path: Path) -> None:
    """``[build.parallel] extensions = false``: no hook in the environment, the project's own
    serial build_ext and its one build_temp."""
    two_jobs = choose_jobs(HostResources(cpus=2, memory_bytes=20 * GIB), 2.0)
    plan = choose_parallel(
        ParallelSwitches(extensions=False), two_jobs, archs=1, ninja_off=("setup.py:6",)
    )
    assert plan.spread == 0
    assert "PYTHONPATH" not in dict(plan.env)
    root = project(tmp_path / "demo")
    log = build_log(root, dict(plan.env))
    assert "archwheel" not in log
    assert answers(log, root) == {"alpha": "1", "beta": "2"}
    assert (next((root / "build").glob("temp.*")) / "src" / "common.o").is_file()
