"""The loader's view of a wheel's shared libraries, read from the zip without extracting it.

A wheel member is a deflate stream, so ``read_member_dynamic`` streams it once and keeps only the
ranges ``dynamic.parse_dynamic`` needs (``.dynsym`` sits at the start of a library, ``.dynamic``
after the code, and patchelf moves ``.dynstr`` to the end, as in torch's own libraries): memory
stays bounded by the tables' sizes (at most ``MAX_TABLE`` each, plus a ``PREFIX_LIMIT`` prefix),
and a range the first pass could not know in time is fetched by a second pass that stops at its
end. ``read_wheel_dynamic`` reads every library of a wheel, the large ones in worker processes,
with the symbols kept for the whole wheel bounded (``dynamic.MAX_SYMBOLS_PER_INPUT``).
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import os
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from archwheel.binary import speedups
from archwheel.binary.dynamic import (
    DT_GNU_HASH,
    DT_HASH,
    DT_STRSZ,
    DT_STRTAB,
    DT_SYMTAB,
    DT_VERDEF,
    DT_VERNEED,
    DT_VERSYM,
    MAX_DYNAMIC_ENTRIES,
    MAX_SYMBOLS_PER_INPUT,
    MAX_TABLE,
    DynamicInfo,
    Missing,
    Segment,
    SymbolBudget,
    dynamic_entries,
    is_library_member,
    parse_dynamic,
    program_headers,
    segment_end,
    to_offset,
)
from archwheel.binary.elf import FormatError, parse_elf_header
from archwheel.binary.zipmember import Member, MemberError, member_chunks
from archwheel.binary.zipread import Source, WheelReader

WHOLE_LIMIT = 32 << 20  # a member up to this size is inflated into memory in one piece
PREFIX_LIMIT = 16 << 20  # of a larger member, its first 16 MiB are kept (.dynsym sits there)
MAX_PASSES = 6

# -- one member, streamed once ------------------------------------------------------------------


class _Capture:
    """Byte ranges kept from a stream; ``read`` answers from them or raises ``Missing``."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.pieces: list[bytes] = []

    def add(self, start: int, data: bytes) -> None:
        i = bisect.bisect_left(self.starts, start)
        self.starts.insert(i, start)
        self.pieces.insert(i, data)

    def read(self, offset: int, length: int) -> bytes:
        i = bisect.bisect_right(self.starts, offset) - 1
        # several pieces may start before offset: the latest that covers the range wins
        while i >= 0:
            start, piece = self.starts[i], self.pieces[i]
            if offset + length <= start + len(piece):
                return piece[offset - start : offset - start + length]
            i -= 1
        raise Missing(offset, length)


def _stream_ranges(
    chunks: Iterator[bytes],
    ranges: list[tuple[int, int]],
    capture: _Capture,
    on_chunk: Callable[[int], list[tuple[int, int]]] | None = None,
    more: Callable[[], bool] = lambda: False,
) -> None:
    """Stream once; keep every byte of ``ranges``, which ``on_chunk(position)`` may extend
    with ranges still ahead; stop when nothing is pending and ``more()`` says none will come."""
    pending: list[tuple[int, int, list[bytes]]] = [(lo, hi, []) for lo, hi in ranges if hi > lo]
    pos = 0
    for chunk in chunks:
        end = pos + len(chunk)
        still: list[tuple[int, int, list[bytes]]] = []
        for lo, hi, parts in pending:
            if lo < end and hi > pos:
                parts.append(chunk[max(lo, pos) - pos : min(hi, end) - pos])
            if hi <= end:
                capture.add(lo, b"".join(parts))
            else:
                still.append((lo, hi, parts))
        pending = still
        pos = end
        if on_chunk is not None:
            pending.extend((lo, hi, []) for lo, hi in on_chunk(end) if hi > lo >= end)
        if not pending and not more():
            return
    for lo, _hi, parts in pending:  # end of stream: keep what exists
        capture.add(lo, b"".join(parts))


