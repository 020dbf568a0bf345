"""The first build's wait, shown: a thread on the host that reads the work folder's nvcc
``--time`` record while the compile step runs, and reports how many of the plan's CUDA sources
are compiled, per phase, with an estimate of the time left (``compile/nvcc_progress.py``).

It reads the record every ``interval`` seconds (only what it gained) and reports through the
build's output (``BuildOutput.compile_progress``: the log, the terminal's line and live bar,
``--format json``'s ``compile-progress`` events) when a source finished, on its first rows,
and otherwise at most every ``every`` seconds while rows keep coming. It never writes into the
work folder, and a record it cannot read is a silent watcher, never a failed build.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from archwheel.wheelbuild.compile.nvcc_progress import CompileProgress, RecordProgress, RecordReader
from archwheel.wheelbuild.compile.nvcc_record import BUILD, NVCC_RECORD, cuda_sources
from archwheel.wheelbuild.planning.plan import BuildPlan

INTERVAL_S = 1.5
EVERY_S = 10.0


def cuda_total(plan: BuildPlan) -> int:
    """The CUDA sources the plan's build compiles: its ``.cu`` files but those its module
    selection leaves out."""
    left_out = set(plan.selection.left_out()) if plan.selection is not None else set()
    return len([s for s in cuda_sources(plan.source.files) if s not in left_out])


def record_path(work: Path) -> Path:
    """The nvcc record in a work folder."""
    return work / NVCC_RECORD.removeprefix(BUILD + "/")


class CompileWatch:
    """A context manager: the watcher thread runs while the compile step runs."""

    def __init__(
        self,
        record: Path,
        total: int,
        report: Callable[[CompileProgress], None],
        *,
        interval: float = INTERVAL_S,
        every: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reader = RecordReader(record)
        self.state = RecordProgress(total)
        self.report = report
        self.interval = interval
        self.every = every
        self.clock = clock
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=self._run, name="archwheel-compile-watch", daemon=True
        )
        self.last: CompileProgress | None = None
        self.last_at = 0.0
        self.reported = 0
        self.grown = False  # rows came since the last report

    def __enter__(self) -> CompileWatch:
        self.thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop.set()
        self.thread.join()
        if kind is None:
            self.poll(final=True)  # the last rows, once the step has ended

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            self.poll()

    def poll(self, *, final: bool = False) -> CompileProgress | None:
        """Read what the record gained and report when it is due; what was reported."""
        now = self.clock()
        lines = self.reader.new_lines()
        self.state.add_lines(lines, now)
        self.grown = self.grown or bool(lines)
        if self.state.first_row_at is None:
            return None  # no nvcc has finished a phase yet
        progress = self.state.progress(now)
        last = self.last
        due = (
            last is None
            or progress.done != last.done
            or (self.grown and (final or now - self.last_at >= self.every))
        )
        if not due:
            return None
        self.last, self.last_at, self.grown = progress, now, False
        self.reported += 1
        try:
            self.report(progress)
        except Exception:
            return None
        return progress
