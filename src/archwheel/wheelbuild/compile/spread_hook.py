"""Inside the build container: a setuptools project's extension modules spread over the cores,
each compiled into a folder of its own.

This file is copied into the build's work folder (``/build/.archwheel/spread``, on the compile
step's ``PYTHONPATH``, beside a ``.dist-info`` that names it under setuptools'
``setuptools.finalize_distribution_options`` entry points; ``compile/spread.py`` writes both).
setuptools calls ``finalize`` for every ``setup()``; it replaces distutils'
``build_ext._build_extensions_serial``, which every ``build_ext`` (setuptools' own, torch's
``BuildExtension``, a project's subclass) runs when ``--parallel`` is not set, with
``spread_extensions``:

- each extension module gets its own ``build_temp`` (``<build_temp>/archwheel-ext/<name>``):
  two modules that compile one source with different macros write two objects, never one
  (distutils' own ``--parallel`` shares one ``build_temp``: compile/parallel.py);
- the modules are built by at most ``ARCHWHEEL_SPREAD_EXTENSIONS`` forked processes at once,
  each with its own compiler object (torch's ``BuildExtension`` swaps the compiler object's
  ``compiler_so`` around each ``.cu`` file, which threads would share);
- a build whose modules already compile their files in parallel (torch's ninja: ``MAX_JOBS``
  compiles per module) builds them one at a time, so that at most the job count of compiles
  run at once; a project whose ``build_ext`` replaces ``build_extension`` (CMake driven from
  setup.py, Cython's own), or that builds a setuptools ``Library`` for its modules to link,
  keeps its own serial loop and its one ``build_temp``: what it shares between modules, and
  their order, are its own.

The same layout, one module at a time (``ARCHWHEEL_SPREAD_EXTENSIONS=1``), is the
reproducibility check's serial build: the same object paths, so equal bytes prove the spread
changed nothing. Only the standard library: it runs in whatever Python the recipe builds with.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any

# os.path, not pathlib: build_temp is a str that distutils joins with os.path itself
# ruff: noqa: PTH118

VARIABLE = "ARCHWHEEL_SPREAD_EXTENSIONS"
FOLDER = "archwheel-ext"
_PATCHED: list[object] = []


def configured_jobs(environ: Any = None) -> int:
    """``ARCHWHEEL_SPREAD_EXTENSIONS`` as a job count; 0 when absent or not a positive number."""
    value = (os.environ if environ is None else environ).get(VARIABLE, "")
    return int(value) if value.isascii() and value.isdigit() and 0 < int(value) <= 1024 else 0


def own_folder(build_temp: str, name: str) -> str:
    """The ``build_temp`` of the extension module ``name``."""
    safe = name.replace(os.sep, "_").replace("..", "_") or "_"
    return os.path.join(build_temp, FOLDER, safe)


def why_serial(command: Any, stock: Any) -> str:
    """Why this ``build_ext`` keeps its own serial loop ("" when it is spread): it replaces
    ``build_extension``, or a module is a setuptools ``Library`` (a shared library the modules
    after it link to: the order is the project's)."""
    if getattr(type(command), "build_extension", None) is not stock:
        return "the project's build_ext replaces build_extension"
    if any(type(ext).__name__ == "Library" for ext in command.extensions):
        return "a module is a shared Library the others may link to"
    return ""


def finalize(dist: Any) -> None:
    """setuptools' hook: replace the serial loop of distutils' ``build_ext``, once. A setuptools
    this hook does not know (no ``_build_extensions_serial``) is left as it is, and said so."""
    if _PATCHED or not configured_jobs():
        return
    try:
        base, original, stock, failure = _serial_loop()
    except (ImportError, AttributeError, LookupError, TypeError) as exc:
        print(f"archwheel: extension modules as the project builds them ({exc!r})", flush=True)
        _PATCHED.append(None)
        return

    def serial(self: Any) -> None:
        why = why_serial(self, stock)
        if why:
            print(f"archwheel: extension modules one at a time ({why})", flush=True)
            original(self)
            return
        spread_extensions(self, configured_jobs(), failure)

    base._build_extensions_serial = serial
    _PATCHED.append(base)


def _serial_loop() -> tuple[Any, Any, Any, type[Exception]]:
    """distutils' ``build_ext`` class that defines the serial loop, the loop, setuptools'
    ``build_extension`` and distutils' ``CompileError``."""
    import importlib

    from setuptools.command import build_ext as setuptools_build_ext  # type: ignore[import-untyped]

    command = setuptools_build_ext.build_ext
    base = next((c for c in command.__mro__ if "_build_extensions_serial" in vars(c)), None)
    if base is None:
        raise LookupError("no _build_extensions_serial in this setuptools' build_ext")
    errors = importlib.import_module(base.__module__.rsplit(".command", 1)[0] + ".errors")
    failure: type[Exception] = errors.CompileError
    return base, base._build_extensions_serial, command.build_extension, failure


def spread_extensions(command: Any, jobs: int, failure: type[Exception]) -> None:
    """Build ``command.extensions``, each into its own ``build_temp``, ``jobs`` at a time
    (ninja's own parallelism: one at a time); ``failure`` names the modules that failed."""
    extensions = list(command.extensions)
    base_temp = command.build_temp
    if getattr(command, "use_ninja", False):
        jobs = 1  # each module's ninja already runs MAX_JOBS compiles
    jobs = max(1, min(jobs, len(extensions)))
    print(
        f"archwheel: {len(extensions)} extension module(s), {jobs} at a time, each in "
        f"{os.path.join(base_temp, FOLDER)}/<name>",
        flush=True,
    )
    if jobs == 1:
        try:
            for ext in extensions:
                command.build_temp = own_folder(base_temp, ext.name)
                _build_one(command, ext)
        finally:
            command.build_temp = base_temp
        return
    failed = _forked(command, extensions, jobs, base_temp)
    if failed:
        raise failure(f"building extension module(s) {', '.join(failed)} failed")


def _build_one(command: Any, ext: Any) -> None:
    filtered = getattr(command, "_filter_build_errors", None)
    if filtered is None:
        command.build_extension(ext)
        return
    with filtered(ext):  # an optional module that fails is a warning, as in distutils
        command.build_extension(ext)


def _forked(command: Any, extensions: list[Any], jobs: int, base_temp: str) -> list[str]:
    """Each module in a forked process, at most ``jobs`` at once; the names that failed. After
    a failure no further module starts; the running ones finish."""
    waiting = list(extensions)
    running: dict[int, str] = {}
    failed: list[str] = []
    while running or (waiting and not failed):
        while waiting and not failed and len(running) < jobs:
            ext = waiting.pop(0)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child ends in os._exit
                code = 1
                try:
                    command.build_temp = own_folder(base_temp, ext.name)
                    _build_one(command, ext)
                    code = 0
                except Exception as exc:  # said in one line, as distutils says it
                    print(f"error: extension module {ext.name}: {exc}", file=sys.stderr)
                except BaseException:
                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            running[pid] = ext.name
        pid, status = os.wait()
        name = running.pop(pid, None)
        if name is not None and not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
            failed.append(name)
    return failed
