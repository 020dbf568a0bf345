"""Read one fatbin container: its 16-byte header, then each 64-byte entry header.

Inside the chunk at hand a container is read at once (``container_at_hand``): most containers
of most binaries lie inside one chunk, and need no parser, no request and no queue. One that
runs past the chunk (or any container under ``--deep``, whose payloads are checked) gets a
``container_parser``, a ``stream.Parser`` that asks for the bytes it needs. Both read the
headers with ``fatbin.walk_entries`` and count what they read against the binary's
``Budget``; the result is a ``ContainerScan``, placed in its library by ``assemble``.
"""

from __future__ import annotations

from dataclasses import dataclass

from archwheel.binary.fatbin import (
    ENTRY_HEADER_MIN,
    RawEntry,
    container_entries_size,
    entry_header,
    walk_entries,
)
from archwheel.binary.model import Compression
from archwheel.binary.scan import bounds
from archwheel.binary.scan.bounds import Budget
from archwheel.binary.stream import Need, Parser


@dataclass
class ContainerScan:
    """One container as read: where it lies, its entry headers, and what stopped the reading."""

    offset: int
    end: int
    headers: list[RawEntry]
    error: str | None
    error_at: int = 0  # where the error was met
    payload_errors: tuple[str, ...] = ()  # --deep: payloads that disagree with their headers


def _walk(
    offset: int,
    end: int,
    position: int,
    headers: list[RawEntry],
    view: bytes | memoryview,
    *,
    base: int,
    budget: Budget,
    one: bool = False,
) -> tuple[int, ContainerScan | None]:
    """Read the container's entries from ``position`` on while their headers lie in ``view``
    (first byte at ``base``); at most one with ``one``. Returns where it stopped and the finished
    scan, or None when the next header needs bytes past ``view`` (or ``one`` was read)."""
    view_end = base + len(view)
    while position < end:
        if position + ENTRY_HEADER_MIN > view_end:
            return position, None
        per_container = bounds.MAX_ENTRIES_PER_CONTAINER - len(headers)
        room = min(per_container, bounds.MAX_ENTRIES - budget.entries)
        before = len(headers)
        position, error = walk_entries(
            view, base, position, end, headers, room=min(room, 1) if one else room
        )
        budget.entries += len(headers) - before
        if error is not None:
            return position, ContainerScan(offset, end, headers, error, position)
        if room <= 0 and position < end:  # the next header is valid but finds no room
            limit = (
                f"more than {bounds.MAX_ENTRIES_PER_CONTAINER} entries in one container"
                if per_container <= 0
                else f"more than {bounds.MAX_ENTRIES} fatbin entries in one binary"
            )
            message = f"container at {offset:#x}: {limit}; the rest are not read (limit)"
            return position, ContainerScan(offset, end, headers, message, position)
        if one and position < end:
            return position, None
    return position, ContainerScan(offset, end, headers, None)


def container_at_hand(offset: int, chunk: bytes, base: int, budget: Budget) -> ContainerScan | None:
    """The container at ``offset`` read straight from ``chunk`` (first byte at ``base``) when
    it lies in it whole, as its parser would read it; None: it needs a parser (and more bytes).

    Most containers of most binaries lie inside one chunk: no parser, no request, no queue.
    """
    end = offset + 16 + container_entries_size(chunk[offset - base : offset - base + 16], offset)
    if end > base + len(chunk):
        return None
    headers: list[RawEntry] = []
    _, scan = _walk(offset, end, offset + 16, headers, chunk, base=base, budget=budget)
    if scan is None:  # a header that would need bytes past the container: let a parser say it
        budget.entries -= len(headers)
    return scan


def container_parser(
    offset: int, deep: bool = False, budget: Budget | None = None, head: bytes = b""
) -> Parser:
    """Parse the container at ``offset``; ``head``: its 16 header bytes when already at hand.

    The entry headers are asked for with ``Need(..., more=True)``: inside the chunk at hand the
    answer is the rest of the chunk, and ``_walk`` takes every header it holds at once.
    """
    budget = budget or Budget()
    budget.live += 1
    try:
        raw = head if len(head) == 16 else (yield Need(offset, 16))
        end = offset + 16 + container_entries_size(raw, offset)  # FormatError: not a container
        headers: list[RawEntry] = []
        payload_errors: list[str] = []
        position = offset + 16
        view: bytes | memoryview = b""
        base = position
        while True:
            before = len(headers)
            position, scan = _walk(
                offset, end, position, headers, view, base=base, budget=budget, one=deep
            )
            if deep and len(headers) > before:
                # --deep only: the payload checks import zstandard and lz4
                from archwheel.binary.payload import MAX_DEEP_PAYLOAD, check_payload

                entry = entry_header(*headers[-1])
                inflates = 0 if entry.compression is Compression.NONE else entry.uncompressed_size
                if entry.padded_size > MAX_DEEP_PAYLOAD:
                    payload_errors.append(f"entry at {entry.offset:#x}: payload too large to check")
                elif budget.inflated + inflates > budget.inflation_limit:
                    budget.limit(
                        "deep",
                        f"--deep: the payloads of this binary inflate to more than "
                        f"{budget.inflation_limit} bytes together (the larger of 1 GiB and "
                        f"{bounds.MAX_DEEP_INFLATION_RATIO}x its size); the rest are not checked",
                    )
                else:
                    budget.inflated += inflates
                    payload = yield Need(entry.payload_start, entry.padded_size)
                    problem = check_payload(entry, payload)
                    if problem:
                        payload_errors.append(problem)
            if scan is not None:
                scan.payload_errors = tuple(payload_errors)
                return scan
            view = yield Need(position, ENTRY_HEADER_MIN, more=True)
            base = position
            if len(view) < ENTRY_HEADER_MIN:
                return ContainerScan(
                    offset,
                    end,
                    headers,
                    f"container at {offset:#x} declares {end - offset - 16} bytes but the "
                    f"file ends inside it (entry at {position:#x})",
                    position,
                    tuple(payload_errors),
                )
    finally:
        budget.live -= 1
