"""The one timing mechanism of a build: named stages and the seconds each took.

``Timings.timed(key)`` measures a block into ``seconds[key]``; ``Timings.stage`` also announces
the stage on the build's output. The runner, the container build and the provenance all read
the same mapping (``timings_s`` in the provenance, ``timings_s`` in ``build --format json``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Protocol


class _Announcer(Protocol):
    def stage(self, name: str, description: str) -> None: ...


class Timings:
    """The seconds of a build's timed stages, in the order they first ran, and the total."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}
        self._started = time.monotonic()

    @contextmanager
    def timed(self, key: str) -> Iterator[None]:
        """Measure the block into ``key`` (a block that runs again replaces its figure)."""
        mark = time.monotonic()
        yield
        self._seconds[key] = time.monotonic() - mark

    @contextmanager
    def stage(
        self, output: _Announcer, name: str, description: str, *, timed: bool = True
    ) -> Iterator[None]:
        """Announce the stage ``name`` on ``output``; timed as ``name`` with ``_`` for ``-``."""
        output.stage(name, description)
        if not timed:
            yield
            return
        with self.timed(name.replace("-", "_")):
            yield

    def update(self, other: Mapping[str, float]) -> None:
        """Take the figures of another measurement (one build of several)."""
        self._seconds.update(other)

    def finish(self) -> None:
        """Record ``total``: the seconds since these timings began."""
        self._seconds["total"] = time.monotonic() - self._started

    def frozen(self) -> Mapping[str, float]:
        """A read-only copy of the figures so far, for provenance."""
        return MappingProxyType(dict(self._seconds))
