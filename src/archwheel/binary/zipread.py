"""A wheel's zip directory, read and checked, never written out: which members there are.

``zipfile`` parses the central directory (or the compiled reader, where all is plain); each
member is checked before it is listed: names that could escape a folder (``..``, absolute
paths), duplicates, members that overlap, encrypted or patched data, and the bounds of the
directory (member count, size, inflation ratio), although nothing is ever written.
``WheelReader.chunks`` streams a listed member's bytes through ``zipmember``, which inflates
and bounds them.
"""

from __future__ import annotations

import binascii
import io
import os
import struct
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

from archwheel.binary import speedups
from archwheel.binary.zipmember import (
    DEFAULT_MAX_MEMBER,
    LOCAL_HEADER,
    Member,
    Pread,
    member_chunks,
    member_chunks_at,
)
from archwheel.effects.files import NotRegularFile, open_regular
from archwheel.errors import InputError


class Source(Protocol):
    """An archive that is not a local file (``effects.ranged``: a file on a package index):
    read at any offset by ``pread``, and as a seekable file object by ``reader()``."""

    url: str
    size: int

    def pread(self, length: int, offset: int) -> bytes:
        """``length`` bytes at ``offset`` (fewer only at the end of the archive)."""
        ...

    def reader(self) -> BinaryIO:
        """A seekable file object over the archive, for ``zipfile``."""
        ...


# What one archive's central directory may make a reader hold (docs/limits.md):
# ``zipfile`` reads the whole directory and makes an object per member before anything else
# runs, so both are checked in the end record first. torch 2.14.1: 13043 members, 1.2 MB.
MAX_ARCHIVE_MEMBERS = 200_000
MAX_DIRECTORY_BYTES = 32 << 20
# What the members of one archive may declare together, uncompressed: the larger of a floor and
# a multiple of the archive's own size. Deflate reaches 1032:1, so without it a 50 MB wheel of
# bombs (each member within its own bound) makes a reader inflate 50 GB; real wheels are far
# below (torch 2.14.1: 2.1x, its most compressible library 24x). A member inflating past what it
# declares is already refused, so this bounds the bytes inflated from any input.
MAX_INFLATION_RATIO = 100
INFLATION_FLOOR = 1 << 30
_END = struct.Struct("<4s4H2LH")
_END_SIGNATURE = b"PK\x05\x06"
_END64_LOCATOR = struct.Struct("<4sLQL")
_END64 = struct.Struct("<4sQ2H2L4Q")


class _NeverRaised(Exception):
    """Stands for ``effects.net.TransferError`` while that module is not loaded."""


def _transfer_error() -> type[Exception]:
    """``effects.net.TransferError`` once that module is loaded (only a ``Source`` of
    ``effects`` raises one, and it loads the module): the local audit does not import the HTTP
    client (``http.client`` and ``ssl``: 25 ms of every start)."""
    net = sys.modules.get("archwheel.effects.net")
    found: type[Exception] = net.TransferError if net is not None else _NeverRaised
    return found


def unsafe_name_reason(name: str) -> str | None:
    """Why a member name could escape an extraction folder, or None when it is safe."""
    if not name:
        return "empty member name"
    if "\0" in name:
        return "member name contains a NUL byte"
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "absolute member path"
    # Plain string work: this runs for every member of wheels with tens of thousands of them.
    if ".." in name.replace("\\", "/").split("/"):
        return "member path contains '..'"
    return None


def directory_extent(fh: BinaryIO) -> tuple[int, int] | None:
    """The member count and central-directory size of a zip's end record, found and read as
    ``zipfile`` finds and reads it (the record in the last 22 bytes when it has no comment,
    else the last signature of the last 64 KiB; a zip64 record right before its locator), so
    that the numbers checked are the ones ``zipfile`` goes on to use. None: no end record
    (``zipfile`` then says what is wrong)."""
    size = fh.seek(0, os.SEEK_END)
    if size < _END.size:
        return None
    fh.seek(size - _END.size)
    last = fh.read(_END.size)
    if last[:4] == _END_SIGNATURE and last[-2:] == b"\0\0":
        record, record_at = last, size - _END.size
    else:
        window = max(size - (1 << 16) - _END.size, 0)
        fh.seek(window)
        tail = fh.read()
        at = tail.rfind(_END_SIGNATURE)
        if at < 0 or at + _END.size > len(tail):
            return None
        record, record_at = tail[at : at + _END.size], window + at
    fields = _END.unpack(record)
    entries, directory_size = fields[4], fields[5]
    locator_at = record_at - _END64_LOCATOR.size
    if locator_at >= _END64.size:
        fh.seek(locator_at)
        locator = fh.read(_END64_LOCATOR.size)
        if locator[:4] == b"PK\x06\x07":
            fh.seek(locator_at - _END64.size)
            raw = fh.read(_END64.size)
            if raw[:4] == b"PK\x06\x06":
                end64 = _END64.unpack(raw)
                entries, directory_size = end64[7], end64[8]
    return int(entries), int(directory_size)


