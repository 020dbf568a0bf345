"""Every core busy on any project: how one build spreads its compiles over the cores.

Three tools decide how many compiles run at once, and each reads a different setting:

==========================  ===================================================================
``MAX_JOBS``                the recipe's jobs variable: torch.utils.cpp_extension's ninja build
                            (``ninja -j``), and most CMake/Makefile recipes. Already set.
``CMAKE_BUILD_PARALLEL_LEVEL``  ``cmake --build`` (CMake >= 3.12), which scikit-build-core and a
                            setup.py driving CMake call: Makefile generators are serial without
                            it, and Ninja would take every core, whatever the memory allows.
``DIST_EXTRA_CONFIG``       a config file setuptools reads after the project's ``setup.cfg`` (so
                            it wins), here holding ``[build_ext] parallel = N``: distutils'
                            ``build_ext`` then builds N extension modules at once. Only what
                            a recipe turns on (below): a project that turns ninja off
                            (``BuildExtension.with_options(use_ninja=False)``, torch-scatter)
                            gets archwheel's spread instead (next row).
``ARCHWHEEL_SPREAD_EXTENSIONS``  with ``PYTHONPATH`` naming archwheel's setuptools hook
                            (``spread_hook.py``): a ``setuptools`` project's extension modules
                            built N at a time, each into a ``build_temp`` of its own, in forked
                            processes. The default; ``[build.parallel] extensions = false``
                            turns it off.
``NVCC_APPEND_FLAGS``       read by nvcc itself (every build system): ``--threads N`` compiles
                            one file's archs at once instead of one after another.
==========================  ===================================================================

Why these and not pip's ``--config-settings``: archwheel does not own the recipe's command
line (``pip wheel``, ``python -m build``, ``setup.py bdist_wheel``, ``cmake``), and each backend
spells its settings differently; environment variables reach every one of them unchanged.

archwheel's spread (``spread_hook.py``) is what ``build_ext --parallel`` should have been: the
same N modules at once, without its race (below): each module compiles into its own folder,
so a source two modules compile with different macros makes two objects, and each module is
built by a process of its own, so no compiler object is shared. With torch's ninja each
module's build already runs ``MAX_JOBS`` compiles, and the hook then builds the modules one at
a time (at most the job count of compiles at once); a project whose ``build_ext`` replaces
``build_extension`` keeps its own loop. tests/unit/wheelbuild/test_build_ext_parallel_race.py
builds the race's project ten times spread, each module linking its own objects every time.

``build_ext --parallel`` is applied only where the recipe asks for it (``[build.parallel]
build_ext = true``); ``auto`` (the default) never applies it, and the plan says why:

- With ninja each module's build already runs ``MAX_JOBS`` compiles, and N modules at once
  would run N x ``MAX_JOBS``.
- Without ninja it is not safe in general. distutils' ``_build_extensions_parallel`` submits
  each module's ``build_extension`` to a ``ThreadPoolExecutor``, and every module compiles into
  the one ``build_temp``, each object named by ``ccompiler.object_filenames`` from its source's
  path alone (``csrc/segment_coo.cpp`` -> ``build/temp.../csrc/segment_coo.o``, whatever the
  module and its macros). Two modules that compile the same source with different macros
  (torch-scatter's ``_segment_coo_cpu`` and ``_segment_coo_cuda``, ``-DWITH_CUDA`` in one)
  then write the same object file, and a module links whichever was written last: a module
  with the other's object (a CPU-only one in the CUDA module, or a ``PyInit_`` it does not
  define), decided by timing. Nothing in setuptools guards it (checked with setuptools 65.5
  and 84.2.1, the torch image's), torch's ``BuildExtension`` does not give modules folders of
  their own without ninja, and it swaps the compiler object's shared ``compiler_so`` around
  each ``.cu`` compile, which other threads read. A recorded torch-scatter 2.1.2 build shows
  two compiles writing ``csrc/cpu/segment_coo_cpu.o`` at once, and
  tests/unit/wheelbuild/test_build_ext_parallel_race.py builds a two-module C project whose
  second module links the first one's object with ``build_ext --parallel 2``, its own without.

Which sources a project's modules share is computed by its ``setup.py`` (torch-scatter globs
``csrc/*.cpp`` and loops over ``cpu``/``cuda``), so no static read can show it safe, and the
project's own serial ``build_ext`` is what its authors test. A recipe that knows its modules
share no source turns it on with ``build_ext = true``; a ninja-off project otherwise gets
archwheel's spread (its modules at once, each with its own objects), with nvcc ``--threads``
still spreading each ``.cu`` file's archs.

The budget stays memory-aware. ``files`` (compiles at once) is the job count of ``jobs.py``:
min(cores, available memory / memory per job). Each nvcc thread compiles one arch, with about
the memory of one job, so ``files x threads`` device compiles run at once, and ``threads`` is
the largest value, at most the number of archs, for which ``files x threads`` stays within the
memory's job count and within twice the cores (a little oversubscription keeps the cores busy
while a compile waits on its disk or its host compiler; PyTorch's own pipeline runs
``MAX_JOBS`` = cores with ``--threads 2``). Output bytes do not depend on the compile count or
nvcc ``--threads``, which only runs the same steps at once (its objects are byte-identical);
``build_ext --parallel`` can change them where modules share a source (above). The
reproducibility check builds the second time serially to prove it of every build.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from archwheel.wheelbuild.compile.jobs import JobCount

BuildExtMode = Literal["auto", "on", "off"]
PARALLEL_CONFIG = "/build/.archwheel/parallel.cfg"  # the DIST_EXTRA_CONFIG file, in the container
_NINJA_OFF = re.compile(r"use_ninja\s*=\s*False\b")
# use_ninja given a value the build computes (DeepSpeed: is_env_set("DS_ENABLE_NINJA")): it may
# be off, which no static read can tell.
_NINJA_COMPUTED = re.compile(r"use_ninja\s*=\s*(?!(?:True|False)\b)[A-Za-z_(]")
COMPUTED = " (computed)"
_THREADS_FLAG = re.compile(r"(?:^|\s)(?:--threads|-t)(?:[=\s]|\d)")
# nvcc's --threads in a project's build files: "--threads 4", "--threads=4", ["--threads", "4"],
# "-t8", "-t 8", ["-t", "8"] (a string or a CMake flag list; -t only before a number).
_OWN_THREADS = re.compile(r"""(?:^|[\s"'(;])(?:--threads\b|-t(?:\s*=?\s*\d|["']\s*,\s*["']?\d))""")
# Why auto leaves build_ext --parallel off, and what the recipe's true vouches for (plan row).
_SHARED = (
    "modules that compile the same source would write one object file at once; "
    "[build.parallel] build_ext = true where none do"
)
_ON_RISK = "the recipe vouches that no two modules compile the same source"
_SPREAD = (
    "a setuptools project's modules in forked processes (with torch's ninja, one at a time); "
    "[build.parallel] extensions = false turns it off"
)
SPREAD_DIR = "/build/.archwheel/spread"  # spread_hook.py and its entry point, on PYTHONPATH
OVERSUBSCRIPTION = 2  # files x threads <= this x the cores
# What choose_parallel appends to NVCC_APPEND_FLAGS (the cache launcher strips the same).
_TRAILING_THREADS = re.compile(r" *--threads [0-9]+\Z")


def without_threads(flags: str) -> str:
    """``NVCC_APPEND_FLAGS`` without the ``--threads N`` archwheel appended."""
    return _TRAILING_THREADS.sub("", flags)


@dataclass(frozen=True)
class ParallelSwitches:
    """A recipe's ``[build.parallel]`` table: each mechanism can be turned off, and
    ``build_ext --parallel``, off by default, on."""

    jobs: bool = True  # False: the jobs variable and CMAKE_BUILD_PARALLEL_LEVEL are 1
    build_ext: BuildExtMode = "auto"  # auto: not applied (the plan says why); on: the recipe's true
    nvcc_threads: bool = True
    extensions: bool = True  # archwheel's spread of a setuptools project's modules (spread_hook)


@dataclass(frozen=True)
class ParallelPlan:
    """How the cores are split: ``files`` compiles at once, ``threads`` per nvcc."""

    files: int
    threads: int
    build_ext: bool
    why_build_ext: str
    why_threads: str
    env: tuple[tuple[str, str], ...]  # added to the compile step's environment
    config: str = ""  # the DIST_EXTRA_CONFIG file's text ("" when build_ext is off)
    spread: int = 0  # extension modules built at once by archwheel's hook (0: not applied)
    why_spread: str = ""

    def describe(self, jobs_variable: str) -> str:
        """The plan's ``parallel`` row."""
        parts = [
            f"{self.files} compile(s) at once ({jobs_variable}, CMAKE_BUILD_PARALLEL_LEVEL)",
            f"setuptools build_ext --parallel {self.files}: {self.why_build_ext}"
            if self.build_ext
            else f"no build_ext --parallel ({self.why_build_ext})",
            f"extension modules {self.spread} at a time, each in its own build_temp: "
            f"{self.why_spread}"
            if self.spread
            else f"extension modules as the project builds them ({self.why_spread})",
            f"nvcc --threads {self.threads}: {self.why_threads}"
            if self.threads > 1
            else f"no nvcc --threads ({self.why_threads})",
        ]
        return "; ".join(parts)

    def to_json(self) -> dict[str, object]:
        """The split as the ``parallel`` entry of the plan's JSON."""
        return {
            "files": self.files,
            "nvcc_threads": self.threads,
            "build_ext_parallel": self.build_ext,
            "why_build_ext": self.why_build_ext,
            "why_threads": self.why_threads,
            "extensions_at_once": self.spread,
            "why_extensions": self.why_spread,
            "env": dict(self.env),
        }


