"""ELF headers and section tables, parsed from bytes (little-endian ELF32 and ELF64).

Pure functions over ``bytes``; every inconsistency raises ``FormatError`` with a one-line
reason. Only what the audit needs is decoded: the file type, the machine, ``e_flags`` (for
standalone cubins) and the sections' names, types, offsets and sizes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190
SHT_NOBITS = 8
SHN_XINDEX = 0xFFFF
ET_NAMES = {1: "relocatable", 2: "executable", 3: "shared-object", 4: "core"}

# The most section headers and the largest name table we accept: far above any real library
# (libtorch_cuda.so has 34 sections), low enough that a lying header cannot exhaust memory.
MAX_SECTIONS = 65536
MAX_SHSTRTAB = 16 << 20
MAX_NAME = 1024  # bytes of one section or member name looked at (names are shown cut to 64-200)


class FormatError(ValueError):
    """Bytes that do not form what they claim to be; the message is one line."""


@dataclass(frozen=True)
class ElfHeader:
    """The fields of an ELF header the audit uses; made by ``parse_elf_header``."""

    is64: bool
    e_type: int
    e_machine: int
    e_flags: int
    osabi: int
    abiversion: int
    shoff: int
    shentsize: int
    shnum: int
    shstrndx: int
    phoff: int = 0
    phentsize: int = 0
    phnum: int = 0

    @property
    def file_kind(self) -> str:
        """``"cubin"`` for a CUDA machine, else the file type (``"shared-object"`` ...)."""
        if self.e_machine == EM_CUDA:
            return "cubin"
        return ET_NAMES.get(self.e_type, "unknown-elf")

    @property
    def table_size(self) -> int:
        """The bytes of the section header table, read in one piece."""
        return self.shnum * self.shentsize


@dataclass(frozen=True)
class Section:
    """A named section that holds bytes in the file (offset absolute in an archive).

    Made by ``name_sections`` and by the layout readers; the fatbin and debug scans read it.
    """

    name: str
    sh_type: int
    offset: int
    size: int

    @property
    def has_file_data(self) -> bool:
        """Whether the section occupies bytes of the file (not ``SHT_NOBITS``, not empty)."""
        return self.sh_type != SHT_NOBITS and self.size > 0

    @property
    def end(self) -> int:
        """The file offset one past the section's last byte."""
        return self.offset + self.size


class RawSection(NamedTuple):
    """A section header as stored (a tuple: a library may have 65536 of them)."""

    name_offset: int
    sh_type: int
    offset: int
    size: int
    link: int


_SECTION64 = struct.Struct("<IIQQQQIIQQ")
_SECTION32 = struct.Struct("<IIIIIIIIII")


def parse_elf_header(data: bytes) -> ElfHeader:
    """Decode the ELF identification and header (needs the first 64 bytes, 52 for ELF32)."""
    if len(data) < 16 or data[:4] != ELF_MAGIC:
        raise FormatError("not an ELF file")
    ei_class, ei_data = data[4], data[5]
    if ei_class not in (1, 2):
        raise FormatError(f"invalid ELF class {ei_class}")
    if ei_data != 1:
        raise FormatError("big-endian ELF is not supported")
    is64 = ei_class == 2
    need = 64 if is64 else 52
    if len(data) < need:
        raise FormatError(f"truncated ELF header ({len(data)} of {need} bytes)")
    if is64:
        (e_type, e_machine, _v, _entry, phoff, shoff, e_flags, _ehsize, phentsize, phnum,
         shentsize, shnum, shstrndx) = struct.unpack_from("<HHIQQQIHHHHHH", data, 16)  # fmt: skip
    else:
        (e_type, e_machine, _v, _entry, phoff, shoff, e_flags, _ehsize, phentsize, phnum,
         shentsize, shnum, shstrndx) = struct.unpack_from("<HHIIIIIHHHHHH", data, 16)  # fmt: skip
    expected_entsize = 64 if is64 else 40
    if shoff and shentsize != expected_entsize:
        raise FormatError(f"section header size {shentsize}, expected {expected_entsize}")
    return ElfHeader(
        is64=is64,
        e_type=e_type,
        e_machine=e_machine,
        e_flags=e_flags,
        osabi=data[7],
        abiversion=data[8],
        shoff=shoff,
        shentsize=shentsize,
        shnum=shnum,
        shstrndx=shstrndx,
        phoff=phoff,
        phentsize=phentsize,
        phnum=phnum,
    )


