"""Find every fatbin entry in wheels, files, directories and installed distributions.

One pass over each binary's bytes does all the work: the bytes are searched for the container
magic, each candidate is parsed by a small parser that asks only for the headers it needs, and
the ELF (or ar) layout is parsed alongside to say which section each container sits in. Device
code outside ``.nv_fatbin`` (cuBLASLt's ``.cask_resource``, cuFFT's ``.ldata`` ...) is found the
same way. Payloads are never decompressed: the entry headers say everything the audit reports.

Wheels are streamed member by member (never extracted); large members are inflated on worker
threads (zlib releases the GIL), so a whole wheel costs about one inflate of its binaries.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import mmap
import os
import pickle
import re
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archwheel.binary.elf import FormatError
from archwheel.binary.fatbin import (
    CONTAINER_MAGIC_BYTES,
    EntryHeader,
    entry_model,
    parse_container_header,
    parse_entry_header,
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
    FatbinEntry,
    InputInventory,
    LibraryInventory,
    Problem,
    Severity,
)
from archwheel.binary.payload import MAX_DEEP_PAYLOAD, check_payload
from archwheel.binary.stream import Need, Parser, ParserOutcome, StreamMux
from archwheel.binary.zipread import Member, MemberError, WheelReader, member_chunks
from archwheel.errors import InputError, ToolError
from archwheel.facts.arch import CodeKind, Target, Variant
from archwheel.facts.versions import ComputeCapability

FILE_CHUNK = 4 << 20
# re's literal search is about twice as fast as bytes.find on binary code.
_MAGIC_RE = re.compile(re.escape(CONTAINER_MAGIC_BYTES))
MAX_REPLAYS = 2
MAX_PROBLEMS_PER_LIBRARY = 20
# Gaps inside a fatbin section larger than this are bytes no valid container explains.
ALIGNMENT_SLACK = 16

# Wheel members with these suffixes are text or Python, never binaries: not even peeked at.
# (`--all-members` peeks at everything.)
TEXT_SUFFIXES = frozenset(
    (
        ".py .pyi .pyc .pyx .pxd .h .hpp .hxx .cuh .inl .c .cc .cpp .cxx .cu .txt .md .rst "
        ".json .yaml .yml .toml .cfg .ini .html .css .js .csv .typed .cmake .in .pem"
    ).split()
)
DIST_INFO_FILES = frozenset({"METADATA", "RECORD", "WHEEL", "LICENSE", "top_level.txt"})

ProgressCallback = Callable[[int, int, str], None]
"""Called as ``on_progress(done_bytes, total_bytes, current_name)`` from worker threads."""


# -- one binary ---------------------------------------------------------------------------------


@dataclass
class _ContainerScan:
    offset: int
    end: int
    headers: list[EntryHeader]
    error: str | None
    error_at: int = 0  # where the error was met
    payload_errors: tuple[str, ...] = ()  # --deep: payloads that disagree with their headers


def _container_parser(offset: int, deep: bool = False) -> Parser:
    raw = yield Need(offset, 16)
    header = parse_container_header(raw, offset)  # FormatError: not a container
    headers: list[EntryHeader] = []
    payload_errors: list[str] = []
    position = header.entries_start
    while position < header.end:
        raw = yield Need(position, 64)
        if len(raw) < 64:
            return _ContainerScan(
                offset,
                header.end,
                headers,
                f"container at {offset:#x} declares {header.entries_size} bytes but the file "
                f"ends inside it (entry at {position:#x})",
                position,
                tuple(payload_errors),
            )
        try:
            entry = parse_entry_header(raw, position, header.end)
        except FormatError as exc:
            return _ContainerScan(
                offset, header.end, headers, str(exc), position, tuple(payload_errors)
            )
        headers.append(entry)
        if deep:
            if entry.padded_size > MAX_DEEP_PAYLOAD:
                payload_errors.append(f"entry at {position:#x}: payload too large to check")
            else:
                payload = yield Need(entry.payload_start, entry.padded_size)
                problem = check_payload(entry, payload)
                if problem:
                    payload_errors.append(problem)
        position = entry.end
    return _ContainerScan(offset, header.end, headers, None, 0, tuple(payload_errors))


@dataclass
class BinaryScan:
    """The result of scanning one binary: its libraries and the problems met."""

    libraries: list[LibraryInventory] = field(default_factory=list)
    notes: list[tuple[str | None, Note]] = field(default_factory=list)  # (unit name, note)
    bytes_read: int = 0


def scan_stream(
    label: str,
    size: int,
    open_chunks: Callable[[], Iterator[bytes]],
    on_bytes: Callable[[int], None] | None = None,
    *,
    deep: bool = False,
) -> BinaryScan | None:
    """Scan one binary delivered as chunks; None when it is not a binary at all.

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
    outcomes: dict[object, ParserOutcome] = {}

    def done(outcome: ParserOutcome) -> None:
        outcomes[outcome.token] = outcome

    mux = StreamMux(done)
    mux.add(layout_parser(kind, size), "layout")
    read_error: str | None = None
    tail = b""
    chunk = first
    try:
        while chunk:
            base = mux.position
            if tail:
                joined = tail + chunk[:3]
                hit = joined.find(CONTAINER_MAGIC_BYTES)
                if 0 <= hit < len(tail):
                    start = base - len(tail) + hit
                    mux.add(_container_parser(start, deep), start)
            for match in _MAGIC_RE.finditer(chunk):
                hit = match.start()
                mux.add(_container_parser(base + hit, deep), base + hit)
            mux.feed(chunk)
            result.bytes_read += len(chunk)
            if on_bytes:
                on_bytes(len(chunk))
            tail = chunk[-3:]
            chunk = next(chunks, b"")
    except MemberError as exc:
        read_error = str(exc)
    finally:
        _close(chunks)
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
    _assemble(label, kind, size, outcomes, result)
    return result


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
    header_errors: list[tuple[int, str]] = []
    for token, outcome in outcomes.items():
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
    per_unit_containers: Counter[str] = Counter()
    covered: dict[tuple[str, int], list[tuple[int, int]]] = {}
    unit_notes: dict[str, list[Note]] = {u.name: list(u.problems) for u in layout.units}
    accepted_end = -1
    for scan in scans:
        if scan.offset < accepted_end:
            continue  # inside an accepted container's payload: data, not a container
        unit = layout.unit_at(scan.offset)
        if unit is None:
            continue
        section = unit.section_at(scan.offset)
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
        notes.extend(
            Note(Severity.ERROR, f"in {name}: {_relative(e, unit)}") for e in scan.payload_errors
        )
        kept = [h for h in scan.headers if h.end <= limit]
        per_unit[unit.name].extend(_entry(h, name, unit) for h in kept)
        per_unit_containers[unit.name] += 1
        accepted_end = min(scan.end, limit)
        if section is not None:
            covered.setdefault((unit.name, section.offset), []).append((scan.offset, accepted_end))

    for offset, message in header_errors:
        if offset < accepted_end and any(s.offset <= offset < s.end for s in scans):
            continue
        unit = layout.unit_at(offset)
        section = unit.section_at(offset) if unit else None
        if unit is not None and section is not None and section.name in FATBIN_SECTIONS:
            notes = unit_notes[unit.name]
            notes.append(Note(Severity.ERROR, f"in {section.name}: {_relative(message, unit)}"))

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
        unknown = Counter(e.flags & ~_known_flags() for e in entries if e.flags & ~_known_flags())
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
                containers=per_unit_containers[unit.name],
            )
        )
        result.notes.extend((unit.name or None, n) for n in _limit(notes))


