"""Real shared libraries (compiled with gcc) whose dynamic tables are rewritten as a hostile
file would have them: the tables the loader's view reads point into a 3 MiB constant array of
the library, filled with crafted records. Nothing about them is simulated: `parse_dynamic`
reads them as it reads any library."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

from tests.support.components import require

MARKER = b"ARCHWHEEL-HOSTILE-TABLES"
ROOM = 3 << 20  # bytes of the array the rewritten tables live in

DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ = 4, 5, 6, 10
DT_GNU_HASH = 0x6FFFFEF5
DT_VERSYM = 0x6FFFFFF0
DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFE, 0x6FFFFFFF

_SOURCE = f"""
#include <stdio.h>
const unsigned char room[{ROOM}] = "{MARKER.decode()}";
int hello(void) {{ return printf("%d\\n", room[5]); }}
"""


class _Library:
    """A compiled library, its bytes, and where its array and dynamic section lie."""

    def __init__(self, folder: Path) -> None:
        gcc = shutil.which("gcc")
        require(gcc is not None, "gcc not found")
        assert gcc is not None
        source = folder / "room.c"
        source.write_text(_SOURCE)
        built = folder / "libroom.so"
        subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-o", str(built), str(source)],
                       check=True, capture_output=True)  # fmt: skip
        self.data = bytearray(built.read_bytes())
        sections = self._sections()
        rodata = next(s for s in sections if s[0] == b".rodata")
        self.room = self.data.index(MARKER)
        self.room_address = self.room - rodata[2] + rodata[1]
        dynamic = next(s for s in sections if s[0] == b".dynamic")
        self.dynamic, self.dynamic_size = dynamic[2], dynamic[3]

    def _sections(self) -> list[tuple[bytes, int, int, int]]:
        """(name, address, offset, size) of each section."""
        shoff = struct.unpack_from("<Q", self.data, 0x28)[0]
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", self.data, 0x3A)
        raw = [struct.unpack_from("<IIQQQQIIQQ", self.data, shoff + i * shentsize)
               for i in range(shnum)]  # fmt: skip
        names_at = raw[shstrndx][4]
        out = []
        for name, _type, _flags, address, offset, size, *_ in raw:
            end = self.data.index(b"\0", names_at + name)
            out.append((bytes(self.data[names_at + name : end]), address, offset, size))
        return out

    def set_tag(self, tag: int, value: int, *, new_tag: int | None = None) -> None:
        """Give the dynamic entry ``tag`` the value (and the tag) asked for."""
        for at in range(self.dynamic, self.dynamic + self.dynamic_size, 16):
            found, _ = struct.unpack_from("<qQ", self.data, at)
            if found == tag:
                struct.pack_into("<qQ", self.data, at, tag if new_tag is None else new_tag, value)
                return
        raise AssertionError(f"the library has no dynamic tag {tag:#x}")

    def write(self, path: Path) -> Path:
        path.write_bytes(bytes(self.data))
        return path


def version_needs_bomb(folder: Path, files: int = 65536, versions: int = 65535) -> Path:
    """``files`` version-needs records, each saying it has ``versions`` versions, all pointing
    at one run of ``versions`` entries: 2 MiB that make files x versions reads (4 billion)."""
    lib = _Library(folder)
    needs = lib.room
    entries = needs + files * 16
    assert entries + versions * 16 <= lib.room + ROOM
    for i in range(files):
        at = needs + 16 * i
        struct.pack_into("<HHIII", lib.data, at, 1, versions, 0, entries - at, 16)
    for j in range(versions):
        struct.pack_into("<IHHII", lib.data, entries + 16 * j, 0, 0, 2 + j % 5, 0, 16)
    lib.set_tag(DT_VERNEED, lib.room_address)
    lib.set_tag(DT_VERNEEDNUM, files)
    return lib.write(folder / "libneeds.so")


def one_name_symbols(folder: Path, count: int, *, undefined: bool = False) -> Path:
    """A symbol table of ``count`` global functions that all have one name (``hello``):
    defined (exported), or ``undefined`` (each one a symbol the loader must resolve)."""
    lib = _Library(folder)
    assert 16 + count * 24 <= ROOM
    table = lib.room + 16
    strtab, strsize = next((s[2], s[3]) for s in lib._sections() if s[0] == b".dynstr")
    hello = lib.data.index(b"\0hello\0", strtab, strtab + strsize) + 1
    struct.pack_into("<II", lib.data, lib.room, 1, count)  # DT_HASH: 1 bucket, count chains
    for i in range(1, count):
        section = 0 if undefined else 1
        struct.pack_into("<IBBHQQ", lib.data, table + 24 * i, hello - strtab, 0x12, 0, section,
                         0, 0)  # fmt: skip
    hash_tag = DT_GNU_HASH if _has_tag(lib, DT_GNU_HASH) else DT_HASH
    lib.set_tag(hash_tag, lib.room_address, new_tag=DT_HASH)
    lib.set_tag(DT_SYMTAB, lib.room_address + 16)
    if _has_tag(lib, DT_VERSYM):
        lib.set_tag(DT_VERSYM, 0, new_tag=0x6FFFFFF5)  # an unknown tag: no versions
    return lib.write(folder / f"libonename{'-undefined' if undefined else ''}.so")


def _has_tag(lib: _Library, tag: int) -> bool:
    return any(
        struct.unpack_from("<q", lib.data, at)[0] == tag
        for at in range(lib.dynamic, lib.dynamic + lib.dynamic_size, 16)
    )


def symbols_naming(folder: Path, count: int, name: bytes, *, spread: bool = False) -> Path:
    """``count`` exported symbols whose names lie in ``name``, appended to the library's own
    string table (a new table in the array): each at the start of ``name``, or with
    ``spread`` the i-th at byte i of it (offsets 0, 1, 2 ... into one long name)."""
    lib = _Library(folder)
    strtab, strsize = next((s[2], s[3]) for s in lib._sections() if s[0] == b".dynstr")
    table = lib.room + 16
    names = table + count * 24
    own = bytes(lib.data[strtab : strtab + strsize])
    assert names + len(own) + len(name) <= lib.room + ROOM
    lib.data[names : names + len(own) + len(name)] = own + name
    struct.pack_into("<II", lib.data, lib.room, 1, count)  # DT_HASH: 1 bucket, count chains
    for i in range(1, count):
        at = len(own) + (i % max(1, len(name)) if spread else 0)
        struct.pack_into("<IBBHQQ", lib.data, table + 24 * i, at, 0x12, 0, 1, 0, 0)
    hash_tag = DT_GNU_HASH if _has_tag(lib, DT_GNU_HASH) else DT_HASH
    lib.set_tag(hash_tag, lib.room_address, new_tag=DT_HASH)
    lib.set_tag(DT_SYMTAB, lib.room_address + 16)
    lib.set_tag(DT_STRTAB, lib.room_address + (names - lib.room))
    lib.set_tag(DT_STRSZ, len(own) + len(name))
    if _has_tag(lib, DT_VERSYM):
        lib.set_tag(DT_VERSYM, 0, new_tag=0x6FFFFFF5)
    return lib.write(folder / "libnames.so")
