"""Byte-level builders for test inputs: fatbin containers, ELF files, ar archives, zips.

They follow the published layouts (cuda-facts.md section 5, the ELF and ar specifications)
and share no code with the parsers under test, so a parser bug cannot hide behind a builder
that makes the same mistake. Real nvcc output and real wheels are tested elsewhere.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

MAGIC = 0xBA55ED50


@dataclass
class Entry:
    kind: int = 2  # 1 PTX, 2 ELF, 8 LTO-IR
    sm: int = 80
    flags: int = 0x11  # 64-bit, host Linux
    payload: bytes = b"\x7fELF" + b"\0" * 60
    header_size: int = 64
    version: tuple[int, int] = (1, 8)  # (major, minor); PTX ISA for PTX entries
    compressed_size: int = 0
    uncompressed_size: int = 0
    marker: int = 0x0101
    padded_size: int | None = None

    def to_bytes(self) -> bytes:
        payload = self.payload + b"\0" * (-len(self.payload) % 8)
        padded = len(payload) if self.padded_size is None else self.padded_size
        header = struct.pack(
            "<HHIQIIHHIIIQ",
            self.kind,
            self.marker,
            self.header_size,
            padded,
            self.compressed_size,
            0,
            self.version[1],
            self.version[0],
            self.sm,
            0,
            0,
            self.flags,
        )
        header += b"\0" * 8  # 0x30
        header += struct.pack("<Q", self.uncompressed_size)  # 0x38
        header += b"\0" * (self.header_size - len(header))
        return header + payload


def container(*entries: Entry, declared: int | None = None, version: int = 1) -> bytes:
    body = b"".join(e.to_bytes() for e in entries)
    size = len(body) if declared is None else declared
    return struct.pack("<IHHQ", MAGIC, version, 16, size) + body


def elf64(
    sections: list[tuple[str, bytes]],
    *,
    e_type: int = 3,
    machine: int = 62,
    e_flags: int = 0,
    abiversion: int = 0,
    shoff_override: int | None = None,
    nobits: tuple[str, ...] = (),
    names_first: bool = False,
) -> bytes:
    """A little-endian ELF64 file with the given sections (8-byte aligned), SHT at the end.

    ``names_first`` puts the section name table before the sections instead of after them.
    """
    names = b"\0"
    name_offsets = []
    for name, _ in [*sections, (".shstrtab", b"")]:
        name_offsets.append(len(names))
        names += name.encode() + b"\0"
    body = bytearray(b"\0" * 64)
    if names_first:
        shstr_off = len(body)
        body += names
    placed = []
    for (name, data), name_off in zip(sections, name_offsets, strict=False):
        body += b"\0" * (-len(body) % 8)
        placed.append((name_off, len(body), len(data), 8 if name in nobits else 1))
        if name not in nobits:
            body += data
    body += b"\0" * (-len(body) % 8)
    if not names_first:
        shstr_off = len(body)
        body += names
        body += b"\0" * (-len(body) % 8)
    shoff = len(body)
    count = len(sections) + 2
    table = b"\0" * 64  # SHT_NULL
    for name_off, off, size, sh_type in placed:
        table += struct.pack("<IIQQQQIIQQ", name_off, sh_type, 0, 0, off, size, 0, 0, 8, 0)
    table += struct.pack(
        "<IIQQQQIIQQ", name_offsets[-1], 3, 0, 0, shstr_off, len(names), 0, 0, 1, 0
    )
    body += table
    ident = b"\x7fELF" + bytes([2, 1, 1, 0x41 if machine == 190 else 0, abiversion]) + b"\0" * 7
    header = ident + struct.pack(
        "<HHIQQQIHHHHHH",
        e_type,
        machine,
        1,
        0,
        0,
        shoff if shoff_override is None else shoff_override,
        e_flags,
        64,
        0,
        0,
        64,
        count,
        count - 1,
    )
    body[:64] = header
    return bytes(body)


def ar_archive(members: list[tuple[str, bytes]]) -> bytes:
    """A GNU ar archive (long names in the '//' member)."""
    out = b"!<arch>\n"
    long_names = b""
    headers = []
    for name, _ in members:
        if len(name) > 15:
            headers.append(f"/{len(long_names)}".encode())
            long_names += name.encode() + b"/\n"
        else:
            headers.append(name.encode() + b"/")

    def member(name: bytes, data: bytes) -> bytes:
        head = name.ljust(16) + b"0".ljust(12) + b"0".ljust(6) + b"0".ljust(6)
        head += b"100644".ljust(8) + str(len(data)).encode().ljust(10) + b"`\n"
        return head + data + (b"\n" if len(data) % 2 else b"")

    if long_names:
        out += member(b"//", long_names)
    for head, (_, data) in zip(headers, members, strict=True):
        out += member(head, data)
    return out


def write_zip(path: Path, members: list[tuple[str, bytes]], *, stored: bool = False) -> Path:
    method = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(path, "w", compression=method) as zf:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = method
            zf.writestr(info, data)
    return path


def overlapping_zip(path: Path, inner: bytes, *, same_header: bool = False) -> Path:
    """A zip of two stored members whose data overlap, as the overlapping zip bombs are made:
    the first member's data is the second member's local header and data (``same_header``: the
    second directory entry names the first one's local header instead). Every CRC and size is
    true, so a reader without an overlap check reads the shared bytes once per member."""

    def info(name: str, data: bytes, offset: int) -> zipfile.ZipInfo:
        made = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
        made.file_size = made.compress_size = len(data)
        made.CRC, made.header_offset = zlib.crc32(data), offset
        return made

    header_size = len(info("pkg/a.so", b"", 0).FileHeader(False))
    quoted = info("pkg/b.so", inner, header_size).FileHeader(False) + inner
    first = info("pkg/a.so", quoted, 0)
    second = info("pkg/b.so", quoted, 0) if same_header else info("pkg/b.so", inner, header_size)
    with path.open("wb") as fh:
        fh.write(first.FileHeader(False) + quoted)
        archive = zipfile.ZipFile(fh, "w")
        archive.filelist += [first, second]
        archive.start_dir = fh.tell()
        archive._didModify = True  # type: ignore[attr-defined]  # write its directory on close
        archive.close()
    return path


def elf_names_without_end(count: int, name_bytes: int) -> bytes:
    """An ELF of ``count`` section headers that all name offset 1 of a name table of
    ``name_bytes`` bytes holding no NUL after its first byte (a name search without an end)."""
    names = b"\0" + b"n" * name_bytes
    table_at, names_at = 64, 64 + count * 64
    table = bytearray(count * 64)
    for i in range(1, count - 1):
        struct.pack_into("<IIQQQQIIQQ", table, i * 64, 1, 1, 0, 0, names_at, 0, 0, 0, 1, 0)
    struct.pack_into(
        "<IIQQQQIIQQ", table, (count - 1) * 64, 1, 3, 0, 0, names_at, len(names), 0, 0, 1, 0
    )
    ident = b"\x7fELF" + bytes([2, 1, 1, 0, 0]) + b"\0" * 7
    header = ident + struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, table_at, 0, 64, 0, 0, 64, count, count - 1
    )
    return header + bytes(table) + names


def with_zip_flags(path: Path, bits: int) -> Path:
    """The zip at ``path`` with the general-purpose flag ``bits`` set in every local and central
    header (bit 0: encrypted, bit 5: patched data, bit 6: strong encryption); nothing else
    changes, so the bytes still read back as they were written."""
    data = bytearray(path.read_bytes())
    for magic, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        start = 0
        while (found := data.find(magic, start)) >= 0:
            flags = struct.unpack_from("<H", data, found + at)[0]
            struct.pack_into("<H", data, found + at, flags | bits)
            start = found + 4
    path.write_bytes(bytes(data))
    return path


def zip_declaring(path: Path, members: list[tuple[str, bytes]], declared: int) -> Path:
    """A real zip of ``members`` whose end records declare ``declared`` members (see
    ``with_zip64_end``): ``zipfile`` reads the directory by its size, so the archive opens and
    lists the real members; only the declared count lies."""
    write_zip(path, members, stored=True)
    path.write_bytes(with_zip64_end(path.read_bytes(), declared))
    return path


def with_zip64_end(data: bytes, declared: int) -> bytes:
    """A zip's bytes with its end record replaced by a zip64 record declaring ``declared``
    members, its locator, and a classic record that defers to them (a zip without a comment:
    its end record is its last 22 bytes)."""
    end = len(data) - 22
    assert data[end : end + 4] == b"PK\x05\x06", "a zip with a comment"
    size, offset = struct.unpack_from("<LL", data, end + 12)
    body = data[:end]
    record = struct.pack(
        "<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, declared, declared, size, offset
    )
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, len(body), 1)
    classic = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, size, offset, 0)
    return body + record + locator + classic


def raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()
