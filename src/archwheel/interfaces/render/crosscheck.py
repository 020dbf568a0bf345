"""Human text of ``archwheel audit --cross-check``: a progress line, then the findings.

Everything goes to standard error, one line per finding, so that ``--format json`` on
standard output stays parseable.
"""

from __future__ import annotations

import sys
from typing import TextIO

from archwheel.crosscheck.run import CrossCheckResult
from archwheel.interfaces.render.common import literal

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
        if self.shown:
            self.stream.write("\r" + " " * 80 + "\r")
            self.stream.flush()
            self.shown = False


def progress_line(*, quiet: bool, stream: TextIO | None = None) -> ProgressLine | None:
    """A progress line on a terminal unless ``quiet``; None where nobody would see it."""
    out = stream or sys.stderr
    return ProgressLine(out) if not quiet and out.isatty() else None


def print_cross_check(
    result: CrossCheckResult, *, quiet: bool, stream: TextIO | None = None
) -> None:
    """Each report's lines (a summary unless ``quiet``, then one line per finding)."""
    out = stream or sys.stderr
    for report in result.reports:
        for line in report.lines(quiet=quiet):
            print(literal(line), file=out)
