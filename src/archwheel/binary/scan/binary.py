"""Scan one binary: an ELF file, an ar archive, a cubin, a raw fatbin, or one wheel member.

One pass over the binary's bytes does all the work: the bytes are searched for the container
magic, each candidate is parsed by a small parser that asks only for the headers it needs, and
the ELF (or ar) layout is parsed alongside to say which section each container sits in. Device
code outside ``.nv_fatbin`` (cuBLASLt's ``.cask_resource``, cuFFT's ``.ldata`` ...) is found the
same way. Payloads are never decompressed: the entry headers say everything the audit reports.
Each container found becomes a ``FatbinContainer`` of the library, holding its entries.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from archwheel.binary import speedups
from archwheel.binary.elf import ELF_MAGIC, FormatError, Section
from archwheel.binary.fatbin import (
    CONTAINER_MAGIC_BYTES,
    ENTRY_HEADER_MIN,
    KNOWN_FLAGS,
    RawEntry,
    container_entries_size,
    entry_from_raw,
    entry_header,
    walk_entries,
)
from archwheel.binary.layout import (
    FATBIN_SECTIONS,
    NO_SECTION,
    RAW_FATBIN_SECTION,
    FileLayout,
    Note,
    Unit,
    layout_parser,
    sniff,
)
from archwheel.binary.model import (
    Compression,
    FatbinContainer,
    FatbinEntry,
    LibraryInventory,
    Origin,
    Problem,
    Severity,
)
from archwheel.binary.payload import MAX_DEEP_PAYLOAD, check_payload
from archwheel.binary.rawcubin import RawCubin, raw_cubin_parser
from archwheel.binary.stream import Need, Parser, ParserOutcome, StreamMux, WholeInput
from archwheel.binary.zipread import (
    LOCAL_SLACK,
    SMALL_MEMBER,
    Member,
    MemberError,
    member_chunks,
    small_member,
)
from archwheel.effects.files import check_regular, open_regular
from archwheel.facts.arch import CodeKind, Target, Variant
from archwheel.facts.catalog import load_facts
from archwheel.facts.versions import ComputeCapability

FILE_CHUNK = 4 << 20
# re's literal search is about twice as fast as bytes.find on binary code.
_MAGIC_RE = re.compile(re.escape(CONTAINER_MAGIC_BYTES))
_ELF_RE = re.compile(re.escape(ELF_MAGIC))
MAX_REPLAYS = 2
MAX_PROBLEMS_PER_LIBRARY = 20
# Gaps inside a fatbin section larger than this are bytes no valid container explains.
ALIGNMENT_SLACK = 16
# Bounds on what one binary's bytes can make the scanner hold (docs/design.md, "Bad input").
# Real libraries are far below them: torch 2.14.1's biggest library has 475 containers of a
# handful of entries each.
MAX_CONTAINERS = 1 << 16  # container candidates (magic hits) examined per binary
MAX_ENTRIES_PER_CONTAINER = 1 << 14
MAX_ENTRIES = 1 << 18  # entries per binary, all containers together
MAX_LIVE_PARSERS = 4096  # container parsers waiting for bytes at once
MAX_RAW_CUBINS = 1 << 16  # ELF magics (raw cubin candidates) examined per binary
# What --deep inflates for one binary, all payloads together: the larger of 1 GiB and 64x the
# binary's size (libtorch_cuda.so: 5.0 GiB from 479 MiB, 10.7x). Each payload alone is bounded
# (payload.MAX_DEEP_PAYLOAD), and a zstd frame of 64 MiB of zeros is 2 KB: thousands of them
# in a few MB would make `audit --deep` inflate terabytes (estimated, not run).
DEEP_INFLATION_FLOOR = 1 << 30
MAX_DEEP_INFLATION_RATIO = 64


def _deep_inflation_limit(size: int) -> int:
    """What --deep may inflate for ``size`` bytes of binaries (one binary, or one input's)."""
    return max(DEEP_INFLATION_FLOOR, MAX_DEEP_INFLATION_RATIO * size)


class _Budget:
    """What one binary's scan has spent of its bounds, and the limits it has hit (one note each)."""

    def __init__(self, size: int = 0) -> None:
        self.candidates = 0
        self.elf_candidates = 0
        self.entries = 0
        self.live = 0
        self.hit: dict[str, str] = {}
        self.inflation_limit = _deep_inflation_limit(size)
        self.inflated = 0  # bytes --deep's payloads may inflate to, declared, so far

    def limit(self, key: str, message: str) -> None:
        self.hit.setdefault(key, message)


@dataclass
class _ContainerScan:
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
    budget: _Budget,
    one: bool = False,
) -> tuple[int, _ContainerScan | None]:
    """Read the container's entries from ``position`` on while their headers lie in ``view``
    (first byte at ``base``); at most one with ``one``. Returns where it stopped and the finished
    scan, or None when the next header needs bytes past ``view`` (or ``one`` was read)."""
    view_end = base + len(view)
    while position < end:
        if position + ENTRY_HEADER_MIN > view_end:
            return position, None
        per_container = MAX_ENTRIES_PER_CONTAINER - len(headers)
        room = min(per_container, MAX_ENTRIES - budget.entries)
        before = len(headers)
        position, error = walk_entries(
            view, base, position, end, headers, room=min(room, 1) if one else room
        )
        budget.entries += len(headers) - before
        if error is not None:
            return position, _ContainerScan(offset, end, headers, error, position)
        if room <= 0 and position < end:  # the next header is valid but finds no room
            limit = (
                f"more than {MAX_ENTRIES_PER_CONTAINER} entries in one container"
                if per_container <= 0
                else f"more than {MAX_ENTRIES} fatbin entries in one binary"
            )
            message = f"container at {offset:#x}: {limit}; the rest are not read (limit)"
            return position, _ContainerScan(offset, end, headers, message, position)
        if one and position < end:
            return position, None
    return position, _ContainerScan(offset, end, headers, None)


