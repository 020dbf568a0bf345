"""The GNU build-id of an ELF file: where its bytes are, and the id of a file's own content.

``ld --build-id`` stamps a library with a hash of everything it linked, debug information
included. Once the repair step strips the debug information (``strip --strip-debug``), that id
names bytes no longer shipped, and two libraries whose shipped bytes are equal can carry
different ids: a compile farm's server compiles the same source into objects that differ in
their DWARF location lists alone (gcc's variable tracking on source with its includes pasted
in), and the linker's id then differs although code, data and symbols do not. ``content_id``
is the id of what ships: a hash of the file with the id's own bytes read as zeros, as long as
the id it replaces (SHA-1 for the usual 20 bytes, as ``ld``'s default).

Reading only: ``build_id_span`` finds the id from the section table (the ``SHT_NOTE`` sections,
an ``NT_GNU_BUILD_ID`` note owned by ``GNU``); the repair step writes it
(wheelbuild/wheel/repair.py).
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path
from typing import BinaryIO

from archwheel.binary.debuginfo import read_section_table
from archwheel.effects.files import open_regular

SHT_NOTE = 7
NT_GNU_BUILD_ID = 3
MAX_NOTE_BYTES = 1 << 16  # a note section larger than this is not searched (ordinary: 36 bytes)
CHUNK = 1 << 20


def _align4(n: int) -> int:
    return (n + 3) & ~3


def _build_id_in(note: bytes) -> tuple[int, int] | None:
    """Where, within the notes ``note``, the GNU build-id's descriptor lies: (start, length)."""
    at = 0
    while at + 12 <= len(note):
        namesz, descsz, kind = struct.unpack_from("<III", note, at)
        name_at = at + 12
        desc_at = name_at + _align4(namesz)
        if desc_at + descsz > len(note):
            return None
        if kind == NT_GNU_BUILD_ID and note[name_at : name_at + namesz] == b"GNU\0":
            return (desc_at, descsz) if 0 < descsz <= 64 else None
        at = desc_at + _align4(descsz)
    return None


def build_id_span(path: Path) -> tuple[int, int] | None:
    """The file offset and length of the GNU build-id of the ELF file at ``path``; None when it
    has none, is not an ELF file, or its section table cannot be read."""
    with open_regular(path) as f:
        size = f.seek(0, 2)
        table = read_section_table(f, size)
        if table is None:
            return None
        sections, _ = table
        for section in sections:
            if section.sh_type != SHT_NOTE or not 0 < section.size <= MAX_NOTE_BYTES:
                continue
            if section.offset + section.size > size:
                continue
            f.seek(section.offset)
            found = _build_id_in(f.read(section.size))
            if found is not None:
                return section.offset + found[0], found[1]
    return None


def content_id(f: BinaryIO, span: tuple[int, int]) -> bytes:
    """The build-id of the open file ``f``'s own bytes: SHA-1 (or BLAKE2b of the id's length
    where that is not 20) over the whole file, the id at ``span`` read as zeros."""
    start, length = span
    digest = (
        hashlib.sha1(usedforsecurity=False) if length == 20 else hashlib.blake2b(digest_size=length)
    )
    f.seek(0)
    at = 0
    while chunk := f.read(CHUNK):
        end = at + len(chunk)
        if at < start + length and start < end:  # the id lies (partly) in this chunk
            buffer = bytearray(chunk)
            lo, hi = max(start, at) - at, min(start + length, end) - at
            buffer[lo:hi] = bytes(hi - lo)
            chunk = bytes(buffer)
        digest.update(chunk)
        at = end
    return digest.digest()