def _known_flags() -> int:
    from archwheel.binary.fatbin import KNOWN_FLAGS

    return KNOWN_FLAGS


def _relative(message: str, unit: Unit) -> str:
    return message if not unit.start else f"{message} (offsets in the archive)"


def _entry(header: EntryHeader, section: str, unit: Unit) -> FatbinEntry:
    entry = entry_model(header, section)
    # Offsets inside an archive member are reported relative to the member.
    return dataclasses.replace(entry, offset=entry.offset - unit.start) if unit.start else entry


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


# -- inputs -------------------------------------------------------------------------------------


def _problems(source: str, member: str | None, scan: BinaryScan) -> list[Problem]:
    out = []
    for unit, note in scan.notes:
        where = member
        if unit:
            where = f"{member}({unit})" if member else unit
        out.append(Problem(source, note.message, member=where, severity=note.severity))
    return out


def _file_chunks(path: Path) -> Callable[[], Iterator[bytes]]:
    def open_chunks() -> Iterator[bytes]:
        with path.open("rb") as fh:
            first = fh.read(64 << 10)
            if not first:
                return
            yield first
            while True:
                block = fh.read(FILE_CHUNK)
                if not block:
                    return
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
    return scan.libraries, _problems(name, None, scan)


def scan_file(
    path: Path, label: str | None = None, *, deep: bool = False
) -> tuple[list[LibraryInventory], list[Problem]]:
    """Scan one file on disk. Not a binary: no libraries and no problem."""
    shown = label or str(path)
    try:
        size = path.stat().st_size
        scan = scan_stream(shown, size, _file_chunks(path), deep=deep)
    except OSError as exc:
        return [], [Problem(shown, f"cannot read: {exc.strerror or exc}")]
    if scan is None:
        return [], []
    return scan.libraries, _problems(shown, None, scan)