def ninja_off_in(build_files: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """Where the build files turn ninja off (``setup.py:137``), or give ``use_ninja`` a value
    the build computes (``setup.py:40 (computed)``: it may be off), in file order."""
    found: list[str] = []
    for name, text in build_files:
        hits = [(m.start(), "") for m in _NINJA_OFF.finditer(text)]
        hits += [(m.start(), COMPUTED) for m in _NINJA_COMPUTED.finditer(text)]
        for start, suffix in sorted(hits):
            found.append(f"{name}:{text.count(chr(10), 0, start) + 1}{suffix}")
    return tuple(found)


def own_threads_in(build_files: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """Where the build files pass nvcc a ``--threads`` of their own (``setup.py:40``): nvcc
    warns when it is given twice and takes the last, so archwheel then adds none."""
    found: list[str] = []
    for name, text in build_files:
        for number, line in enumerate(text.splitlines(), 1):
            if not line.lstrip().startswith("#") and _OWN_THREADS.search(line):
                found.append(f"{name}:{number}")
    return tuple(found)


def choose_parallel(
    switches: ParallelSwitches,
    jobs: JobCount,
    *,
    archs: int,
    ninja_off: tuple[str, ...] | None,
    recipe_env: dict[str, str] | None = None,
    serial: bool = False,
    own_threads: tuple[str, ...] = (),
) -> ParallelPlan:
    """Decide the split. ``archs``: the arch list's targets (one nvcc step each);
    ``ninja_off``: where the project turns ninja off (None: the source is not read yet);
    ``serial``: one compile at a time, no threads (the reproducibility check's second build);
    ``own_threads``: where the project's build files pass nvcc ``--threads`` themselves."""
    env = dict(recipe_env or {})
    if serial:
        hook = spread_env(1, env) if switches.extensions and switches.build_ext != "on" else ()
        return ParallelPlan(
            1, 1, False, "a serial build", "a serial build",
            (("CMAKE_BUILD_PARALLEL_LEVEL", "1"), *hook),
            spread=1 if hook else 0, why_spread="a serial build, the same folders",
        )  # fmt: skip
    files = jobs.jobs if switches.jobs else 1
    # build_ext --parallel
    if switches.build_ext == "off":
        build_ext, why_ext = False, "turned off by [build.parallel] build_ext"
    elif switches.build_ext == "on":
        build_ext, why_ext = True, f"[build.parallel] build_ext = true ({_ON_RISK})"
    elif ninja_off:
        build_ext = False
        turns = (
            "may turn ninja off"
            if all(w.endswith(COMPUTED) for w in ninja_off)
            else "turns ninja off"
        )
        why_ext = f"the project {turns} ({', '.join(ninja_off[:3])}), but {_SHARED}"
    elif ninja_off is None:
        build_ext, why_ext = False, f"not applied by default: {_SHARED}"
    else:
        build_ext, why_ext = False, "the project compiles with ninja or CMake"
    if files < 2 and build_ext:
        build_ext, why_ext = False, "one compile at a time"
    # nvcc --threads
    by_memory = max(1, jobs.by_memory // files)
    by_cpu = max(1, OVERSUBSCRIPTION * jobs.by_cpu // files)
    threads = max(1, min(archs, by_memory, by_cpu))
    own = env.get("NVCC_APPEND_FLAGS", "")
    if not switches.nvcc_threads:
        threads, why_threads = 1, "turned off by [build.parallel] nvcc_threads"
    elif _THREADS_FLAG.search(own):
        threads, why_threads = 1, "the recipe's NVCC_APPEND_FLAGS sets its own"
    elif own_threads:
        threads = 1
        why_threads = f"the project passes its own ({', '.join(own_threads[:3])})"
    elif archs < 2:
        threads, why_threads = 1, "one arch per compile"
    elif threads < 2:
        why_threads = (
            f"{files} compiles at once already fill the memory ({jobs.by_memory} jobs)"
            if by_memory < 2
            else f"{files} compiles at once already fill {jobs.by_cpu} cores"
        )
    else:
        why_threads = (
            f"{archs} archs per compile; {files} x {threads} = {files * threads} device "
            f"compiles at once, within {jobs.by_memory} by memory and "
            f"{OVERSUBSCRIPTION} x {jobs.by_cpu} cores"
        )
    added: list[tuple[str, str]] = [("CMAKE_BUILD_PARALLEL_LEVEL", str(files))]
    if threads > 1:
        added.append(("NVCC_APPEND_FLAGS", f"{own} --threads {threads}".strip()))
    config = ""
    if build_ext:
        added.append(("DIST_EXTRA_CONFIG", PARALLEL_CONFIG))
        config = f"[build_ext]\nparallel = {files}\n"
    spread, why_spread = 0, "turned off by [build.parallel] extensions"
    if switches.extensions and build_ext:
        why_spread = "setuptools' own build_ext --parallel instead"
    elif switches.extensions:
        spread, why_spread = files, _SPREAD
        added.extend(spread_env(files, env))
    return ParallelPlan(files, threads, build_ext, why_ext, why_threads, tuple(added), config,
                        spread, why_spread)  # fmt: skip


def spread_env(files: int, recipe_env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The hook's variables: its folder first on ``PYTHONPATH`` (before the recipe's own)."""
    own = recipe_env.get("PYTHONPATH", "")
    path = f"{SPREAD_DIR}:{own}" if own else SPREAD_DIR
    return (("ARCHWHEEL_SPREAD_EXTENSIONS", str(files)), ("PYTHONPATH", path))


_HOOK_MODULE = "archwheel_spread_hook"


def spread_hook_files() -> dict[str, str]:
    """What the work folder's ``SPREAD_DIR`` holds (paths relative to it): the hook module and
    a ``.dist-info`` naming it as a ``setuptools.finalize_distribution_options`` entry point,
    which setuptools' ``Distribution`` calls for every ``setup()``."""
    info = f"{_HOOK_MODULE}-0.dist-info"
    return {
        f"{_HOOK_MODULE}.py": Path(__file__).with_name("spread_hook.py").read_text(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {_HOOK_MODULE}\nVersion: 0\n",
        f"{info}/entry_points.txt": (
            "[setuptools.finalize_distribution_options]\n"
            f"{_HOOK_MODULE} = {_HOOK_MODULE}:finalize\n"
        ),
    }


def write_spread_hook(folder: Path) -> None:
    """Write ``spread_hook_files`` under ``folder``."""
    for name, text in spread_hook_files().items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