def parse_section_headers(header: ElfHeader, table: bytes, count: int) -> list[RawSection]:
    """Decode ``count`` section headers from ``table``."""
    layout = _SECTION64 if header.is64 else _SECTION32
    size = layout.size
    if len(table) < count * size:
        raise FormatError(
            f"section table at offset {header.shoff} runs past the end of the file "
            f"({len(table)} of {count * size} bytes present)"
        )
    return [
        RawSection(name, sh_type, offset, sh_size, link)
        for name, sh_type, _flags, _addr, offset, sh_size, link, _info, _align, _entsize in (
            layout.iter_unpack(memoryview(table)[: count * size])
        )
    ]


def section_count(header: ElfHeader, first: RawSection | None) -> tuple[int, int]:
    """The real section count and name-table index, following the extended-numbering rules."""
    count = header.shnum
    strndx = header.shstrndx
    if count == 0 and first is not None:
        count = first.size
    if strndx == SHN_XINDEX and first is not None:
        strndx = first.link
    if count > MAX_SECTIONS:
        raise FormatError(f"absurd section count {count}")
    return count, strndx


def is_debug_section(name: str) -> bool:
    """A section ``strip --strip-debug`` removes: DWARF (``.debug_*``, compressed ``.zdebug_*``)
    and the older stabs (the compiled scan tests the same names, _speedups.c)."""
    return name.startswith((".debug_", ".zdebug_")) or name in (".debug", ".stab", ".stabstr")


def debug_bytes(sections: Iterable[Section]) -> int:
    """The bytes a file's debug sections hold."""
    return sum(s.size for s in sections if s.has_file_data and is_debug_section(s.name))


def name_sections(
    raw: list[RawSection], names: bytes, file_size: int | None, base: int = 0
) -> tuple[list[Section], list[str]]:
    """Resolve names and check bounds. Returns the sections that hold bytes (offsets ``base``
    higher: absolute in an archive) and one-line complaints.

    A name is read as stored (UTF-8, up to ``MAX_NAME`` bytes): exact, never escaped here.
    A section whose data runs past the end of the file is kept, clipped, and reported.
    """
    problems: list[str] = []
    sections: list[Section] = []
    labels: dict[int, str] = {}  # sections share names (.text, .nv_fatbin): each read once
    for i, r in enumerate(raw):
        label = labels.get(r.name_offset)
        if label is None:
            if r.name_offset < len(names):
                # Look for the end of the name within MAX_NAME bytes: a 16 MiB table without a
                # NUL, searched from 65536 offsets, would be quadratic.
                stop = min(len(names), r.name_offset + MAX_NAME)
                end = names.find(b"\0", r.name_offset, stop)
                label = names[r.name_offset : end if end >= 0 else stop].decode("utf-8", "replace")
                labels[r.name_offset] = label
            else:
                label = f"<section {i}>" if i else ""
        size = r.size
        if file_size is not None and r.sh_type != SHT_NOBITS and r.offset + r.size > file_size:
            problems.append(
                f"section {label or i} claims bytes {r.offset}..{r.offset + r.size} "
                f"past the end of the file ({file_size} bytes)"
            )
            size = max(0, file_size - r.offset)
        if size:
            sections.append(Section(label, r.sh_type, base + r.offset, size))
    return sections, problems


PT_INTERP = 3


def has_interpreter(header: ElfHeader, table: bytes) -> bool:
    """Whether the program headers name an interpreter (a PIE executable, not a library)."""
    size = header.phentsize
    if size < 4:
        return False
    for i in range(min(header.phnum, len(table) // size)):
        (p_type,) = struct.unpack_from("<I", table, i * size)
        if p_type == PT_INTERP:
            return True
    return False


def cubin_sm(header: ElfHeader) -> int:
    """The SM number a standalone cubin was built for, from ``e_flags``.

    ABI version 8 and later (CUDA 12.9/13) keep it in bits 8-15; older cubins in bits 0-7.
    Neither encoding records the 'a'/'f' suffix (cuda-facts.md section 5).
    """
    if header.abiversion >= 8:
        return (header.e_flags >> 8) & 0xFF
    return header.e_flags & 0xFF
