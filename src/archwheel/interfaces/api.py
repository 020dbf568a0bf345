"""archwheel's Python API: the questions the commands answer, as calls with typed results.

``archwheel.audit``, ``archwheel.can_run``, ``archwheel.can_load`` and ``archwheel.diff`` are
these functions (bound lazily by ``archwheel/__init__.py``, so that ``import archwheel`` stays
cheap). Each takes paths and plain values (an arch list as text or an ``ArchList``, GPU names,
a driver version as text), makes the one call into the use case that the command makes, and
returns the result dataclass the command renders (``to_json_dict()``/``to_json()`` gives the
document ``--format json`` prints). Errors are ``archwheel.errors`` classes (``InputError``,
``UsageError``, ...), which carry no exit code; docs/api.md has an example.

Every argument is checked before any work (``api_arguments``): a wrong type or value is a
``UsageError`` naming the call and the parameter; an ``OSError`` the system raises on a path
(too long a name, a loop of links, no permission) is an ``InputError`` naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from os import PathLike
from typing import TypeVar

from archwheel.errors import InputError, UsageError
from archwheel.facts import ArchList, CudaVersion, DriverVersion, load_facts
from archwheel.inspection import audit_inputs, diff_builds
from archwheel.inspection import can_load as judge_load
from archwheel.inspection import can_run as judge_run
from archwheel.interfaces.api_arguments import (
    expect_argument,
    flag_argument,
    interpreter_argument,
    names_argument,
    path_argument,
    paths_argument,
    version_argument,
    workers_argument,
)
from archwheel.verdicts import AuditReport, CanRunReport, DiffReport, LoadReport, resolve_gpus

StrPath = str | PathLike[str]

_Result = TypeVar("_Result")


def _guarded(work: Callable[[], _Result]) -> _Result:
    """``work()``, an ``OSError`` on a path the caller gave (too long a name, a loop of links,
    no permission) raised as an ``InputError``, as the command line reports it (exit 3)."""
    try:
        return work()
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        raise InputError(where + (exc.strerror or str(exc))) from exc


def audit(
    path: StrPath,
    *,
    expect: str | ArchList | None = None,
    deep: bool = False,
    all_members: bool = False,
    workers: int | None = None,
) -> AuditReport:
    """Which SASS and PTX every library of ``path`` (a wheel, a library, an object file, a
    cubin or fatbin, or a directory) really contains, judged against ``expect`` (an arch list
    such as ``"8.0;9.0+PTX"``; None: inventory only).

    ``report.ok`` is false when a library lacks a requested image (``report.failing``);
    ``report.complete`` is false when the input could not be read completely (its problems are
    in ``report.inventory.problems``). ``deep``: also decompress every payload and check it
    against its header; ``all_members``: also look inside wheel members named like text or
    Python files; ``workers``: threads inflating wheel members."""

    where = path_argument("audit", "path", path)
    wanted = expect_argument("audit", expect)
    deep = flag_argument("audit", "deep", deep)
    all_members = flag_argument("audit", "all_members", all_members)
    count = workers_argument("audit", workers)
    (report,) = _guarded(
        lambda: audit_inputs(
            [where], expect=wanted, deep=deep, all_members=all_members, workers=count
        )
    )
    return report


def can_run(
    paths: StrPath | Sequence[StrPath],
    *,
    gpus: Sequence[str] = (),
    ccs: Sequence[str] = (),
    driver: str | None = None,
    cuda_runtime: str | None = None,
) -> CanRunReport:
    """Whether each input runs natively, only by JIT-compiling PTX, or not at all on each GPU
    (names such as ``"RTX 5090"``, or compute capabilities such as ``"8.6"``), and with
    ``driver`` (``"570.86.10"``) whether the driver is new enough for the CUDA runtime the
    inputs target (``cuda_runtime`` when their metadata does not say, e.g. ``"12.8"``).

    ``report.exit_code`` is the command's code: 0 native everywhere, 10 some JIT, 11 no kernel
    image, 12 the driver is too old."""

    inputs = paths_argument("can_run", "paths", paths, one=True)
    if not inputs:
        raise UsageError("can_run: paths is empty", hint="give a wheel, a library or a folder")
    names = names_argument("can_run", "gpus", gpus)
    capabilities = names_argument("can_run", "ccs", ccs)
    if not names and not capabilities:
        raise UsageError("can_run: no GPU given", hint='give gpus=["A100"] or ccs=["8.0"]')
    driver_text = version_argument("can_run", "driver", driver, "570.86.10")
    runtime_text = version_argument("can_run", "cuda_runtime", cuda_runtime, "12.8")
    facts = load_facts()
    fleet = resolve_gpus(names, capabilities, facts=facts)
    driver_version = DriverVersion.parse(driver_text) if driver_text else None
    runtime = CudaVersion.parse(runtime_text) if runtime_text else None
    return _guarded(lambda: judge_run(inputs, fleet, driver=driver_version, cuda_runtime=runtime))


def can_load(
    wheel: StrPath,
    *,
    with_: Sequence[StrPath] = (),
    installed: bool = False,
    interpreter: str | None = None,
    host_libraries: bool = True,
) -> LoadReport:
    """Whether every shared library of ``wheel`` loads after ``import torch``: each
    ``DT_NEEDED`` resolved as the dynamic loader would, each undefined symbol (and its version)
    matched, against the wheels of ``with_`` (exactly one torch, and any nvidia-* wheels), or,
    with ``installed``, the torch installed for ``interpreter`` (default: this one).

    ``report.verdict`` is ``LoadVerdict.LOADS``, ``FAILS`` or ``UNKNOWN`` (something could not
    be checked); ``host_libraries``: read this machine's libc/libstdc++ as stand-ins for the
    system libraries the wheel's manylinux tag allows."""

    target = path_argument("can_load", "wheel", wheel)
    others = paths_argument("can_load", "with_", with_, one=False)
    use_installed = flag_argument("can_load", "installed", installed)
    python = interpreter_argument("can_load", interpreter)
    host = flag_argument("can_load", "host_libraries", host_libraries)
    return _guarded(
        lambda: judge_load(
            target, others, installed=use_installed, interpreter=python, host_libraries=host
        )
    )


def diff(old: StrPath, new: StrPath) -> DiffReport:
    """What ``new`` gained and lost against ``old``: per library the SASS/PTX archs added and
    dropped and the bytes per arch; for wheels also the version, CUDA runtime, torch
    requirement and CUDA pins. Each side is a wheel, a library, a directory, or a document of
    ``archwheel audit --format json`` (a ``.json`` file). ``report.exit_code`` is 1 when an
    arch ``old`` had is missing in ``new``."""

    before = path_argument("diff", "old", old)
    after = path_argument("diff", "new", new)
    return _guarded(lambda: diff_builds(before, after))