def read_member_dynamic(path: Path, archive_size: int, member: Member) -> DynamicInfo:
    """The loader's view of one member of the wheel at ``path``, streamed; bounded memory (see
    the module doc)."""
    return read_dynamic(lambda: member_chunks(path, archive_size, member), member.size, member.name)


def read_dynamic(
    chunks: Callable[[], Iterator[bytes]], size: int, name: str, *, whole_limit: int = WHOLE_LIMIT
) -> DynamicInfo:
    """The loader's view of one ELF file of ``size`` bytes delivered by ``chunks`` (a fresh
    iterator of its bytes in order at each call, raising ``MemberError`` on a defect: a wheel
    member's ``WheelReader.chunks``, or ``zipmember.member_chunks_at`` over any ``pread``, such
    as HTTP range requests). A stream is taken only as far as the last range the loader's
    tables need: of a member read over the network, the compressed bytes past it are never
    fetched. ``whole_limit``: a file up to this size is taken whole in one piece (faster from a
    local file; 0 streams every file and stops at the last range needed). Bounded memory (see
    the module doc)."""
    try:
        if size <= whole_limit:
            data = b"".join(chunks())
            return parse_dynamic(lambda o, n: data[o : o + n], size, name)
        capture = _Capture()
        head = min(size, 64 << 10)
        state: dict[str, object] = {}

        def on_chunk(end: int) -> list[tuple[int, int]]:
            if "dyn" not in state:
                if end < head:
                    return []
                # The program headers say where PT_DYNAMIC is: keep it when the stream passes.
                state["dyn"] = None
                try:
                    _is64, loads, dyn = program_headers(capture.read, size)
                except (FormatError, Missing, struct.error):
                    state["tables"] = True
                    return []
                state["loads"] = loads
                state["dyn"] = dyn
                if dyn is None:
                    state["tables"] = True
                    return []
                return [(dyn.offset, dyn.offset + min(dyn.filesz, 16 * MAX_DYNAMIC_ENTRIES))]
            seen = state["dyn"]
            if "tables" in state or not isinstance(seen, Segment):
                return []
            if end < seen.offset + seen.filesz:
                return []
            state["tables"] = True
            return _ahead_ranges(capture, size, seen, state.get("loads"))

        _stream_ranges(
            chunks(),
            [(0, head), (0, min(size, PREFIX_LIMIT))],
            capture,
            on_chunk,
            lambda: "tables" not in state,
        )
        for _ in range(MAX_PASSES):
            try:
                return parse_dynamic(capture.read, size, name)
            except Missing as miss:
                lo = miss.offset
                hi = min(size, max(miss.offset + miss.length, miss.offset + (1 << 20)))
                _stream_ranges(chunks(), [(lo, hi)], capture)
        return DynamicInfo(
            name, size, "shared-object", True, problems=("tables scattered too widely",)
        )
    except MemberError as exc:
        return DynamicInfo(name, size, "unreadable", problems=(str(exc),))


def _ahead_ranges(
    capture: _Capture, size: int, dyn: Segment, loads: object
) -> list[tuple[int, int]]:
    """Once PT_DYNAMIC is read: the tables it names that still lie ahead (patchelf layouts)."""
    if not isinstance(loads, list):
        return []
    try:
        head = parse_elf_header(capture.read(0, 64))
        entries = dynamic_entries(capture.read, size, head.is64, dyn)
    except (FormatError, Missing, struct.error):
        return []
    tags: dict[int, int] = {}
    for tag, value in entries:
        tags.setdefault(tag, value)
    out: list[tuple[int, int]] = []
    for tag in (DT_STRTAB, DT_GNU_HASH, DT_HASH, DT_SYMTAB, DT_VERSYM, DT_VERNEED, DT_VERDEF):
        if tag not in tags:
            continue
        try:
            off = to_offset(loads, tags[tag], "table")
        except FormatError:
            continue
        if tag == DT_STRTAB and DT_STRSZ in tags:
            end = off + min(tags[DT_STRSZ], MAX_TABLE)
        else:
            end = min(segment_end(loads, off), off + MAX_TABLE)
        out.append((off, min(end, size)))
    return out