def _is_text_member(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    dot = base.rfind(".")
    if dot > 0 and base[dot:].lower() in TEXT_SUFFIXES:
        return True
    parent = name[: len(name) - len(base) - 1].rsplit("/", 1)[-1]
    return parent.endswith(".dist-info") and base in DIST_INFO_FILES


class _Progress:
    """Thread-safe byte counter that reports to a callback."""

    def __init__(self, total: int, callback: ProgressCallback | None) -> None:
        self.total = total
        self.done = 0
        self.callback = callback
        self._lock = threading.Lock()

    def set(self, done: int, name: str) -> None:
        if self.callback is not None:
            self.callback(done, self.total, name)

    def add(self, amount: int, name: str) -> None:
        if self.callback is None:
            return
        with self._lock:
            self.done += amount
            done = self.done
        self.callback(done, self.total, name)


def _add_named(progress: _Progress, name: str, amount: int) -> None:
    progress.add(amount, name)


def default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def scan_wheel(
    path: Path,
    *,
    on_progress: ProgressCallback | None = None,
    workers: int | None = None,
    all_members: bool = False,
    deep: bool = False,
) -> InputInventory:
    """Scan every binary member of a wheel (any zip), streamed, in parallel."""
    source = str(path)
    reader = WheelReader(path)
    problems = [Problem(source, why, member=name) for name, why in reader.name_problems]
    members = [m for m in reader.members if all_members or not _is_text_member(m.name)]
    members = [m for m in members if m.size >= 4]
    progress = _Progress(sum(m.size for m in members), on_progress)
    results = _scan_members(path, reader.archive_size, members, progress, workers, deep=deep)

    libraries: list[LibraryInventory] = []
    scanned = 0
    total_bytes = 0
    for index, member in enumerate(members):
        scan, error = results[index]
        if error:
            problems.append(Problem(source, error, member=member.name))
            continue
        if scan is None:
            continue
        scanned += 1
        total_bytes += scan.bytes_read
        libraries.extend(scan.libraries)
        problems.extend(_problems(source, member.name, scan))
    return InputInventory(
        source=source,
        input_kind="wheel",
        libraries=tuple(libraries),
        problems=tuple(problems),
        members_scanned=scanned,
        bytes_scanned=total_bytes,
        metadata={"file": path.name},
    )


# -- parallel member scanning ---------------------------------------------------------------
# The inflater holds the GIL, so big members are scanned by worker processes: a fork of this
# process where that is safe (single-threaded POSIX), else a fresh `python -m
# archwheel.binary.scan_worker` (never multiprocessing, whose spawn re-imports the caller's main
# module). The main process scans the small members and takes big ones too whenever every
# worker is busy, longest first. A worker that fails is rescanned here.

PARALLEL_MIN_COMPRESSED = 8 << 20
_Result = tuple[BinaryScan | None, str | None]


def scan_member(
    path: Path, archive_size: int, member: Member, on_bytes: Any, deep: bool = False
) -> _Result:
    """Scan one wheel member; a crash in the scanner becomes a message, never an exception."""
    try:
        scan = scan_stream(
            member.name,
            member.size,
            lambda: member_chunks(path, archive_size, member),
            on_bytes,
            deep=deep,
        )
    except Exception as exc:  # a bug must not lose the rest of the wheel
        return None, f"internal error: {type(exc).__name__}: {exc}"
    return scan, None


class _Worker:
    """One member scanned in a child process (the base: a fresh interpreter, result on stdout)."""

    index: int
    member: Member

    @property
    def done_bytes(self) -> int:
        raise NotImplementedError

    def finished(self) -> bool:
        raise NotImplementedError

    def result(self) -> _Result | None:
        raise NotImplementedError

    def kill(self) -> None:
        raise NotImplementedError


class _ForkedWorker(_Worker):
    """A forked copy of this process scans the member: no interpreter start, no imports.

    Only used while this process runs a single thread (forking a threaded process can copy
    locks held by other threads). Progress is a counter in shared memory; the pickled result
    comes back through a pipe drained without blocking.
    """

    def __init__(
        self, path: Path, archive_size: int, index: int, member: Member, deep: bool
    ) -> None:
        self.index = index
        self.member = member
        self._counter = mmap.mmap(-1, 8)
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child, which never returns
            code = 1
            try:
                os.close(read_fd)
                done = 0

                def on_bytes(amount: int) -> None:
                    nonlocal done
                    done += amount
                    struct.pack_into("<Q", self._counter, 0, done)

                payload = pickle.dumps(scan_member(path, archive_size, member, on_bytes, deep))
                view = memoryview(payload)
                while view:
                    view = view[os.write(write_fd, view) :]
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        self._pid = pid
        self._fd: int | None = read_fd
        self._buffer = bytearray()
        self._status: int | None = None

    @property
    def done_bytes(self) -> int:
        return int(struct.unpack_from("<Q", self._counter, 0)[0])

    def _drain(self, block: bool = False) -> None:
        if self._fd is None:
            return
        os.set_blocking(self._fd, block)
        while True:
            try:
                data = os.read(self._fd, 1 << 20)
            except BlockingIOError:
                return
            if not data:
                os.close(self._fd)
                self._fd = None
                return
            self._buffer += data

    def finished(self) -> bool:
        self._drain()
        if self._status is None:
            pid, status = os.waitpid(self._pid, os.WNOHANG)
            if pid:
                self._status = status
        return self._status is not None

    def result(self) -> _Result | None:
        self._drain(block=True)
        if self._status is None:
            _, self._status = os.waitpid(self._pid, 0)
        self._counter.close()
        if os.waitstatus_to_exitcode(self._status) != 0:
            return None
        return _unpickle_result(bytes(self._buffer))

    def kill(self) -> None:
        if self._status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            _, self._status = os.waitpid(self._pid, 0)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _unpickle_result(data: bytes) -> _Result | None:
    try:
        value = pickle.loads(data)  # noqa: S301 - from our own child process
    except Exception:
        return None
    return value if isinstance(value, tuple) else None


class _SpawnedWorker(_Worker):
    """A fresh ``python -m archwheel.binary.scan_worker``; progress arrives as stderr lines."""

    def __init__(
        self, path: Path, archive_size: int, index: int, member: Member, deep: bool
    ) -> None:
        self.index = index
        self.member = member
        self._done = 0
        self._stdout = b""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "archwheel.binary.scan_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stdin is not None
        self.proc.stdin.write(pickle.dumps((str(path), archive_size, member, deep)))
        self.proc.stdin.close()
        self._threads = [
            threading.Thread(target=self._read_result, daemon=True),
            threading.Thread(target=self._read_progress, daemon=True),
        ]
        for t in self._threads:
            t.start()

    @property
    def done_bytes(self) -> int:
        return self._done

    def _read_result(self) -> None:
        assert self.proc.stdout is not None
        self._stdout = self.proc.stdout.read()

    def _read_progress(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if line.strip().isdigit():
                self._done = int(line)

    def finished(self) -> bool:
        return self.proc.poll() is not None

    def result(self) -> _Result | None:
        self.proc.wait()
        for t in self._threads:
            t.join()
        if self.proc.returncode != 0:
            return None
        return _unpickle_result(self._stdout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _start_worker(path: Path, archive_size: int, index: int, member: Member, deep: bool) -> _Worker:
    if hasattr(os, "fork") and threading.active_count() == 1 and FORK_WORKERS:
        return _ForkedWorker(path, archive_size, index, member, deep)
    return _SpawnedWorker(path, archive_size, index, member, deep)


FORK_WORKERS = True  # tests turn it off to exercise the spawned workers


def _scan_members(
    path: Path,
    archive_size: int,
    members: list[Member],
    progress: _Progress,
    workers: int | None,
    *,
    deep: bool = False,
) -> dict[int, _Result]:
    results: dict[int, _Result] = {}
    slots = (workers or default_workers()) - 1
    by_size = sorted(range(len(members)), key=lambda i: -members[i].compressed_size)
    big = [i for i in by_size if members[i].compressed_size >= PARALLEL_MIN_COMPRESSED]
    if slots < 1 or len(big) < 2:
        big = []
    small = [i for i in by_size if i not in set(big)]
    local_done = 0
    running: list[_Worker] = []

    def report(name: str) -> None:
        progress.set(local_done + sum(w.done_bytes for w in running), name)

    def scan_here(index: int) -> None:
        nonlocal local_done
        member = members[index]

        def on_bytes(amount: int) -> None:
            nonlocal local_done
            local_done += amount
            report(member.name)

        results[index] = scan_member(path, archive_size, member, on_bytes, deep)

    try:
        while big or small or running:
            while big and len(running) < slots:
                index = big.pop(0)
                try:
                    running.append(_start_worker(path, archive_size, index, members[index], deep))
                except OSError:
                    slots = 0  # cannot start processes here: scan everything in this one
                    scan_here(index)
            for worker in [w for w in running if w.finished()]:
                running.remove(worker)
                outcome = worker.result()
                local_done += worker.member.size
                if outcome is None:
                    local_done -= worker.member.size
                    scan_here(worker.index)
                else:
                    results[worker.index] = outcome
            if big:
                scan_here(big.pop(0))
            elif small:
                scan_here(small.pop(0))
            elif running:
                time.sleep(0.02)
                report(running[0].member.name)
    finally:
        for worker in running:
            worker.kill()
    return results


def _walk(root: Path) -> Iterator[Path]:
    """Regular files under ``root``, sorted, without following directory links."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            candidate = Path(dirpath) / name
            if candidate.is_file():
                yield candidate


def scan_directory(
    root: Path,
    *,
    on_progress: ProgressCallback | None = None,
    kind: str = "directory",
    deep: bool = False,
) -> InputInventory:
    """Scan every binary file under a directory tree."""
    return scan_files(root, list(_walk(root)), on_progress=on_progress, kind=kind, deep=deep)


def scan_files(
    root: Path,
    files: list[Path],
    *,
    on_progress: ProgressCallback | None = None,
    kind: str = "directory",
    label: str | None = None,
    deep: bool = False,
) -> InputInventory:
    source = label or str(root)
    libraries: list[LibraryInventory] = []
    problems: list[Problem] = []
    scanned = 0
    total = 0
    sizes = {}
    for f in files:
        try:
            sizes[f] = f.stat().st_size
        except OSError as exc:
            problems.append(Problem(source, f"cannot read: {exc.strerror}", member=str(f)))
    progress = _Progress(sum(sizes.values()), on_progress)
    for f, size in sizes.items():
        try:
            relative = f.relative_to(root).as_posix()
        except ValueError:
            relative = str(f)
        try:
            scan = scan_stream(
                relative,
                size,
                _file_chunks(f),
                functools.partial(_add_named, progress, relative),
                deep=deep,
            )
        except OSError as exc:
            problems.append(Problem(source, f"cannot read: {exc.strerror or exc}", member=relative))
            continue
        if scan is None:
            continue
        scanned += 1
        total += scan.bytes_read
        libraries.extend(scan.libraries)
        problems.extend(_problems(source, relative, scan))
    return InputInventory(
        source=source,
        input_kind=kind,
        libraries=tuple(libraries),
        problems=tuple(problems),
        members_scanned=scanned,
        bytes_scanned=total,
    )


def scan_path(
    path: Path | str,
    *,
    on_progress: ProgressCallback | None = None,
    workers: int | None = None,
    all_members: bool = False,
    deep: bool = False,
) -> InputInventory:
    """Scan a wheel (or any zip), a directory, or a single file, detected from the path.

    ``deep`` also decompresses every payload and checks it against its header (slow).
    """
    p = Path(path)
    if p.is_dir():
        return scan_directory(p, on_progress=on_progress, deep=deep)
    if not p.exists():
        raise InputError(f"{p}: no such file or directory")
    if not p.is_file():
        raise InputError(f"{p}: not a regular file")
    try:
        with p.open("rb") as fh:
            head = fh.read(8)
    except OSError as exc:
        raise InputError(f"{p}: cannot read ({exc.strerror})") from None
    if head.startswith(b"PK") or p.suffix == ".whl":
        return scan_wheel(
            p, on_progress=on_progress, workers=workers, all_members=all_members, deep=deep
        )
    libraries, problems = scan_file(p, deep=deep)
    if not libraries and not problems:
        problems = [
            Problem(
                str(p),
                "not a wheel, ELF file, ar archive or fatbin: nothing to audit",
                severity=Severity.ERROR,
            )
        ]
    return InputInventory(
        source=str(p),
        input_kind="file",
        libraries=tuple(libraries),
        problems=tuple(problems),
        members_scanned=1 if libraries else 0,
        bytes_scanned=p.stat().st_size,
    )


_FILES_OF_DISTRIBUTION = """
import json, sys
from importlib import metadata
try:
    dist = metadata.distribution(sys.argv[1])
except metadata.PackageNotFoundError:
    print(json.dumps({"error": "not-found"}))
    raise SystemExit(0)
files = [str(dist.locate_file(f)) for f in (dist.files or [])]
print(json.dumps({"name": dist.metadata["Name"], "version": dist.version, "files": files}))
"""


def scan_installed(
    distribution: str,
    python: str | None = None,
    *,
    on_progress: ProgressCallback | None = None,
    deep: bool = False,
) -> InputInventory:
    """Scan the files an installed distribution recorded (RECORD) in a Python environment."""
    interpreter = python or sys.executable
    try:
        proc = subprocess.run(
            [interpreter, "-c", _FILES_OF_DISTRIBUTION, distribution],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except FileNotFoundError:
        raise ToolError(f"python interpreter {interpreter!r} not found") from None
    except subprocess.TimeoutExpired:
        raise ToolError(f"{interpreter} took over 120 s to list {distribution}'s files") from None
    if proc.returncode != 0:
        raise ToolError(
            f"{interpreter} could not list the files of {distribution}: "
            f"{proc.stderr.strip().splitlines()[-1:] or proc.returncode}"
        )
    try:
        info = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise ToolError(f"unexpected output from {interpreter} listing {distribution}") from None
    if info.get("error") == "not-found":
        raise InputError(
            f"{distribution} is not installed in {interpreter}",
            hint="install it, or point --python at the environment that has it",
        )
    files = [Path(f) for f in info["files"]]
    existing = [f for f in files if f.is_file()]
    roots = [f.parent for f in existing]
    root = Path(os.path.commonpath([str(r) for r in roots])) if roots else Path()
    inventory = scan_files(
        root,
        existing,
        on_progress=on_progress,
        kind="installed",
        label=f"{info['name']}=={info['version']} ({interpreter})",
        deep=deep,
    )
    missing = [f for f in files if not f.exists()]
    problems = list(inventory.problems)
    if missing:
        problems.append(
            Problem(
                inventory.source,
                f"{len(missing)} recorded files are missing (first: {missing[0]}): "
                "a damaged installation",
            )
        )
    return InputInventory(
        source=inventory.source,
        input_kind="installed",
        libraries=inventory.libraries,
        problems=tuple(problems),
        members_scanned=inventory.members_scanned,
        bytes_scanned=inventory.bytes_scanned,
        metadata={
            "name": str(info["name"]),
            "version": str(info["version"]),
            "root": str(root),
            "python": interpreter,
        },
    )
