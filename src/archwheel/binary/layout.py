"""Where things are in a binary: ELF sections, ar archive members, raw fatbins.

The parsers here are ``stream.Parser`` generators: they ask for the byte ranges they need and
return a ``FileLayout``. One layout describes one file; an ar archive yields one ``Unit`` per
member object file, an ELF file or a raw fatbin a single unit.
"""

from __future__ import annotations

import bisect
from collections.abc import Generator
from dataclasses import dataclass
from typing import NamedTuple

from archwheel.binary.elf import (
    ELF_MAGIC,
    MAX_NAME,
    MAX_SHSTRTAB,
    FormatError,
    Section,
    cubin_sm,
    has_interpreter,
    name_sections,
    parse_elf_header,
    parse_section_headers,
    section_count,
)
from archwheel.binary.fatbin import CONTAINER_MAGIC_BYTES
from archwheel.binary.model import Severity
from archwheel.binary.stream import Need

AR_MAGIC = b"!<arch>\n"
AR_THIN_MAGIC = b"!<thin>\n"
AR_HEADER_SIZE = 60
# The most members of one ar archive read as libraries: far above any real static library.
MAX_AR_MEMBERS = 65536
FATBIN_SECTIONS = frozenset({".nv_fatbin", "__nv_relfatbin"})
RAW_FATBIN_SECTION = "(fatbin)"
NO_SECTION = "(no section)"


def sniff(head: bytes) -> str | None:
    """The kind of binary from its first bytes: ``elf``, ``ar``, ``fatbin`` or None."""
    if head.startswith(ELF_MAGIC):
        return "elf"
    if head.startswith((AR_MAGIC, AR_THIN_MAGIC)):
        return "ar"
    if head.startswith(CONTAINER_MAGIC_BYTES):
        return "fatbin"
    return None


class Note(NamedTuple):
    """A complaint about a file's structure."""

    severity: Severity
    message: str


def _error(message: str) -> tuple[Note]:
    return (Note(Severity.ERROR, message),)


@dataclass(frozen=True)
class Unit:
    """One library inside a file: the file itself, or one member of an ar archive."""

    name: str  # "" for the file itself; the member name inside an archive
    start: int
    end: int
    file_kind: str
    sections: tuple[Section, ...] = ()  # absolute offsets
    cubin_sm: int | None = None
    problems: tuple[Note, ...] = ()

    def section_at(self, offset: int) -> Section | None:
        """The section holding ``offset``: a binary search (a library may have 65536 sections).

        Sections overlapping an earlier one (malformed files only) are not answered.
        """
        index = self.__dict__.get("_index")
        if index is None:
            # Made once, on the first lookup (not a cached_property: its lock costs more than a
            # small unit's whole index, and an archive may hold 65536 units).
            index = self.__dict__["_index"] = self._section_index()
        starts, kept = index
        i = bisect.bisect_right(starts, offset) - 1
        if i >= 0 and offset < kept[i].end:
            return kept[i]
        return None

    def _section_index(self) -> tuple[list[int], list[Section]]:
        kept: list[Section] = []
        for s in sorted(
            (s for s in self.sections if s.has_file_data), key=lambda s: (s.offset, -s.size)
        ):
            if not kept or s.offset >= kept[-1].end:
                kept.append(s)
        return [s.offset for s in kept], kept


@dataclass(frozen=True)
class FileLayout:
    """Where the units of one file lie and what could not be read; returned by the layout
    parsers, and the scan attributes each fatbin found to the unit at its offset."""

    kind: str  # "elf", "ar", "fatbin"
    units: tuple[Unit, ...]
    problems: tuple[Note, ...] = ()

    def unit_at(self, offset: int) -> Unit | None:
        """The unit holding ``offset`` (units never overlap: an archive's members follow on)."""
        index = self.__dict__.get("_index")
        if index is None:
            index = self.__dict__["_index"] = self._unit_index()
        starts, ordered = index
        i = bisect.bisect_right(starts, offset) - 1
        if i >= 0 and offset < ordered[i].end:
            return ordered[i]
        return None

    def _unit_index(self) -> tuple[list[int], list[Unit]]:
        ordered = sorted(self.units, key=lambda u: u.start)
        return [u.start for u in ordered], ordered


LayoutParser = Generator[Need, bytes, FileLayout]
UnitParser = Generator[Need, bytes, Unit]


def layout_parser(kind: str, size: int) -> LayoutParser:
    """The layout parser for a file of ``kind`` (from ``sniff``) and ``size`` bytes."""
    if kind == "elf":
        unit = yield from elf_unit(0, size, "")
        return FileLayout("elf", (unit,))
    if kind == "ar":
        return (yield from ar_layout(size))
    section = Section(RAW_FATBIN_SECTION, 1, 0, size)
    return FileLayout("fatbin", (Unit("", 0, size, "fatbin", (section,)),))


