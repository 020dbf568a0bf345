"""A build's compile jobs as a graph: what ran, how long, after what, and where it may run.

Two records of a real build make the graph (both plain data; reading them is the caller's):

- the build's timed compiler calls (``TimedCall``): each nvcc, host compile and link a build
  system started, with its wall time, its output and its inputs;
- nvcc's own ``--time`` record (``NvccPhase``, one row per phase of every nvcc call; every
  archwheel build writes it, ``wheelbuild/compile/nvcc_record.py``). Measured with nvcc 13.0 for
  ``-gencode`` 80 and 90 of one file, in the order they ran::

      gcc (preprocessing 4)  k.cu        -> k.cpp4.ii              host side
      cudafe++               k.cpp4.ii   -> k.compute_90.cudafe1.cpp
      gcc (preprocessing 1)  k.cu        -> k.compute_80.cpp1.ii   per arch: compute_80
      cicc                   ...cpp1.ii  -> k.compute_80.ptx
      ptxas                  ...ptx      -> k.compute_80.cubin     arch sm_80
      (the same three for compute_90)
      fatbinary              both cubins -> k.fatbin
      gcc (compiling)        (no input)  -> k.o                    the host object, last

  and one ``nvcc (driver)`` row with no source. nvcc appends each row when its phase ends, so
  parallel nvcc processes interleave their rows in one file.

Two graphs come out of them. ``whole_call_graph``: every timed call one job (a farm that sends
whole nvcc commands). ``per_arch_graph``: each nvcc call split into its phases as sccache-dist
splits it (``nvcc --dryrun``), the dependencies of the files they pass: the per-arch
preprocess -> cicc -> ptxas chains are independent of each other, ``cudafe++`` follows the host
preprocessing, ``fatbinary`` every ``ptxas`` (and ``cicc`` whose PTX it embeds), the host
compile of the ``.cu`` everything else of its call. Links follow the objects they take.

Where a job may run: ``cicc``, ``ptxas``, ``cudafe++``, nvcc's host compile and a host
compiler's ``-c`` compile go to a farm (sccache-dist's distributed kinds); preprocessing (the
client hashes it to find the cache key), ``fatbinary``, ``nvlink``, links and nvcc's own
driver time stay on the building machine.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

Where = Literal["local", "farm"]
FARM_PHASES = frozenset({"cicc", "ptxas", "cudafe++", "gcc (compiling)"})


def _host_compile(phase: str) -> bool:
    """The host compile's row, named after the host compiler: ``gcc (compiling)``, ``g++-15
    (compiling)`` (``NVCC_CCBIN`` or ``-ccbin``)."""
    return phase.endswith(" (compiling)")


_TMPXFT = re.compile(r"tmpxft_([0-9a-f]+)_")


@dataclass(frozen=True)
class Job:
    """One job of a build: its seconds, the jobs it waits for, and where it may run."""

    name: str
    seconds: float
    deps: tuple[str, ...] = ()
    where: Where = "farm"
    kind: str = ""  # cicc, ptxas, compile, link, nvcc, ...


@dataclass(frozen=True)
class TimedCall:
    """One compiler call a build system made: kind nvcc, compile, link or other."""

    kind: str
    start_s: float
    end_s: float
    output: str
    inputs: tuple[str, ...] = ()
    source: str = ""  # the source as the command gave it (nvcc's record names it so)

    @property
    def seconds(self) -> float:
        """How long the call ran (never negative, whatever the clock did)."""
        return max(0.0, self.end_s - self.start_s)


@dataclass(frozen=True)
class NvccPhase:
    """One row of ``nvcc --time``: the source as given, the phase, its files, arch and time."""

    source: str
    phase: str
    inputs: tuple[str, ...]
    output: str
    arch: str
    seconds: float


def calls_from_records(jobs: Iterable[Mapping[str, object]]) -> tuple[TimedCall, ...]:
    """Timed calls from their JSON form (``start_ms``, ``end_ms``, ``kind``, ``output``,
    ``inputs``, ``source_as_given``); a call that failed (``rc`` not 0) is left out."""
    found = []
    for job in jobs:
        if int(str(job.get("rc", 0))) != 0:
            continue
        inputs = job.get("inputs", ())
        found.append(
            TimedCall(
                kind=str(job["kind"]),
                start_s=float(str(job["start_ms"])) / 1000,
                end_s=float(str(job["end_ms"])) / 1000,
                output=str(job.get("output", "")),
                inputs=tuple(str(i) for i in inputs) if isinstance(inputs, list) else (),
                source=str(job.get("source_as_given", "")),
            )
        )
    return tuple(found)


def phases_from_rows(rows: Iterable[Sequence[str]]) -> tuple[NvccPhase, ...]:
    """nvcc ``--time`` rows (``source, phase, inputs, output, arch, tool, metric, unit``, each
    stripped) as phases; the header, the source-less driver row and other shapes left out."""
    found = []
    for row in rows:
        if len(row) < 8 or not row[0] or row[0] == "source file name" or row[7] != "ms":
            continue
        try:
            seconds = float(row[6]) / 1000
        except ValueError:
            continue
        found.append(NvccPhase(row[0], row[1], tuple(row[2].split()), row[3], row[4], seconds))
    return tuple(found)


def measured_span(calls: Sequence[TimedCall]) -> float:
    """The compile wall time the build took: first call's start to the last call's end."""
    if not calls:
        return 0.0
    return max(c.end_s for c in calls) - min(c.start_s for c in calls)


def _name(call: TimedCall, index: int) -> str:
    label = PurePosixPath(call.output).name or PurePosixPath(call.source).name or "call"
    return f"{index:04d} {call.kind} {label}"


def _call_where(call: TimedCall) -> Where:
    return "farm" if call.kind in ("nvcc", "compile") else "local"


def _inputs_made(calls: Sequence[TimedCall]) -> list[set[int]]:
    """For each call, the calls that made its inputs. One path can be written by several calls
    (setuptools builds every module's objects into one temporary folder, so a project that
    compiles one source into two modules writes one object twice): an input's maker is then the
    call that wrote it last before this one started."""
    writers: dict[str, list[int]] = {}
    for i, call in enumerate(calls):
        if call.output:
            writers.setdefault(call.output, []).append(i)
    found: list[set[int]] = []
    for i, call in enumerate(calls):
        makers = set()
        for name in call.inputs:
            before = [w for w in writers.get(name, ()) if w != i and calls[w].end_s <= call.start_s]
            if before:
                makers.add(max(before, key=lambda w: calls[w].end_s))
        found.append(makers)
    return found


def whole_call_graph(calls: Sequence[TimedCall]) -> tuple[Job, ...]:
    """Each timed call one job; a link waits for the calls that made its inputs."""
    makers = _inputs_made(calls)
    jobs = []
    for i, call in enumerate(calls):
        deps = tuple(sorted(_name(calls[m], m) for m in makers[i]))
        jobs.append(Job(_name(call, i), call.seconds, deps, _call_where(call), call.kind))
    return tuple(jobs)


def split_by_call(
    calls: Sequence[TimedCall], phases: Sequence[NvccPhase]
) -> dict[int, list[NvccPhase]]:
    """nvcc's rows for each nvcc call (its index in ``calls``). Rows are matched by the source
    as the command gave it, split by nvcc's temporary-file id where they carry one
    (``tmpxft_<id>_``), else in order at each host compile (the last phase of a call)."""
    by_source: dict[str, list[NvccPhase]] = {}
    for phase in phases:
        by_source.setdefault(phase.source, []).append(phase)
    out: dict[int, list[NvccPhase]] = {}
    nvcc = [i for i, c in enumerate(calls) if c.kind == "nvcc"]
    for source, rows in by_source.items():
        mine = sorted((i for i in nvcc if calls[i].source == source), key=lambda i: calls[i].end_s)
        if not mine:
            continue
        groups = _groups(rows)
        for index, group in zip(mine, groups, strict=False):
            out[index] = group
    return out


def _groups(rows: list[NvccPhase]) -> list[list[NvccPhase]]:
    ids: dict[str, list[NvccPhase]] = {}
    for row in rows:
        found = _TMPXFT.search(row.output) or next(
            (m for m in (_TMPXFT.search(f) for f in row.inputs) if m), None
        )
        if found:
            ids.setdefault(found.group(1), []).append(row)
            continue
        # a row naming no temporary file (the host compile writes the object as given):
        # the call whose rows came first among those still without their host compile
        open_calls = [g for g in ids.values() if not _host_compile(g[-1].phase)]
        if not open_calls:
            ids = {}
            break
        open_calls[0].append(row)
    if ids:
        # each call's host compile is its last row: order the calls by when it ended
        return sorted(ids.values(), key=lambda g: rows.index(g[-1]))
    groups: list[list[NvccPhase]] = [[]]
    for row in rows:
        groups[-1].append(row)
        if _host_compile(row.phase):
            groups.append([])
    return [g for g in groups if g]


def _phase_jobs(prefix: str, call: TimedCall, rows: list[NvccPhase]) -> tuple[list[Job], str]:
    """The jobs of one nvcc call and the name of its last (the host compile)."""
    names = [f"{prefix} {i:02d} {r.phase} {r.arch}".rstrip() for i, r in enumerate(rows)]
    made = {r.output: names[i] for i, r in enumerate(rows) if r.output}
    driver = max(0.0, call.seconds - sum(r.seconds for r in rows))
    driver_name = f"{prefix} nvcc driver"
    jobs = [Job(driver_name, driver, (), "local", "nvcc driver")]
    last = names[-1]
    for i, row in enumerate(rows):
        deps = {made[f] for f in row.inputs if f in made and made[f] != names[i]}
        if not row.inputs and _host_compile(row.phase):
            deps = {n for n in names if n != names[i]}  # no file named: after all of its call
        if not deps:
            deps = {driver_name}
        farm = row.phase in FARM_PHASES or _host_compile(row.phase)
        where: Where = "farm" if farm else "local"
        jobs.append(Job(names[i], row.seconds, tuple(sorted(deps)), where, row.phase))
        if _host_compile(row.phase):
            last = names[i]
    return jobs, last


def per_arch_graph(calls: Sequence[TimedCall], phases: Sequence[NvccPhase]) -> tuple[Job, ...]:
    """Each nvcc call split into its phases (where nvcc's record has them; a call without
    rows stays whole), every other call one job; links wait for the calls' last jobs."""
    rows = split_by_call(calls, phases)
    final: dict[int, str] = {}
    jobs: list[Job] = []
    for i, call in enumerate(calls):
        if call.kind == "nvcc" and rows.get(i):
            parts, last = _phase_jobs(_name(call, i), call, rows[i])
            jobs.extend(parts)
            final[i] = last
        else:
            final[i] = _name(call, i)
    makers = _inputs_made(calls)
    for i, call in enumerate(calls):
        if call.kind == "nvcc" and rows.get(i):
            continue
        deps = tuple(sorted(final[m] for m in makers[i]))
        jobs.append(Job(_name(call, i), call.seconds, deps, _call_where(call), call.kind))
    return tuple(jobs)
