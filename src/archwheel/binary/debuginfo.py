"""What ``strip`` would remove from an ELF file: its debug sections and its symbol table.

Extension modules built by setuptools carry DWARF debug information because distutils
compiles with the interpreter's own ``CFLAGS`` (``-g`` on every CPython build): a module with
a few hundred KiB of device code ships 10 MiB. PyTorch's own libraries are CMake release
builds: no ``.debug_*`` section, ``.symtab`` kept (backtraces and profilers name functions).
This module measures both, from the section table alone, so that the repair step strips only
what has something to strip and says what it saved.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from archwheel.binary.elf import (
    ELF_MAGIC,
    FormatError,
    RawSection,
    debug_bytes,
    name_sections,
    parse_elf_header,
    parse_section_headers,
    section_count,
)
from archwheel.effects.files import open_regular

MAX_NAMES = 1 << 20  # a section-name table larger than this is not read (ordinary: < 1 KiB)
SHT_SYMTAB = 2


@dataclass(frozen=True)
class StripView:
    """The bytes in the sections ``strip --strip-debug`` and ``strip --strip-all`` remove."""

    size: int
    debug_bytes: int  # .debug_*, .zdebug_* (DWARF), .gnu_debuglink excluded
    symtab_bytes: int  # .symtab and its .strtab (not the dynamic symbols the loader reads)

    @property
    def has_debug(self) -> bool:
        """Whether ``strip --strip-debug`` would remove anything from the file."""
        return self.debug_bytes > 0


def read_section_table(f: BinaryIO, size: int) -> tuple[list[RawSection], int] | None:
    """The section headers of the open ELF file ``f`` (``size`` bytes) and the index of its
    section-name table; None when it is not an ELF file or its section table cannot be read."""
    f.seek(0)
    head = f.read(64)
    if head[:4] != ELF_MAGIC:
        return None
    try:
        header = parse_elf_header(head)
        if header.shoff == 0 or header.shoff >= size:
            return None
        first = None
        if header.shnum == 0 or header.shstrndx == 0xFFFF:
            f.seek(header.shoff)
            first = parse_section_headers(header, f.read(header.shentsize), 1)[0]
        count, strndx = section_count(header, first)
        f.seek(header.shoff)
        return parse_section_headers(header, f.read(count * header.shentsize), count), strndx
    except FormatError:
        return None


def strip_view(path: Path) -> StripView | None:
    """The debug and symbol-table bytes of the ELF file at ``path``; None when it is not an ELF
    file or its section table cannot be read (``strip`` would refuse it too)."""
    with open_regular(path) as f:
        size = f.seek(0, 2)
        table = read_section_table(f, size)
        if table is None:
            return None
        raw, strndx = table
        names = b""
        if 0 < strndx < len(raw) and raw[strndx].offset < size:
            f.seek(raw[strndx].offset)
            names = f.read(min(raw[strndx].size, MAX_NAMES))
    sections, _ = name_sections(raw, names, size)
    debug = debug_bytes(sections)
    symtab = 0
    for r in raw:
        if r.sh_type == SHT_SYMTAB:
            symtab += r.size
            if 0 < r.link < len(raw) and r.link != strndx:
                symtab += raw[r.link].size
    return StripView(size, debug, min(symtab, size))
