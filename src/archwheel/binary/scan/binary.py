"""Scan one binary: an ELF file, an ar archive, a cubin, a raw fatbin, or one wheel member.

One pass over the binary's bytes does all the work (``scan_stream``): the bytes are searched for
the container magic, each candidate is parsed by a small parser that asks only for the headers
it needs (``containers``), and the ELF (or ar) layout is parsed alongside to say which section
each container sits in; ``assemble`` then places each container found in its library as a
``FatbinContainer`` holding its entries. Device code outside ``.nv_fatbin`` (cuBLASLt's
``.cask_resource``, cuFFT's ``.ldata`` ...) is found the same way. Payloads are never
decompressed: the entry headers say everything the audit reports. What one binary may make the
scan hold is bounded (``bounds``); a whole, clean binary goes to the compiled scan
(``speedups.scan_whole``) with the same bounds.

The bytes come from a file (``scan_file``), memory (``scan_bytes``) or a wheel member
(``scan_member``; small members in one compiled call, ``scan_small_members``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from archwheel.binary import speedups
from archwheel.binary.elf import ELF_MAGIC, FormatError
from archwheel.binary.fatbin import CONTAINER_MAGIC_BYTES, container_entries_size
from archwheel.binary.layout import Note, layout_parser, sniff
from archwheel.binary.model import LibraryInventory, Problem, Severity
from archwheel.binary.rawcubin import raw_cubin_parser
from archwheel.binary.scan import bounds
from archwheel.binary.scan.assemble import assemble
from archwheel.binary.scan.containers import container_at_hand, container_parser
from archwheel.binary.stream import ParserOutcome, StreamMux, WholeInput
from archwheel.binary.zipmember import (
    LOCAL_SLACK,
    SMALL_MEMBER,
    Member,
    MemberError,
    member_chunks,
    small_member,
)
from archwheel.effects.files import check_regular, open_regular

FILE_CHUNK = 4 << 20
# re's literal search is about twice as fast as bytes.find on binary code.
_MAGIC_RE = re.compile(re.escape(CONTAINER_MAGIC_BYTES))
_ELF_RE = re.compile(re.escape(ELF_MAGIC))
MAX_REPLAYS = 2


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
        self.limit = bounds.deep_inflation_limit(total_size)
        self.inflated = 0

    def passed_with(self, scan: BinaryScan) -> bool:
        """Count what ``scan`` inflated; True, and a note on ``scan``, when that passes the
        bound: the binaries scanned after it are not to be checked."""
        self.inflated += scan.inflated
        if self.inflated <= self.limit:
            return False
        scan.notes.append((None, Note(Severity.ERROR, (
            f"--deep: the payloads of this input inflate to more than {self.limit} bytes "
            f"together (the larger of 1 GiB and {bounds.MAX_DEEP_INFLATION_RATIO}x the size of its "
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
            found = (
                speedups.scan_whole(data, bounds.compiled_bounds()) if len(data) == size else None
            )
            if found is not None:
                _close(chunks)
                if on_bytes:
                    on_bytes(size)
                sha256 = _sha256(data) if digest else None
                return _from_compiled_scan(label, found, size, sha256)
        chunks = _replay_gathered(pieces[1:], ended, chunks)
    outcomes: dict[object, ParserOutcome] = {}

    def done(outcome: ParserOutcome) -> None:
        outcomes[outcome.token] = outcome

    # A member that fits in its first chunk (most wheel members but the big libraries) is read
    # without the stream's queue: the same parsers, answered from the bytes at hand.
    mux: StreamMux | WholeInput = WholeInput(first, done) if len(first) == size else StreamMux(done)
    mux.add(layout_parser(kind, size), "layout")
    budget = bounds.Budget(size)
    header_errors: list[tuple[int, str]] = []

    def candidate(start: int, chunk: bytes, at: int) -> None:
        """A container magic at absolute ``start`` (``at`` in ``chunk``, -1 when split)."""
        if budget.candidates >= bounds.MAX_CONTAINERS:
            budget.limit(
                "containers",
                f"more than {bounds.MAX_CONTAINERS} fatbin container candidates: "
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
            scan = container_at_hand(start, chunk, start - at, budget)
            if scan is not None:
                outcomes[start] = ParserOutcome(start, value=scan)
                return
        if budget.live >= bounds.MAX_LIVE_PARSERS:
            budget.limit(
                "live",
                f"more than {bounds.MAX_LIVE_PARSERS} fatbin containers nested in each other: "
                "the rest are not read (limit)",
            )
            return
        mux.add(container_parser(start, deep, budget, head), start)

    def elf_candidate(start: int) -> None:
        """An ELF magic at absolute ``start``: perhaps a raw cubin (offset 0 is the file)."""
        if start == 0:
            return
        if budget.elf_candidates >= bounds.MAX_RAW_CUBINS:
            budget.limit(
                "raw-cubins",
                f"more than {bounds.MAX_RAW_CUBINS} embedded ELF headers: "
                "the rest are not read (limit)",
            )
            return
        budget.elf_candidates += 1
        mux.add(raw_cubin_parser(start), ("cubin", start))

    read_error: str | None = None
    tail = b""
    elf_tail = b""
    chunk = first
    if digest:
        import hashlib  # only when asked: its OpenSSL costs 3-5 ms of every start

        hasher = hashlib.sha256()
    else:
        hasher = None
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
            containers, elves = _magics(chunk)
            for hit in elves:
                elf_candidate(base + hit)
            elf_tail = chunk[-3:]
            fed = 0
            for hit in containers:
                if budget.live >= bounds.MAX_LIVE_PARSERS and hit > fed:
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
    assemble(
        label,
        kind,
        size,
        outcomes,
        libraries=result.libraries,
        binary_notes=result.notes,
        header_errors=header_errors,
    )
    return result


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _magics(chunk: bytes) -> tuple[Iterable[int], Iterable[int]]:
    """The offsets of the container magics and of the ELF magics in ``chunk``, in order: one
    compiled pass where it is built (``speedups.find_magics``, about 10x ``re``'s search on
    machine code), else ``re``."""
    found = speedups.find_magics(chunk)
    if found is not None:
        return found
    return (
        (m.start() for m in _MAGIC_RE.finditer(chunk)),
        (m.start() for m in _ELF_RE.finditer(chunk)),
    )


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


def _replay_gathered(
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


def _from_compiled_scan(
    label: str, found: list[speedups.Unit], size: int, sha256: str | None = None
) -> BinaryScan:
    """The scan of a binary of ``size`` bytes the compiled scan read whole (``scan_whole``)."""
    return BinaryScan(
        libraries=[
            LibraryInventory(
                f"{label}({name})" if name else label,
                file_kind,
                unit_size,
                entries,
                containers,
                debug,
            )
            for name, file_kind, unit_size, containers, entries, debug in found
        ],
        bytes_read=size,
        sha256=sha256,
    )


def _close(chunks: Iterator[bytes]) -> None:
    """Close a chunk generator early (its file handle), whatever kind of iterator it is."""
    close = getattr(chunks, "close", None)
    if close:
        close()


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
    mapped: bool = False,
) -> MemberResult:
    """Scan one wheel member; a crash in the scanner becomes a message, never an exception.

    ``handle``: the archive already open (the in-process scans of one wheel share it);
    ``digest``: as ``scan_stream``'s; ``read``: the member's bytes, already read whole and
    sound (``scan_small_members``); ``mapped``: as ``member_chunks``'s (forked workers only).
    """
    try:
        data = read
        if data is None and handle is not None:
            data = small_member(handle.fileno(), archive_size, member)
        if data is None:
            scan = scan_stream(
                member.name,
                member.size,
                lambda: member_chunks(path, archive_size, member, handle=handle, mapped=mapped),
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
    docs/maintainers/performance.md). A member it leaves, or finds bytes in that only the Python
    scan reads, goes through ``scan_member`` as before, so results and problems are the same."""
    try:
        answers = speedups.scan_members(
            handle.fileno(),
            archive_size,
            members,
            small_max=SMALL_MEMBER,
            slack=LOCAL_SLACK,
            bounds=bounds.compiled_bounds(),
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
            results.append((_from_compiled_scan(member.name, answer, member.size), None))
            scanned += member.size
    if on_bytes and scanned:
        on_bytes(scanned)
    return results
