"""The compiled scan of a whole, clean ELF64 binary or ar archive, when it is built
(``_speedups.c``).

An accelerator only: ``scan_whole`` answers for a binary the Python scan would read with no
problem at all, and None for anything else, which the Python scan then reads as always. Where
it is not built (no C compiler at install time), or ``ARCHWHEEL_PURE_PYTHON=1`` is set, every
binary takes the Python scan: the same results, slower on binaries dense in containers
(docs/performance.md, "Hostile input").
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import NamedTuple

from archwheel.binary.fatbin import describe
from archwheel.binary.model import FatbinContainer, FatbinEntry, Origin

# Binaries up to this size are gathered whole for the compiled scan (bigger ones stream).
WHOLE_MAX = 16 << 20


def _load() -> ModuleType | None:
    if os.environ.get("ARCHWHEEL_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from archwheel.binary import _speedups
    except ImportError:
        return None
    _speedups.configure(FatbinEntry, FatbinContainer, describe, Origin.FATBIN)
    return _speedups


COMPILED: ModuleType | None = _load()


class Bounds(NamedTuple):
    """The Python scan's bounds on one binary (scan/binary.py), which the compiled scan keeps:
    past any of them it answers None, and the Python scan reports the limit."""

    containers: int
    entries_per_container: int
    entries: int
    raw_cubins: int


Unit = tuple[str, str, int, tuple[FatbinContainer, ...], tuple[FatbinEntry, ...]]
"""One library the compiled scan read: its name in the archive ("" for the file itself), its
file kind, its size, its containers and its entries (offsets from the library's first byte)."""


def scan_whole(data: bytes, bounds: Bounds) -> list[Unit] | None:
    """The libraries of ``data``, a whole ELF binary or ar archive, when the compiled scan is
    built and the Python scan would find exactly these and no problem; else None."""
    if COMPILED is None:
        return None
    found: list[Unit] | None = COMPILED.scan_whole(data, *bounds)
    return found