def _at_hand(offset: int, chunk: bytes, base: int, budget: _Budget) -> _ContainerScan | None:
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


def _container_parser(
    offset: int, deep: bool = False, budget: _Budget | None = None, head: bytes = b""
) -> Parser:
    """Parse the container at ``offset``; ``head``: its 16 header bytes when already at hand.

    The entry headers are asked for with ``Need(..., more=True)``: inside the chunk at hand the
    answer is the rest of the chunk, and ``_walk`` takes every header it holds at once.
    """
    budget = budget or _Budget()
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
                entry = entry_header(*headers[-1])
                inflates = 0 if entry.compression is Compression.NONE else entry.uncompressed_size
                if entry.padded_size > MAX_DEEP_PAYLOAD:
                    payload_errors.append(f"entry at {entry.offset:#x}: payload too large to check")
                elif budget.inflated + inflates > budget.inflation_limit:
                    budget.limit(
                        "deep",
                        f"--deep: the payloads of this binary inflate to more than "
                        f"{budget.inflation_limit} bytes together (the larger of 1 GiB and "
                        f"{MAX_DEEP_INFLATION_RATIO}x its size); the rest are not checked",
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
                return _ContainerScan(
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


@dataclass
class BinaryScan:
    """The result of scanning one binary: its libraries and the problems met."""

    libraries: list[LibraryInventory] = field(default_factory=list)
    notes: list[tuple[str | None, Note]] = field(default_factory=list)  # (unit name, note)
    bytes_read: int = 0
    sha256: str | None = None  # hex, with ``digest``: of every byte, when all were read whole
    inflated: int = 0  # bytes --deep's payloads inflated to (as declared), all together


class InputInflation:
    """--deep's bound for one input (a wheel, a directory), all its binaries together: each
    binary is bounded alone (the larger of 1 GiB and 64x its size), and many small ones would
    still add up to terabytes."""

    def __init__(self, total_size: int) -> None:
        self.limit = _deep_inflation_limit(total_size)
        self.inflated = 0

    def passed_with(self, scan: BinaryScan) -> bool:
        """Count what ``scan`` inflated; True, and a note on ``scan``, when that passes the
        bound: the binaries scanned after it are not to be checked."""
        self.inflated += scan.inflated
        if self.inflated <= self.limit:
            return False
        scan.notes.append((None, Note(Severity.ERROR, (
            f"--deep: the payloads of this input inflate to more than {self.limit} bytes "
            f"together (the larger of 1 GiB and {MAX_DEEP_INFLATION_RATIO}x the size of its "
            "binaries); the binaries scanned after this one are not checked"
        ))))  # fmt: skip
        return True


def scan_stream(
    label: str,
    size: int,
    open_chunks: Callable[[], Iterator[bytes]],
    on_bytes: Callable[[int], None] | None = None,
    *,
    deep: bool = False,
    digest: bool = False,
) -> BinaryScan | None:
    """Scan one binary delivered as chunks; None when it is not a binary at all.

    ``digest``: also hash the bytes as they pass (``BinaryScan.sha256``, set only when every
    byte was read and the delivery raised nothing: for a wheel member, its CRC held).

    ``open_chunks`` must return a fresh iterator each call: a replay pass re-reads the input
    when a parser asks for bytes the first pass has already dropped. ``MemberError`` raised by
    the iterator is reported as a problem, and whatever was read before it is still reported.
    """
    chunks = open_chunks()
    result = BinaryScan()
    try:
        first = next(chunks, b"")
    except MemberError as exc:
        result.notes.append((None, Note(Severity.ERROR, str(exc))))
        return result
    kind = sniff(first)
    if kind is None:
        return None
    if kind != "fatbin" and not deep and size <= speedups.WHOLE_MAX and speedups.COMPILED:
        pieces, ended = _gathered(first, chunks, size)
        if ended is None:
            data = first if len(pieces) == 1 else b"".join(pieces)
            found = speedups.scan_whole(data, _bounds()) if len(data) == size else None
            if found is not None:
                _close(chunks)
                if on_bytes:
                    on_bytes(size)
                sha256 = hashlib.sha256(data).hexdigest() if digest else None
                return _whole(label, found, size, sha256)
        chunks = _again(pieces[1:], ended, chunks)
    outcomes: dict[object, ParserOutcome] = {}

    def done(outcome: ParserOutcome) -> None:
        outcomes[outcome.token] = outcome

    # A member that fits in its first chunk (most wheel members but the big libraries) is read
    # without the stream's queue: the same parsers, answered from the bytes at hand.
    mux: StreamMux | WholeInput = WholeInput(first, done) if len(first) == size else StreamMux(done)
    mux.add(layout_parser(kind, size), "layout")
    budget = _Budget(size)
    header_errors: list[tuple[int, str]] = []

    def candidate(start: int, chunk: bytes, at: int) -> None:
        """A container magic at absolute ``start`` (``at`` in ``chunk``, -1 when split)."""
        if budget.candidates >= MAX_CONTAINERS:
            budget.limit(
                "containers",
                f"more than {MAX_CONTAINERS} fatbin container candidates: "
                "the rest are not read (limit)",
            )
            return
        budget.candidates += 1
        head = b""
        if at >= 0 and at + 16 <= len(chunk):
            head = chunk[at : at + 16]
            try:  # most magics in code are not containers: no parser for them
                container_entries_size(head, start)
            except FormatError as exc:
                header_errors.append((start, str(exc)))
                return
        if head and not deep:
            scan = _at_hand(start, chunk, start - at, budget)
            if scan is not None:
                outcomes[start] = ParserOutcome(start, value=scan)
                return
        if budget.live >= MAX_LIVE_PARSERS:
            budget.limit(
                "live",
                f"more than {MAX_LIVE_PARSERS} fatbin containers nested in each other: "
                "the rest are not read (limit)",
            )
            return
        mux.add(_container_parser(start, deep, budget, head), start)

    def elf_candidate(start: int) -> None:
        """An ELF magic at absolute ``start``: perhaps a raw cubin (offset 0 is the file)."""
        if start == 0:
            return
        if budget.elf_candidates >= MAX_RAW_CUBINS:
            budget.limit(
                "raw-cubins",
                f"more than {MAX_RAW_CUBINS} embedded ELF headers: the rest are not read (limit)",
            )
            return
        budget.elf_candidates += 1
        mux.add(raw_cubin_parser(start), ("cubin", start))

    read_error: str | None = None
    tail = b""
    elf_tail = b""
    chunk = first
    hasher = hashlib.sha256() if digest else None
    try:
        while chunk:
            if hasher is not None:
                hasher.update(chunk)
            base = mux.position
            mux.ahead(chunk)  # containers inside this chunk are read as they are found
            if tail:
                joined = tail + chunk[:3]
                hit = joined.find(CONTAINER_MAGIC_BYTES)
                if 0 <= hit < len(tail):
                    candidate(base - len(tail) + hit, chunk, -1)
            if elf_tail:
                hit = (elf_tail + chunk[:3]).find(ELF_MAGIC)
                if 0 <= hit < len(elf_tail):
                    elf_candidate(base - len(elf_tail) + hit)
            for match in _ELF_RE.finditer(chunk):
                elf_candidate(base + match.start())
            elf_tail = chunk[-3:]
            fed = 0
            for match in _MAGIC_RE.finditer(chunk):
                hit = match.start()
                if budget.live >= MAX_LIVE_PARSERS and hit > fed:
                    # Let the parsers waiting so far read up to here: most of them finish.
                    mux.feed(chunk[fed:hit])
                    fed = hit
                candidate(base + hit, chunk, hit)
            mux.feed(chunk[fed:] if fed else chunk)
            result.bytes_read += len(chunk)
            if on_bytes:
                on_bytes(len(chunk))
            tail = chunk[-3:]
            chunk = next(chunks, b"")
    except MemberError as exc:
        read_error = str(exc)
    finally:
        _close(chunks)
    if hasher is not None and read_error is None and result.bytes_read == size:
        result.sha256 = hasher.hexdigest()
    mux.finish()
    replays = 0
    while mux.missed and read_error is None and replays < MAX_REPLAYS:
        replays += 1
        pending = mux.missed
        mux = StreamMux(done)
        for request in pending:
            mux.resume(request)
        replay = open_chunks()
        try:
            for piece in replay:
                mux.feed(piece)
                if not mux.wants_more():
                    break
        except MemberError as exc:
            read_error = str(exc)
        finally:
            _close(replay)
        mux.finish()
    if read_error:
        result.notes.append((None, Note(Severity.ERROR, read_error)))
    result.notes.extend((None, Note(Severity.ERROR, m)) for m in budget.hit.values())
    result.inflated = budget.inflated
    _assemble(label, kind, size, outcomes, result, header_errors=header_errors)
    return result


def _bounds() -> speedups.Bounds:
    """This module's bounds, as the compiled scan applies them (read at each call)."""
    return speedups.Bounds(MAX_CONTAINERS, MAX_ENTRIES_PER_CONTAINER, MAX_ENTRIES, MAX_RAW_CUBINS)


def _gathered(
    first: bytes, chunks: Iterator[bytes], size: int
) -> tuple[list[bytes], MemberError | None]:
    """Every chunk of a binary of ``size`` bytes, ``first`` included, and the ``MemberError``
    that ended them, if one did (a wheel member's CRC is checked after its last chunk)."""
    pieces = [first]
    total = len(first)
    try:
        while total <= size:
            piece = next(chunks, b"")
            if not piece:
                break
            pieces.append(piece)
            total += len(piece)
    except MemberError as exc:
        return pieces, exc
    return pieces, None


def _again(
    pieces: list[bytes], pending: MemberError | None, rest: Iterator[bytes]
) -> Iterator[bytes]:
    """The chunks ``_gathered`` took, its error, then the rest: for the Python scan."""
    try:
        yield from pieces
        if pending is not None:
            raise pending
        yield from rest
    finally:
        _close(rest)


def _whole(
    label: str, found: list[speedups.Unit], size: int, sha256: str | None = None
) -> BinaryScan:
    """The scan of a binary of ``size`` bytes the compiled scan read whole (``scan_whole``)."""
    return BinaryScan(
        libraries=[
            LibraryInventory(
                f"{label}({name})" if name else label, file_kind, unit_size, entries, containers
            )
            for name, file_kind, unit_size, containers, entries in found
        ],
        bytes_read=size,
        sha256=sha256,
    )


def _close(chunks: Iterator[bytes]) -> None:
    """Close a chunk generator early (its file handle), whatever kind of iterator it is."""
    close = getattr(chunks, "close", None)
    if close:
        close()


def _assemble(
    label: str,
    kind: str,
    size: int,
    outcomes: dict[object, ParserOutcome],
    result: BinaryScan,
    *,
    header_errors: list[tuple[int, str]],
) -> None:
    layout_outcome = outcomes.pop("layout", None)
    layout: FileLayout
    if layout_outcome is None or layout_outcome.error is not None or layout_outcome.value is None:
        why = layout_outcome.error if layout_outcome else "its structure could not be read"
        result.notes.append((None, Note(Severity.ERROR, f"layout unreadable: {why}")))
        layout = FileLayout(kind, (Unit("", 0, size, "unknown"),))
    else:
        layout = layout_outcome.value
    result.notes.extend((None, n) for n in layout.problems)

    scans: list[_ContainerScan] = []
    raw_cubins: list[RawCubin] = []
    for token, outcome in outcomes.items():
        if isinstance(token, tuple):
            if isinstance(outcome.value, RawCubin):
                raw_cubins.append(outcome.value)
            continue  # None: no cubin there; a read error: the bytes ended (not a cubin)
        if not isinstance(token, int):
            continue
        if isinstance(outcome.value, _ContainerScan):
            scans.append(outcome.value)
        elif isinstance(outcome.error, FormatError):
            header_errors.append((token, str(outcome.error)))
        elif outcome.error is not None:
            message = f"internal error reading the container at {token:#x}: {outcome.error!r}"
            result.notes.append((None, Note(Severity.ERROR, message)))
    scans.sort(key=lambda s: s.offset)

    per_unit: dict[str, list[FatbinEntry]] = {u.name: [] for u in layout.units}
    per_unit_containers: dict[str, list[FatbinContainer]] = {u.name: [] for u in layout.units}
    covered: dict[tuple[str, int], list[tuple[int, int]]] = {}
    unit_notes: dict[str, list[Note]] = {u.name: list(u.problems) for u in layout.units}
    accepted_end = -1
    accepted_spans: list[tuple[int, int]] = []
    unit: Unit | None = None
    section: Section | None = None
    for scan in scans:
        if scan.offset < accepted_end:
            continue  # inside an accepted container's payload: data, not a container
        # Containers follow on in one section: the last lookup answers most of them.
        if section is None or not section.offset <= scan.offset < section.end:
            unit = layout.unit_at(scan.offset)
            if unit is None:
                continue
            section = unit.section_at(scan.offset)
        elif unit is None:
            continue
        name = section.name if section else NO_SECTION
        meant = name in FATBIN_SECTIONS or name == RAW_FATBIN_SECTION
        if scan.error and not scan.headers and not meant:
            continue  # random bytes that happened to hold the magic
        notes = unit_notes[unit.name]
        limit = section.end if section else unit.end
        if scan.end > limit:
            notes.append(
                Note(
                    Severity.ERROR,
                    f"container at {scan.offset - unit.start:#x} in {name} declares "
                    f"{scan.end - scan.offset - 16} bytes of entries but only "
                    f"{max(0, limit - scan.offset - 16)} remain in the section",
                )
            )
        if scan.error and scan.error_at < limit:
            notes.append(Note(Severity.ERROR, f"in {name}: {_relative(scan.error, unit)}"))
        if scan.payload_errors:
            notes.extend(
                Note(Severity.ERROR, f"in {name}: {_relative(e, unit)}")
                for e in scan.payload_errors
            )
        shift = unit.start
        kept = tuple(
            [
                entry_from_raw(h, name, shift)
                for h in scan.headers
                if h[0] + h[1][2] + h[1][3] <= limit  # the entry's end
            ]
        )
        per_unit[unit.name] += kept
        per_unit_containers[unit.name].append(
            FatbinContainer(name, scan.offset - unit.start, scan.end - scan.offset, kept)
        )
        accepted_end = min(scan.end, limit)
        accepted_spans.append((scan.offset, accepted_end))
        if section is not None:
            covered.setdefault((unit.name, section.offset), []).append((scan.offset, accepted_end))

    # Whether an offset lies inside some container: the furthest end of those starting before.
    scan_starts = [s.offset for s in scans] if header_errors else []
    furthest = list(itertools.accumulate((s.end for s in scans), max)) if header_errors else []
    for offset, message in sorted(header_errors):
        i = bisect.bisect_right(scan_starts, offset) - 1
        if offset < accepted_end and i >= 0 and offset < furthest[i]:
            continue
        unit = layout.unit_at(offset)
        section = unit.section_at(offset) if unit else None
        if unit is not None and section is not None and section.name in FATBIN_SECTIONS:
            notes = unit_notes[unit.name]
            notes.append(Note(Severity.ERROR, f"in {section.name}: {_relative(message, unit)}"))

    _place_raw_cubins(raw_cubins, accepted_spans, layout, per_unit, unit_notes)

    for unit in layout.units:
        notes = unit_notes[unit.name]
        for section in unit.sections:
            if section.name not in FATBIN_SECTIONS and section.name != RAW_FATBIN_SECTION:
                continue
            gap = _uncovered(section.offset, section.end, covered.get((unit.name, section.offset)))
            if gap > ALIGNMENT_SLACK:
                notes.append(
                    Note(
                        Severity.ERROR,
                        f"{gap} bytes of {section.name} are not inside any valid fatbin "
                        "container (damaged container header?)",
                    )
                )
        entries = per_unit[unit.name]
        if unit.file_kind == "cubin" and unit.cubin_sm:
            entries.append(_cubin_entry(unit))
            notes.append(
                Note(
                    Severity.WARNING,
                    "standalone cubin: its ELF header does not record an 'a'/'f' suffix, "
                    f"reported as sm_{unit.cubin_sm}",
                )
            )
        unknown = Counter(e.flags & ~KNOWN_FLAGS for e in entries if e.flags & ~KNOWN_FLAGS)
        for bits, count in sorted(unknown.items()):
            notes.append(
                Note(
                    Severity.ERROR,
                    f"unknown fatbin flag bits {bits:#x} on {count} entries: reported as read, "
                    "but their meaning is unknown to this archwheel version",
                )
            )
        path = label if not unit.name else f"{label}({unit.name})"
        result.libraries.append(
            LibraryInventory(
                path=path,
                file_kind=unit.file_kind,
                size=unit.end - unit.start,
                entries=tuple(sorted(entries, key=lambda e: e.offset)),
                containers=tuple(per_unit_containers[unit.name]),
            )
        )
        result.notes.extend((unit.name or None, n) for n in _limit(notes))


def _place_raw_cubins(
    found: list[RawCubin],
    spans: list[tuple[int, int]],
    layout: FileLayout,
    per_unit: dict[str, list[FatbinEntry]],
    unit_notes: dict[str, list[Note]],
) -> None:
    """Raw cubins become entries of their unit, unless they are not raw at all.

    Skipped: an ELF header at a unit's start (the file or archive member itself), one inside a
    fatbin container (an uncompressed entry's payload: already counted as that entry), one
    inside a raw cubin already taken. A damaged EM_CUDA header, or a cubin that runs past its
    section, is an error of the unit and is not counted.
    """
    if not found:
        return
    spans = sorted(spans)
    starts = [a for a, _ in spans]
    furthest = list(itertools.accumulate((b for _, b in spans), max))
    taken_end = -1
    suffixed = load_facts().suffixed_capabilities
    unsure: dict[str, list[str]] = {}  # unit -> archs whose 'a'/'f' suffix is unknown
    for cubin in sorted(found, key=lambda c: c.offset):
        unit = layout.unit_at(cubin.offset)
        if unit is None or cubin.offset == unit.start or cubin.offset < taken_end:
            continue
        i = bisect.bisect_right(starts, cubin.offset) - 1
        if i >= 0 and cubin.offset < furthest[i]:
            continue
        section = unit.section_at(cubin.offset)
        name = section.name if section else NO_SECTION
        where = f"raw cubin at {cubin.offset - unit.start:#x} in {name}"
        notes = unit_notes[unit.name]
        if cubin.error:
            notes.append(Note(Severity.ERROR, f"{where}: damaged ELF cubin ({cubin.error})"))
            continue
        limit = section.end if section else unit.end
        if cubin.offset + cubin.size > limit:
            notes.append(
                Note(
                    Severity.ERROR,
                    f"{where} spans {cubin.size} bytes but only "
                    f"{limit - cubin.offset} remain in the section: truncated, not counted",
                )
            )
            continue
        taken_end = cubin.offset + cubin.size
        cc = ComputeCapability.from_number(cubin.sm)
        if not cubin.suffix_known and cc in suffixed:
            unsure.setdefault(unit.name, []).append(f"sm_{cubin.sm}")
        per_unit[unit.name].append(
            FatbinEntry(
                section=name,
                offset=cubin.offset - unit.start,
                kind=CodeKind.SASS,
                target=Target(cc, Variant(cubin.suffix)),
                compression=Compression.NONE,
                stored_bytes=cubin.size,
                uncompressed_bytes=cubin.size,
                origin=Origin.RAW_CUBIN,
            )
        )
    for name, archs in unsure.items():
        shown = ", ".join(sorted(set(archs), key=lambda a: int(a[3:])))
        unit_notes[name].append(
            Note(
                Severity.WARNING,
                f"{len(archs)} raw cubins ({shown}) record no 'a'/'f' suffix (neither e_flags "
                "nor a ptxas note says it): reported plain",
            )
        )


def _relative(message: str, unit: Unit) -> str:
    return message if not unit.start else f"{message} (offsets in the archive)"


def _cubin_entry(unit: Unit) -> FatbinEntry:
    assert unit.cubin_sm is not None
    size = unit.end - unit.start
    return FatbinEntry(
        section="(cubin)",
        offset=0,
        kind=CodeKind.SASS,
        target=Target(ComputeCapability.from_number(unit.cubin_sm), Variant.PLAIN),
        compression=Compression.NONE,
        stored_bytes=size,
        uncompressed_bytes=size,
        origin=Origin.CUBIN_FILE,
    )


def _uncovered(start: int, end: int, spans: list[tuple[int, int]] | None) -> int:
    covered = 0
    cursor = start
    for span_start, span_end in sorted(spans or []):
        lo, hi = max(span_start, cursor), min(span_end, end)
        if hi > lo:
            covered += hi - lo
            cursor = hi
    return (end - start) - covered


def _limit(notes: list[Note]) -> list[Note]:
    unique = list(dict.fromkeys(notes))
    if len(unique) <= MAX_PROBLEMS_PER_LIBRARY:
        return unique
    rest = len(unique) - MAX_PROBLEMS_PER_LIBRARY
    severity = (
        Severity.ERROR if any(n.severity is Severity.ERROR for n in unique) else (Severity.WARNING)
    )
    return [*unique[:MAX_PROBLEMS_PER_LIBRARY], Note(severity, f"... and {rest} more problems")]


def problems_of(source: str, member: str | None, scan: BinaryScan) -> list[Problem]:
    """The scan's notes as problems of ``source``, placed at ``member`` (and its unit)."""
    out = []
    for unit, note in scan.notes:
        where = member
        if unit:
            where = f"{member}({unit})" if member else unit
        out.append(Problem(source, note.message, member=where, severity=note.severity))
    return out


def file_chunks(path: Path, size: int | None = None) -> Callable[[], Iterator[bytes]]:
    """A file's bytes as ``scan_stream`` wants them: a fresh chunk iterator per call.

    Only regular files are opened (``NotRegularFile`` for FIFOs, devices, /proc); at most
    ``size`` bytes are read (the size the scan was told), so a file that grows is not followed.
    """

    def open_chunks() -> Iterator[bytes]:
        left = size if size is not None else -1
        with open_regular(path) as fh:
            first = fh.read(64 << 10 if left < 0 else min(left, 64 << 10))
            if not first:
                return
            left -= len(first)
            yield first
            while left:
                block = fh.read(FILE_CHUNK if left < 0 else min(left, FILE_CHUNK))
                if not block:
                    return
                left -= len(block)
                yield block

    return open_chunks


def scan_bytes(name: str, data: bytes, *, deep: bool = False) -> LibraryInventory:
    """Scan an in-memory binary (tests, fuzzing). Problems are dropped; see ``scan_bytes_full``."""
    libraries, _ = scan_bytes_full(name, data, deep=deep)
    if not libraries:
        return LibraryInventory(path=name, file_kind="not-a-binary", size=len(data))
    return libraries[0]


def scan_bytes_full(
    name: str, data: bytes, *, deep: bool = False
) -> tuple[list[LibraryInventory], list[Problem]]:
    """Scan an in-memory binary; every library (one per archive member) and every problem."""

    def open_chunks() -> Iterator[bytes]:
        view = memoryview(data)
        for i in range(0, len(data), FILE_CHUNK):
            yield bytes(view[i : i + FILE_CHUNK])

    scan = scan_stream(name, len(data), open_chunks, deep=deep)
    if scan is None:
        return [], []
    return scan.libraries, problems_of(name, None, scan)


def scan_file(
    path: Path, label: str | None = None, *, deep: bool = False
) -> tuple[list[LibraryInventory], list[Problem]]:
    """Scan one file on disk. Not a binary: no libraries and no problem."""
    shown = label or str(path)
    try:
        status = path.stat()
        check_regular(path, status)
        scan = scan_stream(shown, status.st_size, file_chunks(path, status.st_size), deep=deep)
    except OSError as exc:
        return [], [Problem(shown, f"cannot read: {exc.strerror or exc}")]
    if scan is None:
        return [], []
    return scan.libraries, problems_of(shown, None, scan)


MemberResult = tuple[BinaryScan | None, str | None]
"""A wheel member's scan, or the message that replaces it when the scanner failed."""


def scan_member(
    path: Path,
    archive_size: int,
    member: Member,
    on_bytes: Callable[[int], None] | None,
    deep: bool = False,
    *,
    digest: bool = False,
    handle: BinaryIO | None = None,
    read: bytes | None = None,
) -> MemberResult:
    """Scan one wheel member; a crash in the scanner becomes a message, never an exception.

    ``handle``: the archive already open (the in-process scans of one wheel share it);
    ``digest``: as ``scan_stream``'s; ``read``: the member's bytes, already read whole and
    sound (``scan_small_members``).
    """
    try:
        data = read
        if data is None and handle is not None:
            data = small_member(handle.fileno(), archive_size, member)
        if data is None:
            scan = scan_stream(
                member.name,
                member.size,
                lambda: member_chunks(path, archive_size, member, handle=handle),
                on_bytes,
                deep=deep,
                digest=digest,
            )
        else:  # read whole, and sound: scanned from the bytes at hand
            whole = data
            scan = scan_stream(
                member.name, member.size, lambda: iter((whole,)), on_bytes, deep=deep, digest=digest
            )
    except Exception as exc:  # a bug must not lose the rest of the wheel
        return None, f"internal error: {type(exc).__name__}: {exc}"
    return scan, None


def small_enough(member: Member) -> bool:
    """Whether ``scan_small_members`` takes the member (both its sizes at most 64 KiB)."""
    return member.size <= SMALL_MEMBER and member.compressed_size <= SMALL_MEMBER


_NO_BINARY: MemberResult = (None, None)


def scan_small_members(
    path: Path,
    archive_size: int,
    members: Sequence[Member],
    on_bytes: Callable[[int], None] | None,
    *,
    handle: BinaryIO,
) -> list[MemberResult]:
    """What ``scan_member`` returns for each of ``members`` (small ones, ``small_enough``; no
    --deep, no digest), all read through ``handle`` in one compiled call where it is built
    (``speedups.scan_members``: 2.3 us a member of 424 B, against 12 us for ``scan_member``,
    docs/performance.md). A member it leaves, or finds bytes in that only the Python scan
    reads, goes through ``scan_member`` as before, so results and problems are the same."""
    try:
        answers = speedups.scan_members(
            handle.fileno(),
            archive_size,
            members,
            small_max=SMALL_MEMBER,
            slack=LOCAL_SLACK,
            bounds=_bounds(),
        )
    except Exception:  # a bug in the compiled part: each member is read as before
        answers = None
    if answers is None:
        return [scan_member(path, archive_size, m, on_bytes, handle=handle) for m in members]
    results: list[MemberResult] = []
    scanned = 0
    for member, answer in zip(members, answers, strict=True):
        if answer is None:
            results.append(scan_member(path, archive_size, member, on_bytes, handle=handle))
        elif answer is False:
            results.append(_NO_BINARY)
        elif isinstance(answer, bytes):
            results.append(scan_member(path, archive_size, member, on_bytes, read=answer))
        else:
            results.append((_whole(member.name, answer, member.size), None))
            scanned += member.size
    if on_bytes and scanned:
        on_bytes(scanned)
    return results