def elf_unit(base: int, size: int, name: str) -> UnitParser:
    """Parse the ELF header and section table of an ELF image at ``base``."""
    head = yield Need(base, 64)
    try:
        header = parse_elf_header(head)
    except FormatError as exc:
        return Unit(name, base, base + size, "unknown-elf", problems=_error(str(exc)))
    kind = header.file_kind
    sm = cubin_sm(header) if kind == "cubin" else None
    if kind == "shared-object" and 0 < header.phnum <= 4096 and header.phoff < size:
        # nvcc and modern toolchains link executables as PIE (type DYN): an interpreter tells.
        program_headers = yield Need(base + header.phoff, header.phnum * header.phentsize)
        if has_interpreter(header, program_headers):
            kind = "executable"
    if header.shoff == 0:
        note = Note(Severity.WARNING, "no section table: device code attributed to no section")
        return Unit(name, base, base + size, kind, cubin_sm=sm, problems=(note,))
    if header.shoff >= size:
        return Unit(
            name,
            base,
            base + size,
            kind,
            cubin_sm=sm,
            problems=_error(
                f"section table offset {header.shoff} points past the end of the file "
                f"({size} bytes): truncated or corrupt"
            ),
        )
    first_raw = None
    if header.shnum == 0 or header.shstrndx == 0xFFFF:
        first = yield Need(base + header.shoff, header.shentsize)
        try:
            first_raw = parse_section_headers(header, first, 1)[0]
        except FormatError as exc:
            return Unit(name, base, base + size, kind, cubin_sm=sm, problems=_error(str(exc)))
    try:
        count, strndx = section_count(header, first_raw)
    except FormatError as exc:
        return Unit(name, base, base + size, kind, cubin_sm=sm, problems=_error(str(exc)))
    table = yield Need(base + header.shoff, count * header.shentsize)
    try:
        raw = parse_section_headers(header, table, count)
    except FormatError as exc:
        return Unit(name, base, base + size, kind, cubin_sm=sm, problems=_error(str(exc)))
    names = b""
    problems: list[Note] = []
    if 0 < strndx < len(raw):
        strtab = raw[strndx]
        if strtab.offset < size:
            length = min(strtab.size, MAX_SHSTRTAB, size - strtab.offset)
            names = yield Need(base + strtab.offset, length)
        else:
            problems.append(
                Note(Severity.ERROR, "section name table points past the end of the file")
            )
    elif count:
        problems.append(Note(Severity.ERROR, f"invalid section name table index {strndx}"))
    sections, complaints = name_sections(raw, names, size, base)
    problems.extend(Note(Severity.ERROR, c) for c in complaints)
    return Unit(name, base, base + size, kind, tuple(sections), sm, tuple(problems))


def ar_layout(size: int) -> LayoutParser:
    """Parse a System V / GNU ar archive: one unit per ELF (or raw fatbin) member."""
    magic = yield Need(0, 8)
    if magic == AR_THIN_MAGIC:
        note = Note(Severity.WARNING, "thin archive: its members are separate files")
        return FileLayout("ar", (), (note,))
    units: list[Unit] = []
    problems: list[Note] = []
    long_names = b""
    pos = len(AR_MAGIC)
    while pos + AR_HEADER_SIZE <= size:
        header = yield Need(pos, AR_HEADER_SIZE)
        if len(header) < AR_HEADER_SIZE or header[58:60] != b"`\n":
            problems.append(Note(Severity.ERROR, f"damaged archive member header at {pos}"))
            break
        raw_name = header[:16].decode("ascii", "replace").rstrip()
        member_size = _decimal(header[48:58])
        if member_size is None:
            # Only plain decimal digits: "-60" would walk backwards and never end.
            problems.append(Note(Severity.ERROR, f"archive member at {pos}: invalid size"))
            break
        if len(units) >= MAX_AR_MEMBERS:
            problems.append(
                Note(
                    Severity.ERROR,
                    f"more than {MAX_AR_MEMBERS} archive members: the rest are not read (limit)",
                )
            )
            break
        data = pos + AR_HEADER_SIZE
        if data + member_size > size:
            problems.append(
                Note(Severity.ERROR, f"archive member {raw_name!r} runs past the end: truncated")
            )
            member_size = size - data
        name = raw_name
        unplaced = "it has no name"
        if raw_name in ("/", "/SYM64/"):
            name = unplaced = ""  # symbol table
        elif raw_name == "//":
            long_names = yield Need(data, min(member_size, MAX_SHSTRTAB))
            name = unplaced = ""
        elif raw_name.startswith("#1/"):  # BSD: the name follows the header
            name_len = min(_decimal(raw_name[3:].encode()) or 0, member_size)
            name_bytes = yield Need(data, min(name_len, 4096))
            name = name_bytes.rstrip(b"\0").decode("utf-8", "replace")
            data += name_len
            member_size -= name_len
        elif raw_name.startswith("/") and raw_name[1:].isdigit():
            index = int(raw_name[1:])
            if index >= len(long_names):
                unplaced = (
                    f"its long name {raw_name} points past the name table ({len(long_names)} bytes)"
                )
            stop = min(len(long_names), index + MAX_NAME)
            end = long_names.find(b"/\n", index, stop)
            name = long_names[index : end if end >= 0 else stop].decode("utf-8", "replace")
        else:
            name = raw_name.rstrip("/")
        if not name and unplaced and member_size > 0:
            # A member that cannot be named is not silently dropped: its device code would
            # show as missing. The result is incomplete and says which member.
            problems.append(
                Note(Severity.ERROR, f"archive member at offset {pos}: {unplaced}: not read")
            )
        if name and member_size > 0:
            head = yield Need(data, 8)
            if head.startswith(ELF_MAGIC):
                unit = yield from elf_unit(data, member_size, name)
                units.append(unit)
            elif head.startswith(CONTAINER_MAGIC_BYTES):
                section = Section(RAW_FATBIN_SECTION, 1, data, member_size)
                units.append(Unit(name, data, data + member_size, "fatbin", (section,)))
        # Always forward: the next header starts after this one and its (non-negative) data.
        pos = max(data + member_size + (member_size & 1), pos + AR_HEADER_SIZE)
    return FileLayout("ar", tuple(units), tuple(problems))


def _decimal(field: bytes) -> int | None:
    """An ar header's decimal number field: ASCII digits, space-padded; None when it is not."""
    text = field.strip(b" ")
    if not text:
        return 0
    if not text.isdigit():  # bytes.isdigit: ASCII digits only, no sign, no underscores
        return None
    return int(text)
