"""archwheel's Python API: the questions the commands answer, as calls with typed results.

``archwheel.audit``, ``archwheel.can_run``, ``archwheel.can_load`` and ``archwheel.diff`` are
these functions (bound lazily by ``archwheel/__init__.py``, so that ``import archwheel`` stays
cheap). Each takes paths and plain values (an arch list as text or an ``ArchList``, GPU names,
a driver version as text), makes the one call into the use case that the command makes, and
returns the result dataclass the command renders (``to_json_dict()``/``to_json()`` gives the
document ``--format json`` prints). Errors are ``archwheel.errors`` classes (``InputError``,
``UsageError``, ...), which carry no exit code; docs/api.md has an example.
"""

from __future__ import annotations

from collections.abc import Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from archwheel.facts import ArchList
    from archwheel.verdicts import AuditReport, CanRunReport, DiffReport, LoadReport

StrPath = str | PathLike[str]


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
    from archwheel.facts import ArchList
    from archwheel.inspection import audit_inputs

    wanted = ArchList.parse(expect) if isinstance(expect, str) else expect
    (report,) = audit_inputs(
        [Path(path)], expect=wanted, deep=deep, all_members=all_members, workers=workers
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
    from archwheel.facts import CudaVersion, DriverVersion, load_facts
    from archwheel.inspection import can_run as judge
    from archwheel.verdicts import resolve_gpus

    inputs = [paths] if isinstance(paths, str | PathLike) else list(paths)
    return judge(
        [Path(p) for p in inputs],
        resolve_gpus(gpus, ccs, facts=load_facts()),
        driver=DriverVersion.parse(driver) if driver else None,
        cuda_runtime=CudaVersion.parse(cuda_runtime) if cuda_runtime else None,
    )


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
    from archwheel.inspection import can_load as judge

    return judge(
        Path(wheel),
        [Path(p) for p in with_],
        installed=installed,
        interpreter=interpreter,
        host_libraries=host_libraries,
    )


def diff(old: StrPath, new: StrPath) -> DiffReport:
    """What ``new`` gained and lost against ``old``: per library the SASS/PTX archs added and
    dropped and the bytes per arch; for wheels also the version, CUDA runtime, torch
    requirement and CUDA pins. Each side is a wheel, a library, a directory, or a document of
    ``archwheel audit --format json`` (a ``.json`` file). ``report.exit_code`` is 1 when an
    arch ``old`` had is missing in ``new``."""
    from archwheel.inspection import diff_builds

    return diff_builds(Path(old), Path(new))
