"""Human text of ``archwheel audit --cross-check``: a progress line, then the findings (and
``AuditProgress``, what the audit shows while it runs).

Everything goes to standard error, one line per finding, so that ``--format json`` on
standard output stays parseable.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from archwheel.text import literal

if TYPE_CHECKING:
    from rich.progress import Progress

    from archwheel.crosscheck import CrossCheckResult

_PROGRESS_WIDTH = 60


class ProgressLine:
    """``cross-check: cuobjdump on NAME``, rewritten in place on a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.shown = False

    def __call__(self, source: str, name: str) -> None:
        self.stream.write(
            f"\rcross-check: cuobjdump on {literal(name)[-_PROGRESS_WIDTH:]:<{_PROGRESS_WIDTH}}"
        )
        self.stream.flush()
        self.shown = True

    def clear(self) -> None:
        """Blank the progress line if one is shown, so the next line starts on a clean row."""
        if self.shown:
            self.stream.write("\r" + " " * 80 + "\r")
            self.stream.flush()
            self.shown = False


def progress_line(*, quiet: bool, stream: TextIO | None = None) -> ProgressLine | None:
    """A progress line on a terminal unless ``quiet``; None where nobody would see it."""
    out = stream or sys.stderr
    return ProgressLine(out) if not quiet and out.isatty() else None


class AuditProgress:
    """What ``archwheel audit`` shows while it runs: the scan's bar (``scan_bar``: a table on a
    terminal), stopped once every input is scanned, then the cross-check's progress line."""

    def __init__(self, *, scan_bar: bool, quiet: bool) -> None:
        self._bar: Progress | None = None
        self.scanning: Callable[[int, int, str], None] | None = None
        if scan_bar:
            from archwheel.interfaces.render.audit import scan_progress

            self.scanning, self._bar = scan_progress()
            self._bar.start()
        self.checking = progress_line(quiet=quiet)

    def scanned(self) -> None:
        """Every input is scanned: the bar goes."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def close(self) -> None:
        """The run ended (or failed): the bar and the line go."""
        self.scanned()
        if self.checking is not None:
            self.checking.clear()


def print_cross_check(
    result: CrossCheckResult, *, quiet: bool, stream: TextIO | None = None
) -> None:
    """Each report's lines (a summary unless ``quiet``, then one line per finding)."""
    out = stream or sys.stderr
    for report in result.reports:
        for line in report.lines(quiet=quiet):
            print(literal(line), file=out)
