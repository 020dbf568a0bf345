"""The compiled scan of a whole, clean ELF64 binary or ar archive, when it is built
(``_speedups.c``).

An accelerator only: ``scan_whole`` answers for a binary the Python scan would read with no
problem at all, and None for anything else, which the Python scan then reads as always. Where
it is not built (no C compiler at install time), or ``ARCHWHEEL_PURE_PYTHON=1`` is set, every
binary takes the Python scan: the same results, slower on binaries dense in containers
(docs/maintainers/performance.md, "Hostile input").
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import ModuleType
from typing import Literal, NamedTuple, TypeVar

from archwheel.binary.fatbin import describe
from archwheel.binary.model import FatbinContainer, FatbinEntry, Origin
from archwheel.text import switch_value

_Member = TypeVar("_Member", bound=tuple[object, ...])

# Binaries up to this size are gathered whole for the compiled scan (bigger ones stream).
WHOLE_MAX = 16 << 20


def _load() -> ModuleType | None:
    # Read here, not through effects.settings.Settings (the one exception below interfaces/,
    # tests/unit/test_settings_read_once.py): it decides at import, and the scan's worker
    # processes import this module too, inheriting the environment, never a settings object.
    # Written as every switch (text.switch_value); the command line refuses a value that is
    # not one before any command runs (effects.settings.check_switches), so a library caller's
    # typo alone reaches here, and leaves the compiled scan on.
    if switch_value(os.environ.get("ARCHWHEEL_PURE_PYTHON", "")):
        return None
    try:
        from archwheel.binary import _speedups
    except ImportError:
        return None
    _speedups.configure(FatbinEntry, FatbinContainer, describe, Origin.FATBIN)
    return _speedups


COMPILED: ModuleType | None = _load()


class Bounds(NamedTuple):
    """The Python scan's bounds on one binary (scan/bounds.py), which the compiled scan keeps:
    past any of them it answers None, and the Python scan reports the limit."""

    containers: int
    entries_per_container: int
    entries: int
    raw_cubins: int


Unit = tuple[str, str, int, tuple[FatbinContainer, ...], tuple[FatbinEntry, ...], int]
"""One library the compiled scan read: its name in the archive ("" for the file itself), its
file kind, its size, its containers, its entries (offsets from the library's first byte) and
the bytes of its debug sections."""


def scan_whole(data: bytes, bounds: Bounds) -> list[Unit] | None:
    """The libraries of ``data``, a whole ELF binary or ar archive, when the compiled scan is
    built and the Python scan would find exactly these and no problem; else None."""
    if COMPILED is None:
        return None
    found: list[Unit] | None = COMPILED.scan_whole(data, *bounds)
    return found


def find_magics(chunk: bytes) -> tuple[list[int], list[int]] | None:
    """The offsets of every container magic and every ELF magic in ``chunk`` (each list in
    increasing order, as ``re.finditer`` finds them), in one compiled pass; None when the
    compiled part is not built."""
    if COMPILED is None:
        return None
    found: tuple[list[int], list[int]] = COMPILED.find_magics(chunk)
    return found


# What a scanning process keeps of the memory it frees (``retain_freed_memory``), and how
# often (bytes scanned) it gives back what it kept (``trim_freed_memory``).
RETAINED_BLOCK = 32 << 20
RETAINED_TOTAL = 256 << 20
TRIM_EVERY = 64 << 20


def retain_freed_memory() -> bool:
    """Make this process's allocator keep the blocks it frees (glibc's malloc, set with
    ``mallopt``) rather than give them back and fault them in again with the next chunk: for
    a process that does nothing but scan (a forked worker), never the caller's. False where
    the compiled part is not built or the C library is not glibc."""
    if COMPILED is None:
        return False
    return bool(COMPILED.retain_freed_memory(RETAINED_BLOCK, RETAINED_TOTAL))


def trim_freed_memory() -> bool:
    """Give the allocator's free pages back to the kernel (glibc's ``malloc_trim``): what a
    process that retains freed memory does every ``TRIM_EVERY`` bytes it scans, since ISA-L's
    inflater leaves the heap fragmented (an audit of torch: peak PSS 109 -> 84 MB at the same
    speed, measured). False where nothing was given back or the compiled part is not built."""
    if COMPILED is None:
        return False
    return bool(COMPILED.trim_freed_memory())


def scan_members(
    fd: int,
    archive_size: int,
    members: Sequence[tuple[str, int, int, int, int, int, str]],
    *,
    small_max: int,
    slack: int,
    bounds: Bounds,
) -> list[list[Unit] | bytes | Literal[False] | None] | None:
    """Small wheel members (``zipmember.Member``), each read, inflated and scanned as
    ``zipmember.small_member`` and ``scan_whole`` would: per member its libraries; or its bytes,
    read whole and sound, when only the Python scan reads them; False when they are no binary
    (``layout.sniff``); None when anything about it is irregular (the Python path reads it and
    says what). None for them all when the compiled scan is not built."""
    if COMPILED is None:
        return None
    answers: list[list[Unit] | bytes | Literal[False] | None] = COMPILED.scan_members(
        fd, archive_size, members, small_max, slack, *bounds
    )
    return answers


def plain_directory(
    directory: bytes,
    start_dir: int,
    concat: int,
    archive_size: int,
    member_type: type[_Member],
    *,
    unicode_path: bool,
    entries: int,
) -> tuple[list[_Member], int] | None:
    """A zip's members (``member_type``: ``zipmember.Member``, made from (name, size,
    compressed size, method, CRC, header offset, header name); ``unicode_path``: whether this
    Python's zipfile names members by an Info-ZIP Unicode Path field; ``entries``: how many
    records the end record declares, which the directory must hold) and the uncompressed
    bytes all its entries declare, when ``directory`` (the central directory, at
    ``start_dir``; ``concat``: the bytes before the archive, added to every offset) is plain:
    see ``_speedups.c``. None when it is not, or the compiled part is not built."""
    if COMPILED is None:
        return None
    found: tuple[list[_Member], int] | None = COMPILED.plain_directory(
        directory, start_dir, concat, archive_size, member_type, unicode_path, entries
    )
    return found
