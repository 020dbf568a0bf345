"""What NVIDIA's cuobjdump lists, read without running it: its listing, and the file's layout.

archwheel reads fatbins itself; cuobjdump is the independent oracle its answers are checked
against (``--cross-check``). This module is the pure half of that oracle: the parser of
cuobjdump's listing, the attribution of listed images to sections, and the small readers of ELF
section names and ``ar`` member tables it needs. It shares no parsing code with the scanner on
purpose. Finding, installing and running cuobjdump is ``archwheel.crosscheck.cuobjdump``.

Each file is listed twice: ``cuobjdump -all -lelf -lptx`` (every fatbin) and ``cuobjdump -lelf
-lptx`` (only ``.nv_fatbin`` when the file has one). The difference is the ``__nv_relfatbin``
share, which is how images are attributed to sections. What cuobjdump cannot see (its blind
spots, see ``docs/maintainers/crosscheck.md``): the ``f`` of family-specific cubins
(``sm_103f`` is printed ``sm_103``), LTO-IR images, and containers in any other section.
"""

from __future__ import annotations

import re
import struct
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from archwheel.errors import ToolError
from archwheel.facts.arch import CodeKind

EXECUTABLE_FATBIN = ".nv_fatbin"
RELOCATABLE_FATBIN = "__nv_relfatbin"
RAW_FATBIN_SECTION = "(fatbin)"
"""The section archwheel gives images of a file that is itself a fatbin (no host ELF around)."""
CUBIN_SECTION = "(cubin)"
"""... and the image of a file that is itself a cubin."""
UNKNOWN_SECTION = "<unknown>"
"""Images cuobjdump listed in a host ELF that has neither fatbin section (never seen)."""

EM_CUDA = 190
_FATBIN_MAGIC = 0xBA55ED50
_AR_MAGIC = b"!<arch>\n"
_MAX_SECTIONS = 65_535

_ENTRY_LINE = re.compile(r"^(ELF|PTX) file\s+([0-9]+:\s+)?(?P<name>.+)$")
_ENTRY_ARCH = re.compile(r"\.sm_(?P<number>[0-9]{2,3})(?P<variant>[af]?)\.(?:cubin|ptx)$")
_MEMBER_LINE = re.compile(r"^member (?P<archive>.*):(?P<member>[^:]+):$")
NO_DEVICE_CODE = "does not contain device code"
"""What cuobjdump says (exit 255) about a file without device code: an empty listing."""


# -- what cuobjdump lists -------------------------------------------------------------------------


@dataclass(frozen=True)
class ListedImage:
    """One line of ``cuobjdump -lelf -lptx``: ``ELF file    1: libx.1.sm_90a.cubin``.

    ``arch`` is in archwheel's spelling: cuobjdump's ``sm_120`` PTX becomes ``compute_120``.
    It is what cuobjdump reports, so a family-specific cubin has lost its ``f``.
    """

    kind: CodeKind  # SASS or PTX: cuobjdump does not list LTO-IR
    arch: str  # sm_90a, sm_100 (was sm_100f?), compute_120f
    name: str  # the name cuobjdump printed
    member: str | None = None  # the object inside a static library, as cuobjdump names it


def parse_listing(text: str) -> tuple[ListedImage, ...]:
    """Parse the standard output of ``cuobjdump [-all] -lelf -lptx FILE``.

    Raises ``ToolError`` on a line it does not understand: an oracle whose output format
    changed must not be trusted silently.
    """
    images: list[ListedImage] = []
    member: str | None = None
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line:
            continue
        member_match = _MEMBER_LINE.match(line)
        if member_match:
            member = member_match.group("member")
            continue
        entry = _ENTRY_LINE.match(line)
        arch = _ENTRY_ARCH.search(entry.group("name")) if entry else None
        if entry is None or arch is None:
            shown = line[:200]
            raise ToolError(
                f"unexpected line in cuobjdump output: {shown!r}",
                hint="this cuobjdump may be too new or too old for archwheel; report it",
            )
        kind = CodeKind.SASS if entry.group(1) == "ELF" else CodeKind.PTX
        prefix = "sm" if kind is CodeKind.SASS else "compute"
        images.append(
            ListedImage(
                kind=kind,
                arch=f"{prefix}_{arch.group('number')}{arch.group('variant')}",
                name=entry.group("name"),
                member=member,
            )
        )
    return tuple(images)


