"""How far a build's CUDA compiles are, from the nvcc ``--time`` record as it grows.

Every nvcc of an extension build appends one row per phase to the work folder's record
(``nvcc_record.py``) when the phase ends; the host object (``gcc (compiling)``) is the last
phase of a source's call. So while the compile step runs, the record says how many of the
plan's CUDA sources are done (a ``gcc (compiling)`` row), how many phases of each kind ran
(``cicc`` and ``ptxas`` once per arch), and, from the rate at which sources finished since
the first row appeared, about how long the rest takes. ``RecordReader`` reads only what the
record gained since its last read; ``CompileProgress`` is what the build's output reports.
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from archwheel.effects.files import open_regular
from archwheel.wheelbuild.compile.nvcc_record import (
    MAX_RECORD_BYTES,
    PHASE_GROUPS,
    is_cmake_probe,
    phase_group,
    timed_ms,
)

# The phases the progress counts (nvcc_record.phase_group), in the order a source's call runs
# them; the host compile (``gcc (compiling)``, ``g++-15 (compiling)``) is a call's last.
PHASES = ("cicc", "ptxas", "fatbinary", "host")
_LAST_PHASE = "host"
_READ = 1 << 20  # the most one poll reads


@dataclass(frozen=True)
class CompileProgress:
    """The CUDA compiles of a build so far: ``done`` of ``total`` sources, phase counts, the
    seconds since the first row and the estimate of those left (None before a source is done)."""

    done: int
    total: int
    phases: tuple[tuple[str, int], ...]  # (group, rows), in PHASES order
    elapsed_s: float
    left_s: float | None
    # nvcc's own seconds per phase group so far (nvcc_record.PHASE_GROUPS); empty when every
    # call went through the compiler cache (its rows come from a dry run and measure nothing)
    seconds: tuple[tuple[str, float], ...] = ()

    def describe(self) -> str:
        """``compiled 3 of 12 .cu files (cicc 8, ptxas 8, host 3), about 95 s left``, and
        where nvcc ran its phases itself, their seconds: ``; nvcc's seconds: cicc 40.2, ...``."""
        counts = ", ".join(f"{name} {count}" for name, count in self.phases)
        left = (
            f", about {_duration(self.left_s)} left"
            if self.left_s is not None
            else ", no estimate before the first file is done"
        )
        spent = ", ".join(f"{name} {value:.1f}" for name, value in self.seconds)
        spent = f"; nvcc's seconds: {spent}" if spent else ""
        return f"compiled {self.done} of {self.total} .cu files ({counts}){left}{spent}"

    def to_json(self) -> dict[str, object]:
        """The ``compile-progress`` event's fields (interfaces/schema/build-events.schema.json)."""
        return {
            "done": self.done,
            "total": self.total,
            "phases": dict(self.phases),
            "elapsed_s": round(self.elapsed_s, 1),
            "left_s": None if self.left_s is None else round(self.left_s, 1),
            "phase_seconds": {name: round(value, 2) for name, value in self.seconds},
        }


def _duration(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole} s" if whole < 120 else f"{whole // 60} min {whole % 60:02d} s"


@dataclass
class RecordProgress:
    """The record's rows so far, folded: which sources are done, how many rows each phase has."""

    total: int
    done: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)
    phases: Counter[str] = field(default_factory=Counter)
    seconds: dict[str, float] = field(default_factory=dict)
    first_row_at: float | None = None

    def add_lines(self, lines: list[str], now: float) -> None:
        """Fold complete record lines read at time ``now``."""
        for line in lines:
            try:
                row = next(csv.reader([line]), [])
            except csv.Error:
                continue
            if len(row) < 5:
                continue
            source, phase = row[0].strip(), row[1].strip()
            if not source or source == "source file name" or is_cmake_probe(source):
                continue
            if self.first_row_at is None:
                self.first_row_at = now
            self.seen.add(source)
            group, ms = phase_group(phase), timed_ms(row)
            if group is None:
                continue
            self.phases[group] += 1
            if ms is not None:
                self.seconds[group] = self.seconds.get(group, 0.0) + ms / 1000
            if group == _LAST_PHASE:
                self.done.add(source)

    def progress(self, now: float) -> CompileProgress:
        """Where the compiles stand at ``now``."""
        total = max(self.total, len(self.seen))  # a source the plan did not count is counted
        done = min(len(self.done), total)
        elapsed = 0.0 if self.first_row_at is None else max(0.0, now - self.first_row_at)
        left = elapsed / done * (total - done) if done else None
        phases = tuple((name, self.phases[name]) for name in PHASES)
        seconds = tuple((g, self.seconds[g]) for g in PHASE_GROUPS if g in self.seconds)
        return CompileProgress(done, total, phases, elapsed, left, seconds)


class RecordReader:
    """The record's complete lines since the last read: a regular file only (the work folder is
    the build's: a link or a FIFO there is not followed or waited on), at most
    ``MAX_RECORD_BYTES`` in all."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""

    def new_lines(self) -> list[str]:
        """The lines appended since the last call (none when the file cannot be read)."""
        if self.offset >= MAX_RECORD_BYTES:
            return []
        try:
            if self.path.is_symlink():
                return []
            with open_regular(self.path) as handle:
                handle.seek(self.offset)
                data = handle.read(min(_READ, MAX_RECORD_BYTES - self.offset))
        except OSError:
            return []
        self.offset += len(data)
        data = self.partial + data
        complete, _, self.partial = data.rpartition(b"\n")
        if not complete:
            return []
        return complete.decode("utf-8", "replace").splitlines()