def open_zip(fh: BinaryIO, label: object, *, max_members: int | None = None) -> zipfile.ZipFile:
    """``zipfile.ZipFile(fh)`` once the end record shows a directory within the bounds.

    ``InputError`` (exit 3) naming ``label`` and the limit when the directory declares more than
    ``max_members`` members (default ``MAX_ARCHIVE_MEMBERS``) or more than
    ``MAX_DIRECTORY_BYTES``, or when it holds more members than allowed (the count it declares
    may lie: ``zipfile`` reads by size). ``zipfile.BadZipFile`` for an archive ``zipfile``
    cannot read (also one it says it does not implement, such as an extract version past
    6.3). The caller closes the returned archive.
    """
    limit = MAX_ARCHIVE_MEMBERS if max_members is None else max_members
    extent = directory_extent(fh)
    fh.seek(0)
    if extent is not None:
        _check_extent(*extent, limit, label)
    try:
        archive = zipfile.ZipFile(fh)
    except NotImplementedError as exc:  # a user's file, not a bug here
        raise zipfile.BadZipFile(str(exc)) from None
    try:
        _check_count(len(archive.filelist), limit, label)
        _check_inflation(
            sum(info.file_size for info in archive.filelist), fh.seek(0, os.SEEK_END), label
        )
    except BaseException:
        archive.close()
        raise
    fh.seek(0)
    return archive


def _check_extent(entries: int, directory_size: int, limit: int, label: object) -> None:
    """Refuse a directory whose end record declares more members or bytes than the bounds."""
    if entries > limit:
        raise InputError(
            f"{label}: its zip directory declares {entries} members, above the limit "
            f"of {limit} (docs/limits.md); not read"
        )
    if directory_size > MAX_DIRECTORY_BYTES:
        raise InputError(
            f"{label}: its zip directory declares {directory_size} bytes, above the "
            f"limit of {MAX_DIRECTORY_BYTES} (docs/limits.md); not read"
        )


def _check_count(count: int, limit: int, label: object) -> None:
    if count > limit:
        raise InputError(
            f"{label}: its zip directory holds {count} members, above the limit of {limit} "
            "(docs/limits.md); not read"
        )