ImageKey = tuple[str, CodeKind, str]
"""(section, kind, arch) as cuobjdump can see it."""


def split_by_section(
    every_fatbin: Sequence[ListedImage],
    default_listing: Sequence[ListedImage],
    sections: frozenset[str],
    *,
    raw_section: str | None = None,
) -> Counter[ImageKey]:
    """Attribute listed images to sections from the two runs and the file's section names.

    ``cuobjdump -all`` lists ``.nv_fatbin`` and ``__nv_relfatbin``; without ``-all`` it lists
    only ``.nv_fatbin`` when the file has one, else ``__nv_relfatbin``. Counts, not positions,
    are compared, so the order cuobjdump prints in does not matter. ``raw_section`` names the
    section of a file that is itself a fatbin or cubin.
    """
    every = Counter((i.kind, i.arch) for i in every_fatbin)
    default = Counter((i.kind, i.arch) for i in default_listing)
    result: Counter[ImageKey] = Counter()

    def put(section: str, counts: Counter[tuple[CodeKind, str]]) -> None:
        for (kind, arch), n in counts.items():
            if n > 0:
                result[(section, kind, arch)] += n

    has_exec = EXECUTABLE_FATBIN in sections
    has_rel = RELOCATABLE_FATBIN in sections
    if raw_section is not None:
        put(raw_section, every)
    elif has_exec and has_rel:
        if default - every:
            raise ToolError(
                "cuobjdump listed more images without -all than with it",
                hint="its output cannot be attributed to sections; report this file",
            )
        put(EXECUTABLE_FATBIN, default)
        put(RELOCATABLE_FATBIN, every - default)
    elif has_exec:
        put(EXECUTABLE_FATBIN, every)
    elif has_rel:
        put(RELOCATABLE_FATBIN, every)
    else:
        put(UNKNOWN_SECTION, every)
    return result


# -- the file's own layout (independent of archwheel's scanner) ---------------------------------


@dataclass(frozen=True)
class FileLayout:
    """What kind of file cuobjdump is given, and the section names that matter to it."""

    kind: str  # "host-elf", "cubin", "fatbin", "archive", "other"
    sections: frozenset[str] = frozenset()
    members: Mapping[str, frozenset[str]] | None = None  # archive: member name -> sections

    @property
    def raw_section(self) -> str | None:
        """The section name of a file that is itself a fatbin or cubin; None otherwise."""
        return {"cubin": CUBIN_SECTION, "fatbin": RAW_FATBIN_SECTION}.get(self.kind)


