"""ELF cubins stored outside any fatbin container ("raw cubins").

Some libraries keep device code as bare ELF cubins in ordinary data sections (``.rodata``,
``.data``) and load it with ``cuModuleLoadData``; cubloaty counts them. The scanner finds them
by the ELF magic, and this parser decides whether the bytes there really are a cubin: an ELF
header with ``e_machine`` EM_CUDA (190), a section table inside the image that starts with the
null section and names a string table, every section's data inside the image, bounded sizes.
Anything else (a host ELF embedded as data, four bytes that merely spell ``\\x7fELF``) is not
a cubin and yields nothing.

The SM comes from ``e_flags`` (``elf.cubin_sm``, the decoding used for standalone cubins and by
``audit --deep`` for cubins inside fatbins). ``e_flags`` does not record the 'a'/'f' suffix (an
sm_90a cubin from nvcc 13.0 has the same ``e_flags`` as an sm_90 one); the suffix is taken from
the ptxas command line that ``.note.nv.tkinfo`` records (``-arch sm_90a``) when it names the
same SM, else the cubin is reported plain with a warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from archwheel.binary.elf import (
    EM_CUDA,
    SHT_NOBITS,
    FormatError,
    cubin_sm,
    parse_elf_header,
    parse_section_headers,
)
from archwheel.binary.stream import Need, Parser

# Bounds (docs/limits.md): real cubins have a few dozen sections and are at most a
# few hundred MB; a header claiming more is damaged.
MAX_RAW_CUBIN_SECTIONS = 4096
MAX_RAW_CUBIN_BYTES = 1 << 30
MAX_NOTE_BYTES = 4096
MAX_NAMES_BYTES = 1 << 20  # the section name table of one cubin
SHT_STRTAB = 3
_TKINFO = b".note.nv.tkinfo"
_ARCH_OPTION = re.compile(rb"-arch[= ]sm_(\d{2,3})([af]?)\b")


@dataclass(frozen=True)
class RawCubin:
    """What the parser found at one ELF magic: a cubin's extent and arch, or why it is damaged.

    ``error`` is set for an EM_CUDA header whose tables do not fit (a damaged cubin); such a
    candidate is reported, never counted as device code.
    """

    offset: int  # absolute offset of the ELF header
    size: int  # bytes the cubin spans (header, sections, section table)
    sm: int
    suffix: str = ""  # "a", "f" or "" (from .note.nv.tkinfo)
    suffix_known: bool = False  # whether the note named the SM (else the suffix is unknown)
    error: str | None = None


def raw_cubin_parser(offset: int) -> Parser:
    """Parse the ELF image at ``offset``; return a ``RawCubin``, or None when it is no cubin."""
    head = yield Need(offset, 64)
    try:
        header = parse_elf_header(head)
    except FormatError:
        return None  # the magic alone, or a header too broken to be anything
    if header.e_machine != EM_CUDA:
        return None  # a host ELF (or other machine) embedded as data: not device code
    sm = cubin_sm(header)

    def damaged(why: str) -> RawCubin:
        return RawCubin(offset, 0, sm, error=why)

    if not header.is64:
        return damaged("32-bit cubin header (nvcc emits 64-bit cubins)")
    if header.e_type not in (1, 2):
        return damaged(f"ELF type {header.e_type} is neither relocatable nor executable")
    if not 10 <= sm <= 255:
        return damaged(f"e_flags {header.e_flags:#x} name no SM")
    if header.shoff < 64 or header.shnum == 0:
        return damaged("no section table")
    if header.shnum > MAX_RAW_CUBIN_SECTIONS:
        return damaged(f"{header.shnum} sections (limit {MAX_RAW_CUBIN_SECTIONS})")
    table_end = header.shoff + header.table_size
    if table_end > MAX_RAW_CUBIN_BYTES:
        return damaged(f"section table at {header.shoff:#x} lies beyond any real cubin")
    table = yield Need(offset + header.shoff, header.table_size)
    try:
        sections = parse_section_headers(header, table, header.shnum)
    except FormatError as exc:
        return damaged(str(exc))
    first = sections[0]
    if (first.name_offset, first.sh_type, first.offset, first.size) != (0, 0, 0, 0):
        return damaged("its section table does not start with the null section")
    if not 0 < header.shstrndx < len(sections):
        return damaged(f"invalid section name table index {header.shstrndx}")
    strtab = sections[header.shstrndx]
    if strtab.sh_type != SHT_STRTAB or not 0 < strtab.size <= MAX_NAMES_BYTES:
        return damaged("its section name table is not a string table")
    extent = max(table_end, 64)
    if header.phnum:
        extent = max(extent, header.phoff + header.phnum * header.phentsize)
    for index, section in enumerate(sections):
        if section.sh_type == SHT_NOBITS or not section.size:
            continue
        end = section.offset + section.size
        if section.offset < 64 or end > MAX_RAW_CUBIN_BYTES:
            return damaged(
                f"section {index} lies outside the cubin ({section.offset:#x}+{section.size})"
            )
        extent = max(extent, end)
    names = yield Need(offset + strtab.offset, strtab.size)
    if len(names) < strtab.size or names[:1] != b"\0":
        return damaged("its section name table is not a string table")
    suffix, known = "", False
    for section in sections:
        start = section.name_offset
        if names[start : start + len(_TKINFO) + 1] == _TKINFO + b"\0":
            if 0 < section.size <= MAX_NOTE_BYTES:
                note = yield Need(offset + section.offset, section.size)
                match = _ARCH_OPTION.search(note)
                if match and int(match.group(1)) == sm:
                    suffix, known = match.group(2).decode(), True
            break
    return RawCubin(offset, extent, sm, suffix, known)