def _reads_unicode_path() -> bool:
    """Whether this Python's ``zipfile`` names a member by its Info-ZIP Unicode Path extra field
    (0x7075: CPython 3.12 on), asked of ``zipfile`` itself with a zip of one member."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        info = zipfile.ZipInfo("a")
        info.extra = struct.pack("<HHBL", 0x7075, 6, 1, binascii.crc32(b"a")) + b"b"
        zf.writestr(info, b"")
    with zipfile.ZipFile(buffer) as zf:
        return zf.infolist()[0].filename == "b"


READS_UNICODE_PATH = _reads_unicode_path()


def plain_directory(fh: BinaryIO, archive_size: int, label: object) -> list[Member] | None:
    """The members of a plain zip, as ``WheelReader`` would list them through this Python's
    ``zipfile``, read by the compiled reader (``speedups.plain_directory``) when it is built and
    the directory is plain and sound throughout (docs/maintainers/design.md, "The compiled scan");
    None otherwise, and ``zipfile`` reads it. The bounds are checked as ``open_zip`` checks them,
    with the same messages."""
    fd = fh.fileno()
    return plain_directory_at(lambda n, at: os.pread(fd, n, at), archive_size, label)


def plain_directory_at(pread: Pread, archive_size: int, label: object) -> list[Member] | None:
    """``plain_directory`` of an archive read by ``pread``."""
    if speedups.COMPILED is None or archive_size < _END.size:
        return None
    end_at = archive_size - _END.size
    record = pread(_END.size, end_at)
    if len(record) != _END.size:
        return None
    if record[:4] != _END_SIGNATURE or record[-2:] != b"\0\0":
        # A comment, or no record: the last signature in the last 64 KiB, as zipfile finds it.
        window = max(archive_size - (1 << 16) + 1 - _END.size, 0)
        tail = pread(archive_size - window, window)
        at = tail.rfind(_END_SIGNATURE)
        if at < 0 or at + _END.size > len(tail):
            return None
        record, end_at = tail[at : at + _END.size], window + at
    _, disk, disk_start, here, entries, directory_size, directory_at, _ = _END.unpack(record)
    if end_at >= _END64_LOCATOR.size:
        locator = pread(_END64_LOCATOR.size, end_at - _END64_LOCATOR.size)
        if locator[:4] == b"PK\x06\x07":  # zip64: zipfile reads the record before the locator
            _, locator_disk, _, disks = _END64_LOCATOR.unpack(locator)
            end_at -= _END64_LOCATOR.size + _END64.size
            if locator_disk or disks > 1 or end_at < 0:
                return None
            raw = pread(_END64.size, end_at)
            if len(raw) != _END64.size or raw[:4] != b"PK\x06\x06":
                return None
            fields = _END64.unpack(raw)
            disk, disk_start, here, entries, directory_size, directory_at = fields[4:]
    # Bytes before the first member (a self-extracting stub) shift every offset, as zipfile
    # reads them; a directory declared past its record is not plain.
    concat = end_at - directory_size - directory_at
    if disk or disk_start or here != entries or concat < 0:
        return None
    directory_at += concat
    _check_extent(entries, directory_size, MAX_ARCHIVE_MEMBERS, label)
    directory = pread(directory_size, directory_at)
    if len(directory) != directory_size:
        return None
    found = speedups.plain_directory(
        directory,
        directory_at,
        concat,
        archive_size,
        Member,
        unicode_path=READS_UNICODE_PATH,
        entries=entries,
    )
    if found is None:
        return None
    members, declared = found
    _check_count(len(members), MAX_ARCHIVE_MEMBERS, label)
    _check_inflation(declared, archive_size, label)
    return members


def _check_inflation(declared: int, archive_size: int, label: object) -> None:
    """Refuse an archive whose members together declare more than the inflation bound."""
    bound = max(INFLATION_FLOOR, MAX_INFLATION_RATIO * archive_size)
    if declared > bound:
        raise InputError(
            f"{label}: its members declare {declared} bytes uncompressed, above the {bound} "
            f"allowed for an archive of {archive_size} bytes (the larger of {INFLATION_FLOOR} "
            f"and {MAX_INFLATION_RATIO}x its size: a zip bomb?) (docs/limits.md); "
            "not read"
        )


def overlaps(infos: list[zipfile.ZipInfo], directory_at: int, archive_size: int) -> dict[int, str]:
    """Why each member whose data overlap the next member's local header or the directory is
    not read: the construction of the overlapping zip bombs (one member's data holds the next
    members, so each byte is inflated once per member covering it), which CPython 3.12's
    ``zipfile`` refuses too. Real archives have none. Data past the archive's end is left to
    the reader (a truncated member). Keyed by the member's place in ``infos``."""
    found: dict[int, str] = {}
    if not infos:  # an empty archive (its directory holds nothing)
        return found
    ordered = sorted(range(len(infos)), key=lambda i: infos[i].header_offset)
    for at, next_at in zip(ordered, [*ordered[1:], None], strict=True):
        info, after = infos[at], None if next_at is None else infos[next_at]
        # What a member spans at least: its local header, its name (the local header must
        # name it as the directory does) and its data; the extra field, whose length only the
        # local header says, comes on top.
        end = info.header_offset + LOCAL_HEADER.size + _name_bytes(info) + info.compress_size
        if after is not None and after.header_offset < end:
            found[at] = f"its data overlaps member {after.filename!r} (a zip bomb's construction)"
        elif info.header_offset < directory_at < end <= archive_size:
            found[at] = "its data overlaps the zip directory (a damaged archive)"
    return found