def read_layout(path: Path) -> FileLayout:
    """Read just enough of ``path`` to attribute cuobjdump's images (never the whole file)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(64)
            if head.startswith(_AR_MAGIC):
                members: dict[str, frozenset[str]] = {}
                for name, offset, length in _archive_members(f, size):
                    layout = _region_layout(f, offset, length)
                    members[name] = members.get(name, frozenset()) | layout.sections
                return FileLayout("archive", members=members)
            return _region_layout(f, 0, size)
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _region_layout(f: BinaryIO, base: int, length: int) -> FileLayout:
    f.seek(base)
    head = f.read(64)
    if len(head) >= 4 and struct.unpack_from("<I", head)[0] == _FATBIN_MAGIC:
        return FileLayout("fatbin")
    if not head.startswith(b"\x7fELF") or len(head) < 64:
        return FileLayout("other")
    if head[4] != 2 or head[5] != 1:  # only ELF64 little-endian carries CUDA fatbins here
        return FileLayout("other")
    machine = struct.unpack_from("<H", head, 0x12)[0]
    if machine == EM_CUDA:
        return FileLayout("cubin")
    return FileLayout("host-elf", _elf_section_names(f, base, length, head))


def _elf_section_names(f: BinaryIO, base: int, length: int, head: bytes) -> frozenset[str]:
    shoff = struct.unpack_from("<Q", head, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
    if shoff == 0 or shentsize < 64 or shoff >= length:
        return frozenset()
    if shnum == 0 or shstrndx == 0xFFFF:  # extended numbering: the real values in header 0
        first = _read_at(f, base + shoff, 64, base + length)
        if first is None:
            return frozenset()
        if shnum == 0:
            shnum = min(struct.unpack_from("<Q", first, 0x20)[0], _MAX_SECTIONS)
        if shstrndx == 0xFFFF:
            shstrndx = struct.unpack_from("<I", first, 0x28)[0]
    if shstrndx >= shnum or shoff + shnum * shentsize > length:
        return frozenset()
    table = _read_at(f, base + shoff, shnum * shentsize, base + length)
    if table is None:
        return frozenset()
    headers = [struct.unpack_from("<IIQQQQ", table, i * shentsize) for i in range(shnum)]
    str_offset, str_size = headers[shstrndx][4], headers[shstrndx][5]
    strings = _read_at(f, base + str_offset, min(str_size, 1 << 24), base + length)
    if strings is None:
        return frozenset()
    names = set()
    for name_offset, *_ in headers:
        end = strings.find(b"\0", name_offset)
        if 0 <= name_offset < len(strings) and end > name_offset:
            names.add(strings[name_offset:end].decode("utf-8", "replace"))
    return frozenset(names)


def _read_at(f: BinaryIO, offset: int, size: int, limit: int) -> bytes | None:
    if offset < 0 or size < 0 or offset + size > limit:
        return None
    f.seek(offset)
    data = f.read(size)
    return data if len(data) == size else None


def _archive_members(f: BinaryIO, size: int) -> Iterator[tuple[str, int, int]]:
    """(name, data offset, data size) of each object in a GNU or BSD ``ar`` archive."""
    long_names = b""
    offset = len(_AR_MAGIC)
    while offset + 60 <= size:
        f.seek(offset)
        header = f.read(60)
        if len(header) < 60 or header[58:60] != b"`\n":
            return
        raw_name = header[:16].decode("latin-1").rstrip()
        try:
            length = int(header[48:58].decode("latin-1").strip() or "0")
        except ValueError:
            return
        data = offset + 60
        if length < 0 or data + length > size:
            return
        name = raw_name
        if raw_name == "//":
            f.seek(data)
            long_names = f.read(min(length, 1 << 24))
        elif raw_name in ("/", "/SYM64/", "__.SYMDEF", "__.SYMDEF SORTED"):
            pass
        elif raw_name.startswith("#1/"):  # BSD: the name precedes the data
            name_length = int(raw_name[3:] or "0")
            f.seek(data)
            name = f.read(name_length).rstrip(b"\0").decode("utf-8", "replace")
            yield name, data + name_length, length - name_length
        else:
            if raw_name.startswith("/") and raw_name[1:].isdigit():
                start = int(raw_name[1:])
                end = long_names.find(b"/\n", start)
                name = long_names[start : end if end >= 0 else None].decode("utf-8", "replace")
            else:
                name = raw_name.removesuffix("/")
            yield name, data, length
        offset = data + length + (length & 1)


# -- the inventory of one file ---------------------------------------------------------------


@dataclass(frozen=True)
class CuobjdumpInventory:
    """What cuobjdump sees in one file: image counts per member, per (section, kind, arch).

    For a plain file the only member is ``None``; for a static library, each object's name.
    """

    path: Path
    layout: FileLayout
    counts: Mapping[str | None, Counter[ImageKey]]

    @property
    def total(self) -> int:
        """All images counted in the file, every member together."""
        return sum(sum(c.values()) for c in self.counts.values())


def needs_default_listing(layout: FileLayout) -> bool:
    """Whether the plain listing (without ``-all``) is needed to attribute images to sections.

    Only a file (or archive member) with both fatbin sections needs it: it is the only way to
    tell their images apart.
    """
    both = frozenset((EXECUTABLE_FATBIN, RELOCATABLE_FATBIN))
    member_sections = (layout.members or {}).values()
    return both <= layout.sections or any(both <= s for s in member_sections)


def attribute_images(
    path: Path,
    layout: FileLayout,
    every_fatbin: Sequence[ListedImage],
    default_listing: Sequence[ListedImage] = (),
) -> CuobjdumpInventory:
    """Both listings of ``path``, attributed to sections (and to members of an archive)."""
    counts: dict[str | None, Counter[ImageKey]] = {}
    if layout.kind == "archive":
        assert layout.members is not None
        for member in sorted({i.member or "" for i in every_fatbin}):
            sections = layout.members.get(member, frozenset())
            counts[member] = split_by_section(
                [i for i in every_fatbin if (i.member or "") == member],
                [i for i in default_listing if (i.member or "") == member],
                sections,
            )
    else:
        counts[None] = split_by_section(
            every_fatbin, default_listing, layout.sections, raw_section=layout.raw_section
        )
    return CuobjdumpInventory(path=path, layout=layout, counts=counts)