# -- a whole wheel -----------------------------------------------------------------------------

PARALLEL_MIN_BYTES = 16 << 20  # members inflating to more than this go to worker processes


def _member_job(args: tuple[Path, int, Member]) -> DynamicInfo:
    return read_member_dynamic(*args)


def read_wheel_dynamic(
    path: Path,
    workers: int | None = None,
    *,
    max_symbols: int = MAX_SYMBOLS_PER_INPUT,
    source: Source | None = None,
) -> tuple[DynamicInfo, ...]:
    """Every shared library of a wheel (member order), read as ``read_member_dynamic`` does.

    Large members are read by forked worker processes (the inflater holds the GIL) where fork
    is safe (POSIX, this process single-threaded); elsewhere one after the other. The symbols
    kept for all of them together are bounded by ``max_symbols`` (the small members in member
    order, then the large ones, largest first).
    """
    if source is None:
        return read_wheels_dynamic([path], workers, max_symbols=max_symbols)[0]
    # Read over the network: one member after the other, in this process.
    reader = WheelReader(path, source=source)
    budget = SymbolBudget(max_symbols)
    return tuple(
        budget.admit(
            read_dynamic(functools.partial(reader.chunks, m), m.size, m.name, whole_limit=0)
        )
        for m in reader.members
        if is_library_member(m.name)
    )


def read_wheels_dynamic(
    paths: Sequence[Path],
    workers: int | None = None,
    *,
    max_symbols: int = MAX_SYMBOLS_PER_INPUT,
    while_waiting: Callable[[], None] | None = None,
) -> list[tuple[DynamicInfo, ...]]:
    """``read_wheel_dynamic`` of several local wheels at once: one pool of workers takes the
    large members of all of them, largest first, while this process reads the small ones (an
    extension's libraries are read while torch's inflate: can-load of torchvision against torch
    1.14-1.24 -> 0.9 s, docs/maintainers/performance.md). Each wheel's symbols are bounded on their
    own, in the order ``read_wheel_dynamic`` admits them. ``while_waiting``: the caller's other
    work, called once, when the workers have their members (or before the reading, without them)."""
    from concurrent.futures import Future, ProcessPoolExecutor

    readers = [WheelReader(path) for path in paths]
    members = [[m for m in r.members if is_library_member(m.name)] for r in readers]
    big = sorted(
        ((i, m) for i, found in enumerate(members) for m in found if m.size > PARALLEL_MIN_BYTES),
        key=lambda item: -item[1].size,
    )
    count = workers if workers is not None else min(4, os.cpu_count() or 1)
    results: list[dict[str, DynamicInfo]] = [{} for _ in paths]
    budgets = [SymbolBudget(max_symbols) for _ in paths]
    futures: list[tuple[int, str, Future[DynamicInfo]]] = []
    with contextlib.ExitStack() as stack:
        if big and count > 1 and hasattr(os, "fork") and threading.active_count() == 1:
            import multiprocessing

            pool = stack.enter_context(
                ProcessPoolExecutor(
                    max_workers=min(count, len(big)),
                    mp_context=multiprocessing.get_context("fork"),
                    # A worker only reads, then ends: it keeps the memory it frees (each chunk
                    # would be faulted in again otherwise: docs/maintainers/performance.md, Audit).
                    initializer=speedups.retain_freed_memory,
                )
            )
            futures = [
                (i, m.name, pool.submit(_member_job, (paths[i], readers[i].archive_size, m)))
                for i, m in big
            ]
        if while_waiting is not None:
            while_waiting()
        sent = {(i, name) for i, name, _ in futures}
        for i, found in enumerate(members):
            for m in found:
                if (i, m.name) not in sent:
                    results[i][m.name] = budgets[i].admit(
                        read_member_dynamic(paths[i], readers[i].archive_size, m)
                    )
        for i, name, future in futures:
            results[i][name] = budgets[i].admit(future.result())
    return [tuple(results[i][m.name] for m in found) for i, found in enumerate(members)]
