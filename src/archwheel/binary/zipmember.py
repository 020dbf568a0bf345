"""One wheel member's bytes, inflated as a bounded stream of chunks, straight from the zip.

Memory stays bounded by the chunk size, a member that inflates past its declared size (a zip
bomb) is stopped, the CRC is checked and truncation is detected; ``MemberError`` says what is
wrong in one line. The records come from the central directory (``zipread.WheelReader``) or,
in the scan's worker processes, from their parent: nothing here parses a directory.

Hand-written for a measured reason: zipfile's own member reader inflates with zlib and cannot
stop a member at its declared size; this one inflates with ISA-L (about 2x faster, most of an
audit's time, docs/maintainers/performance.md) and bounds every member as it streams.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple, cast

from archwheel.effects.files import open_regular

# ISA-L (python-isal) inflates about twice as fast as zlib and computes CRC-32 about 5x faster;
# it is most of an audit's time. It holds the GIL, so wheels are scanned by processes, not threads.
try:
    from isal import isal_zlib as zlib

    INFLATE_BACKEND = "isal"
except ImportError:  # pragma: no cover - platforms without isal wheels
    import zlib  # type: ignore[no-redef]

    INFLATE_BACKEND = "zlib"

_ZLIB_ERROR = cast("type[Exception]", zlib.error)

Pread = Callable[[int, int], bytes]  # (length, offset) -> bytes: ``os.pread`` without the fd
# (length, offset) -> the archive's bytes there, perhaps a view of a memory map (no copy).
BulkRead = Callable[[int, int], bytes | memoryview]

LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
LOCAL_SIGNATURE = b"PK\x03\x04"
READ_BLOCK = 1 << 20  # compressed bytes read at a time
OUT_CHUNK = 4 << 20  # most inflated bytes produced per chunk
FIRST_CHUNK = 64 << 10  # the first chunk is small so that non-binaries cost little
DEFAULT_MAX_MEMBER = 16 << 30  # no real library is near this; a larger declaration is refused


class MemberError(Exception):
    """A member that cannot be read completely; the message is one line."""


class Member(NamedTuple):
    """One member as the directory declares it. A named tuple: a wheel may hold 200000 members,
    and the compiled reader (``_speedups.scan_members``) takes their fields by position."""

    name: str  # as zipfile names it (from 3.12, an Info-ZIP Unicode Path field may rename it)
    size: int  # declared uncompressed size
    compressed_size: int
    method: int
    crc: int
    header_offset: int
    header_name: str  # the name its headers hold, decoded: what its local header must say


# A member whose sizes are both at most this is read in one go when all is regular about it.
SMALL_MEMBER = FIRST_CHUNK
LOCAL_SLACK = 256  # extra-field bytes read along with a small member's local header


def small_member(fd: int, archive_size: int, member: Member) -> bytes | None:
    """A small member's bytes, read with one ``pread``, inflated in one call and its CRC held,
    when everything about it is regular; None otherwise, and ``member_chunks`` then reads it
    and says what is wrong. A wheel of 200000 tiny members pays one read each, no generator.
    """
    if (
        member.size > SMALL_MEMBER
        or member.compressed_size > SMALL_MEMBER
        or member.method not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
    ):
        return None
    name = member.header_name.encode("utf-8", "surrogateescape")
    try:
        block = os.pread(
            fd, LOCAL_HEADER.size + len(name) + LOCAL_SLACK + member.compressed_size,
            member.header_offset,
        )  # fmt: skip
    except OSError:
        return None
    if len(block) < LOCAL_HEADER.size or block[:4] != LOCAL_SIGNATURE:
        return None
    name_len, extra_len = LOCAL_HEADER.unpack_from(block)[9:11]
    start = LOCAL_HEADER.size + name_len + extra_len
    end = start + member.compressed_size
    if (
        block[LOCAL_HEADER.size : LOCAL_HEADER.size + name_len] != name
        or end > len(block)
        or member.header_offset + end > archive_size
    ):
        return None
    if member.method == zipfile.ZIP_STORED:
        data = block[start:end]
        if member.compressed_size != member.size:
            return None
    else:
        inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        try:
            data = inflater.decompress(block[start:end], member.size + 1)
        except _ZLIB_ERROR:
            return None
        if len(data) != member.size or not inflater.eof or inflater.unconsumed_tail:
            return None
    return data if zlib.crc32(data) == member.crc else None


def member_chunks(
    path: Path,
    archive_size: int,
    member: Member,
    max_member_bytes: int = DEFAULT_MAX_MEMBER,
    *,
    handle: BinaryIO | None = None,
    mapped: bool = False,
) -> Iterator[bytes]:
    """Inflate one member of the zip at ``path``; raise ``MemberError`` on any defect.

    Needs no directory parse (worker processes get ``Member`` records). The first chunk is at
    most 64 KiB so that callers can look at a member's first bytes and stop cheaply. With
    ``handle`` (the archive, already open) nothing is opened: the bytes are read at their
    offsets (``os.pread``), so that iterators of one handle never disturb each other.

    ``mapped``: the compressed bytes go to the inflater straight from a memory map of the
    archive, not copied out of the page cache by ``os.pread`` first (libtorch_cuda.so's 340 MB:
    about 0.06 s less, docs/maintainers/performance.md). Only for a process that may die of it: a
    file cut short while it is mapped kills the reader with SIGBUS (the scan's forked workers,
    whose member is then read again by their parent, with ``os.pread``).
    """
    with contextlib.ExitStack() as stack:
        if handle is None:
            try:
                handle = stack.enter_context(open_regular(path))
            except OSError as exc:  # deleted or replaced (by a FIFO, say) while it is scanned
                raise MemberError(f"cannot read the archive: {exc.strerror or exc}") from None
        fd = handle.fileno()
        yield from member_chunks_at(
            lambda n, at: os.pread(fd, n, at),
            archive_size,
            member,
            max_member_bytes,
            bulk=_Mapped.of(fd) if mapped else None,
        )


class _Mapped:
    """Reads of a file as views of a read-only memory map of it (no copy). The pages read
    are let go of every ``RELEASE_EVERY`` bytes (``MADV_DONTNEED``: they stay in the page cache,
    they leave this process's resident set, where the whole member would otherwise count).
    The map is unmapped when the last view of it goes."""

    RELEASE_EVERY = 2 << 20

    def __init__(self, mapping: mmap.mmap) -> None:
        self._mapping = mapping
        self._view = memoryview(mapping)
        self._released = 0

    @classmethod
    def of(cls, fd: int) -> _Mapped | None:
        """The reader of the file at ``fd``; None where it cannot be mapped (an empty file, a
        file system without ``mmap``): the caller reads it instead."""
        try:
            return cls(mmap.mmap(fd, 0, access=mmap.ACCESS_READ))
        except (OSError, ValueError):
            return None

    def __call__(self, size: int, at: int) -> memoryview:
        if at - self._released >= self.RELEASE_EVERY and hasattr(mmap, "MADV_DONTNEED"):
            start = self._released - self._released % mmap.PAGESIZE
            end = at - at % mmap.PAGESIZE
            self._mapping.madvise(mmap.MADV_DONTNEED, start, end - start)
            self._released = end
        return self._view[at : at + size]


def member_chunks_at(
    pread: Pread,
    archive_size: int,
    member: Member,
    max_member_bytes: int = DEFAULT_MAX_MEMBER,
    *,
    bulk: BulkRead | None = None,
) -> Iterator[bytes]:
    """``member_chunks`` of an archive read by ``pread``: its bytes are read as the chunks are
    taken, so a caller that stops early reads only a prefix of the member's data. ``bulk``, when
    given, reads the compressed data that goes to the inflater (``member_chunks``'s map)."""
    if member.method not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise MemberError(f"unsupported compression method {member.method}")
    if member.size > max_member_bytes:
        raise MemberError(
            f"declares {member.size} bytes uncompressed, above the limit of "
            f"{max_member_bytes} (zip bomb?)"
        )
    reader = _At(pread, member.header_offset)
    header = bytes(reader.read(LOCAL_HEADER.size))  # bytes already: bytes() copies nothing
    if len(header) < LOCAL_HEADER.size or header[:4] != LOCAL_SIGNATURE:
        raise MemberError("local file header missing or damaged")
    fields = LOCAL_HEADER.unpack(header)
    name_len, extra_len = fields[9], fields[10]
    local_name = bytes(reader.read(name_len))
    if (
        local_name.decode("utf-8", "replace") != member.header_name
        and local_name.decode("cp437", "replace") != member.header_name
    ):
        raise MemberError("local header names a different file than the directory")
    start = member.header_offset + LOCAL_HEADER.size + name_len + extra_len
    if start + member.compressed_size > archive_size:
        raise MemberError(
            f"data runs past the end of the archive (needs {member.compressed_size} "
            f"bytes at {start}, archive is {archive_size} bytes): truncated"
        )
    yield from _inflate(_At(pread, start), member, _At(bulk, start) if bulk else None)


class _At:
    """Reads of one archive from a position of its own (``os.pread`` of a file descriptor: the
    shared file offset is neither used nor moved; or a ``Source``'s ``pread``; or views of a
    memory map, which only the inflater's input is read through)."""

    __slots__ = ("position", "pread")

    def __init__(self, pread: BulkRead, position: int) -> None:
        self.pread = pread
        self.position = position

    def read(self, size: int) -> bytes | memoryview:
        try:
            data = self.pread(size, self.position)
        except OSError as exc:
            raise MemberError(f"cannot read the archive: {exc.strerror or exc}") from None
        self.position += len(data)
        return data


def _inflate(fh: _At, member: Member, bulk: _At | None = None) -> Iterator[bytes]:
    read = fh.read
    remaining = member.compressed_size
    produced = 0
    crc = 0
    limit = member.size
    first = True
    if member.method == zipfile.ZIP_STORED:
        if member.compressed_size != member.size:
            raise MemberError("stored member whose sizes disagree")
        while remaining:
            block = bytes(read(min(remaining, FIRST_CHUNK if first else OUT_CHUNK)))
            if not block:
                raise MemberError("archive ends inside the member: truncated")
            first = False
            remaining -= len(block)
            crc = zlib.crc32(block, crc)
            yield block
    else:
        inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        take = bulk.read if bulk is not None else read
        while True:
            draining = False
            data: bytes | memoryview
            if inflater.unconsumed_tail:
                data = inflater.unconsumed_tail
            elif remaining:
                data = take(min(remaining, 16 << 10 if first else READ_BLOCK))
                if not data:
                    raise MemberError("archive ends inside the member: truncated")
                remaining -= len(data)
            elif inflater.eof:
                break
            else:
                # Every compressed byte is in, but an inflater stopped by the output cap may
                # hold input it has consumed and not yet inflated (ISA-L takes the whole
                # input at once; zlib keeps a pending match): drain it with no new input.
                data = b""
                draining = True
            try:
                out = inflater.decompress(data, FIRST_CHUNK if first else OUT_CHUNK)
            except _ZLIB_ERROR as exc:
                raise MemberError(f"corrupt deflate data ({exc})") from None
            if draining and not out and not inflater.eof:
                raise MemberError("compressed data ends before the deflate stream does")
            if out:
                produced += len(out)
                if produced > limit:
                    raise MemberError(
                        f"inflates past its declared size of {limit} bytes (zip bomb?)"
                    )
                crc = zlib.crc32(out, crc)
                first = False
                yield out
            if inflater.eof and not inflater.unconsumed_tail:
                break
        if produced != limit:
            raise MemberError(f"inflates to {produced} bytes, the directory says {limit}")
    if crc != member.crc:
        raise MemberError(
            f"CRC mismatch (computed {crc:08x}, recorded {member.crc:08x}): corrupt member"
        )