def _name_bytes(info: zipfile.ZipInfo) -> int:
    """How many bytes a member's name takes in its headers (``zipfile`` decodes it as UTF-8
    when flag 0x800 says so, else as cp437, which maps every byte)."""
    try:
        return len(info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437"))
    except UnicodeEncodeError:  # pragma: no cover - a decoded name always encodes back
        return 0


def file_identity(status: os.stat_result) -> tuple[int, int, int, int]:
    """What tells one file from another that took its place: device, inode, size, mtime."""
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


class WheelReader:
    """One zip archive's directory, read for member streaming (``chunks``; or hand ``members``
    to ``scan.pool.scan_members``). ``identity`` tells the file whose directory it is (None for
    a ``source`` that is not a local file: ``path`` is then only its name in messages)."""

    def __init__(
        self,
        path: Path,
        *,
        max_member_bytes: int = DEFAULT_MAX_MEMBER,
        source: Source | None = None,
    ) -> None:
        self.path = path
        self.max_member_bytes = max_member_bytes
        self.source = source
        self.members: list[Member] = []
        self.name_problems: list[tuple[str, str]] = []
        self.identity: tuple[int, int, int, int] | None = None
        try:
            if source is not None:
                self._size = source.size
                plain = plain_directory_at(source.pread, self._size, path)
                if plain is not None:
                    self.members = plain
                    return
                with open_zip(source.reader(), path) as zf:
                    infos = zf.infolist()
                    directory_at = zf.start_dir
            else:
                # Only a regular file is opened (a FIFO or a device would block or never end).
                with open_regular(path) as fh:
                    status = os.fstat(fh.fileno())
                    self._size = status.st_size
                    self.identity = file_identity(status)
                    plain = plain_directory(fh, self._size, path)
                    if plain is not None:
                        self.members = plain
                        return
                    with open_zip(fh, path) as zf:
                        infos = zf.infolist()
                        directory_at = zf.start_dir
        except FileNotFoundError:
            raise InputError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise InputError(f"{path}: is a directory, not a wheel") from None
        except NotRegularFile as exc:
            why = "is a directory, not a wheel" if path.is_dir() else exc.strerror
            raise InputError(f"{path}: {why}") from None
        except _transfer_error() as exc:  # a file on an index that could not be read as asked
            raise InputError(f"{path}: {exc}") from None
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
            raise InputError(
                f"{path}: not a readable zip archive ({exc})",
                hint="the file is truncated or corrupt: download it again",
            ) from None
        self._list(infos, directory_at)

    def _list(self, infos: list[zipfile.ZipInfo], directory_at: int) -> None:
        seen: set[str] = set()
        overlapping = overlaps(infos, directory_at, self._size)
        for at, info in enumerate(infos):
            name = info.filename
            if name.endswith("/"):  # a folder (not ``is_dir()``: it fails on an empty name)
                continue
            reason = (
                unsafe_name_reason(name)
                or (unsafe_name_reason(info.orig_filename) if info.orig_filename != name else None)
                or overlapping.get(at)
                or _unreadable_flags(info)
            )
            if reason:
                self.name_problems.append((name, f"{reason}; member not read"))
                continue
            if name in seen:
                self.name_problems.append((name, "duplicate member name; second copy not read"))
                continue
            seen.add(name)
            self.members.append(
                Member(
                    name=name,
                    size=info.file_size,
                    compressed_size=info.compress_size,
                    method=info.compress_type,
                    crc=info.CRC,
                    header_offset=info.header_offset,
                    header_name=info.orig_filename,
                )
            )

    def chunks(self, member: Member) -> Iterator[bytes]:
        """Inflate ``member`` as a sequence of chunks; raise ``MemberError`` on any defect.
        Chunks are inflated as they are asked for: of a ``source``, only the compressed bytes
        behind the chunks taken are read."""
        if self.source is not None:
            return member_chunks_at(self.source.pread, self._size, member, self.max_member_bytes)
        return member_chunks(self.path, self._size, member, self.max_member_bytes)

    @property
    def archive_size(self) -> int:
        """The archive's size in bytes, which bounds every member read."""
        return self._size


# General-purpose flag bits no installer reads past: pip's zipfile refuses such a member, so
# the audit must not read it as if it were plain (what it found would not be what installs).
_ENCRYPTED, _PATCHED, _STRONG_ENCRYPTION = 0x1, 0x20, 0x40


def _unreadable_flags(info: zipfile.ZipInfo) -> str | None:
    if info.flag_bits & (_ENCRYPTED | _STRONG_ENCRYPTION):
        return "encrypted member (no installer can read it)"
    if info.flag_bits & _PATCHED:
        return "compressed patched data (zip flag bit 5: no installer can read it)"
    return None
