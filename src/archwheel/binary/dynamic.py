"""What the dynamic loader reads from an ELF file: its dynamic section and dynamic symbols.

``parse_dynamic`` follows the loader's own path, not the section table: the program headers give
``PT_DYNAMIC``; its entries give ``DT_NEEDED``, ``DT_SONAME``, ``DT_RPATH``/``DT_RUNPATH`` and the
addresses of ``.dynstr``, ``.dynsym``, the hash table (which gives the symbol count),
``.gnu.version``, ``.gnu.version_r`` and ``.gnu.version_d``; addresses become file offsets through
the ``PT_LOAD`` segments. Every offset and size is checked against the file size first: a table
that points past the file is a one-line problem, never a traceback, and no read is larger than
``MAX_TABLE``.

Reading is random access through a ``read(offset, length)`` callable. Files on disk are read
with ``pread`` (``read_file_dynamic``), and so are the libraries of an installed environment
(``read_installed_dynamic``); a wheel's members are streamed from the zip by ``dynamic_wheel``.
The symbols kept for one input (a wheel, an environment) are bounded together (``SymbolBudget``).
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from archwheel.binary.elf import ELF_MAGIC, FormatError, parse_elf_header
from archwheel.effects.files import NotRegularFile, check_regular, is_text_list
from archwheel.errors import ToolError
from archwheel.facts.documents import load_document

PT_LOAD = 1
PT_DYNAMIC = 2
DT_NULL, DT_NEEDED, DT_HASH, DT_STRTAB, DT_SYMTAB = 0, 1, 4, 5, 6
DT_STRSZ, DT_SYMENT, DT_SONAME, DT_RPATH = 10, 11, 14, 15
DT_FLAGS, DT_RUNPATH = 30, 29
DT_GNU_HASH = 0x6FFFFEF5
DT_VERSYM, DT_VERDEF, DT_VERDEFNUM = 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFD
DT_VERNEED, DT_VERNEEDNUM, DT_FLAGS_1 = 0x6FFFFFFE, 0x6FFFFFFF, 0x6FFFFFFB
DF_BIND_NOW = 0x8
DF_1_NOW = 0x1
STB_WEAK = 2
STT_NAMES = {0: "notype", 1: "object", 2: "func", 3: "section", 4: "file", 5: "common", 6: "tls"}

# Bounds against lying headers: far above real libraries (libtorch_cpu.so: 75 000 dynamic
# symbols, a 5 MiB .dynstr), low enough that a broken file cannot exhaust memory.
MAX_TABLE = 256 << 20  # one table (string table, symbol table ...)
MAX_SYMBOLS = 1_000_000  # dynamic symbols of one library (about 150 MB once read)
# Symbols kept for all the libraries of one wheel together: each library bounded alone, a
# 1 MB wheel of ten libraries of repeated symbol tables would still hold gigabytes.
MAX_SYMBOLS_PER_INPUT = 4_000_000
MAX_DYNAMIC_ENTRIES = 65536
MAX_VERSION_ENTRIES = 65536
MAX_NAME_BYTES = 65536  # one name of the dynamic string table (torch 2.14.1's longest: 1995)


class Missing(Exception):
    """A read the captured ranges cannot answer (internal: triggers another pass)."""

    def __init__(self, offset: int, length: int) -> None:
        super().__init__(f"bytes {offset}..{offset + length} not captured")
        self.offset = offset
        self.length = length


Read = Callable[[int, int], bytes]


@dataclass(frozen=True)
class UndefinedSymbol:
    """One dynamic symbol a library needs from elsewhere, with the version it asks for.

    Made by ``dynamic_info``; the loader checks compare it with what the other libraries export.
    """

    name: str
    version: str | None  # e.g. "GLIBCXX_3.4.30"; None when unversioned
    version_file: str | None  # the file the version is required from (.gnu.version_r)
    weak: bool
    kind: str  # "func", "object", "tls", "notype" ...


@dataclass(frozen=True)
class DynamicInfo:
    """The loader's view of one ELF file. ``problems`` non-empty means it may be incomplete."""

    path: str
    size: int
    file_kind: str  # "shared-object", "executable", "relocatable", "cubin", "not-elf" ...
    is_dynamic: bool = False  # has a PT_DYNAMIC segment
    machine: int = 0
    soname: str | None = None
    needed: tuple[str, ...] = ()
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    bind_now: bool = False
    undefined: tuple[UndefinedSymbol, ...] = ()
    # name -> versions it is defined with; None: unversioned (or the base version)
    exports: dict[str, tuple[str | None, ...]] = field(default_factory=dict)
    version_definitions: tuple[str, ...] = ()  # .gnu.version_d names, without the base
    version_needs: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (file, versions) pairs
    problems: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether the file was read without a problem (its lists are then whole)."""
        return not self.problems


# -- the parser ------------------------------------------------------------------------------


@dataclass
class Segment:
    """A loadable or dynamic program segment: where its bytes lie in memory and in the file."""

    vaddr: int
    offset: int
    filesz: int


class _Strings:
    """The names of one library's dynamic string table, each offset decoded once.

    A name is at most ``MAX_NAME_BYTES`` long, and the names read take at most twice the
    table's bytes (plus 1 MiB) together: a million symbols pointing at one 30 MB name without
    a NUL were a million copies of it, and offsets 0, 1, 2 ... into one long name are
    quadratic (linkers merge a name's tail with a longer one's, so that alone is not refused).
    """

    def __init__(self, table: bytes) -> None:
        self.table = table
        self._decoded: dict[int, str] = {}
        self.budget = 2 * len(table) + (1 << 20)
        self._left = self.budget

    def __call__(self, offset: int) -> str:
        known = self._decoded.get(offset)
        if known is not None:
            return known
        table = self.table
        if offset >= len(table):
            raise FormatError(
                f"string offset {offset} outside the string table ({len(table)} bytes)"
            )
        end = table.find(b"\0", offset, offset + MAX_NAME_BYTES + 1)
        if end < 0:
            if offset + MAX_NAME_BYTES < len(table):
                raise FormatError(
                    f"a name at offset {offset} of the dynamic string table is longer than "
                    f"{MAX_NAME_BYTES} bytes"
                )
            end = len(table)
        self._left -= end - offset
        if self._left < 0:
            raise FormatError(
                f"the names of the dynamic string table take more than {self.budget} bytes "
                f"once read (the table has {len(table)})"
            )
        text = table[offset:end].decode("utf-8", "replace")
        self._decoded[offset] = text
        return text


def _checked(read: Read, offset: int, length: int, size: int, what: str) -> bytes:
    if offset < 0 or length < 0 or offset + length > size:
        raise FormatError(
            f"{what} claims bytes {offset}..{offset + length} past the end of the file "
            f"({size} bytes): truncated or corrupt"
        )
    if length > MAX_TABLE:
        raise FormatError(f"{what} claims {length} bytes, above the limit of {MAX_TABLE}")
    data = read(offset, length)
    if len(data) < length:
        raise FormatError(f"{what} at {offset} is cut short ({len(data)} of {length} bytes)")
    return data


def to_offset(segments: list[Segment], vaddr: int, what: str) -> int:
    """The file offset of ``vaddr``, so a table the dynamic section points at can be read;
    raises ``FormatError`` (naming ``what``) when no loadable segment holds the address."""
    for s in segments:
        if s.vaddr <= vaddr < s.vaddr + s.filesz:
            return vaddr - s.vaddr + s.offset
    raise FormatError(f"{what} address {vaddr:#x} lies in no loadable segment of the file")


def segment_end(segments: list[Segment], offset: int) -> int:
    """The file offset where the segment holding ``offset`` ends (``offset`` itself when none
    does): the most a table of unknown size starting there can span."""
    for s in segments:
        if s.offset <= offset < s.offset + s.filesz:
            return s.offset + s.filesz
    return offset


def program_headers(read: Read, size: int) -> tuple[bool, list[Segment], Segment | None]:
    """``(is64, PT_LOAD segments, PT_DYNAMIC)``; raises ``FormatError``."""
    header = parse_elf_header(read(0, 64))
    if header.phnum == 0:
        return header.is64, [], None
    if header.phnum > 4096 or header.phentsize < (56 if header.is64 else 32):
        raise FormatError(f"implausible program header table ({header.phnum} entries)")
    table = _checked(
        read, header.phoff, header.phnum * header.phentsize, size, "program header table"
    )
    loads: list[Segment] = []
    dynamic = None
    for i in range(header.phnum):
        base = i * header.phentsize
        if header.is64:
            p_type, _flags, p_offset, p_vaddr, _pa, p_filesz = struct.unpack_from(
                "<IIQQQQ", table, base
            )
        else:
            p_type, p_offset, p_vaddr, _pa, p_filesz = struct.unpack_from("<IIIII", table, base)
        if p_type == PT_LOAD:
            loads.append(Segment(p_vaddr, p_offset, p_filesz))
        elif p_type == PT_DYNAMIC:
            dynamic = Segment(p_vaddr, p_offset, p_filesz)
    return header.is64, loads, dynamic


def dynamic_entries(read: Read, size: int, is64: bool, dyn: Segment) -> list[tuple[int, int]]:
    """The ``(tag, value)`` pairs of the dynamic section up to ``DT_NULL``, as ld.so reads
    them; raises ``FormatError`` when the section is out of bounds or has no ``DT_NULL``."""
    entsize = 16 if is64 else 8
    count = min(dyn.filesz // entsize, MAX_DYNAMIC_ENTRIES)
    data = _checked(read, dyn.offset, count * entsize, size, "dynamic section")
    fmt = "<qQ" if is64 else "<iI"
    entries: list[tuple[int, int]] = []
    for tag, value in struct.iter_unpack(fmt, data):
        if tag == DT_NULL:
            return entries
        entries.append((tag & 0xFFFFFFFF if tag < 0 else tag, value))
    # ld.so reads entries up to DT_NULL, whatever the segment size says: without one it would
    # read whatever follows, so what the loader sees is unknown.
    raise FormatError(f"the dynamic section has no DT_NULL end within its {dyn.filesz} bytes")


def _symbol_count(
    read: Read, size: int, is64: bool, segments: list[Segment], tags: dict[int, int]
) -> int:
    if DT_HASH in tags:
        off = to_offset(segments, tags[DT_HASH], "DT_HASH")
        _nbucket, nchain = struct.unpack("<II", _checked(read, off, 8, size, "hash table"))
        return int(nchain)
    if DT_GNU_HASH not in tags:
        raise FormatError("no hash table (DT_HASH or DT_GNU_HASH): symbol count unknown")
    off = to_offset(segments, tags[DT_GNU_HASH], "DT_GNU_HASH")
    nbuckets, symoffset, bloom_size, _shift = struct.unpack(
        "<IIII", _checked(read, off, 16, size, "GNU hash table")
    )
    if nbuckets > MAX_SYMBOLS or bloom_size > MAX_SYMBOLS:
        raise FormatError(f"implausible GNU hash table ({nbuckets} buckets)")
    buckets_at = off + 16 + bloom_size * (8 if is64 else 4)
    buckets = struct.unpack(
        f"<{nbuckets}I", _checked(read, buckets_at, nbuckets * 4, size, "GNU hash buckets")
    )
    last = max(buckets, default=0)
    if last < symoffset:
        return int(symoffset)
    chain_at = buckets_at + nbuckets * 4
    index = last
    while index - symoffset < MAX_SYMBOLS:
        pos = chain_at + (index - symoffset) * 4
        block = min(4096, max(4, size - pos)) // 4 * 4
        words = struct.unpack(
            f"<{block // 4}I", _checked(read, pos, block, size, "GNU hash chains")
        )
        for word in words:
            if word & 1:
                return index + 1
            index += 1
    raise FormatError("GNU hash chain does not end")


def _versions_needed(
    read: Read, size: int, off: int, count: int, strtab: _Strings
) -> tuple[dict[int, tuple[str, str]], list[tuple[str, tuple[str, ...]]]]:
    by_index: dict[int, tuple[str, str]] = {}
    needs: list[tuple[str, tuple[str, ...]]] = []
    pos = off
    # One budget for the whole table: each file's versions bounded alone, 65536 files of
    # 65536 versions each (all pointing at one run of entries, 2 MiB) were 4 billion reads.
    left = MAX_VERSION_ENTRIES
    for _ in range(min(count, MAX_VERSION_ENTRIES)):
        _v, cnt, vn_file, vn_aux, vn_next = struct.unpack(
            "<HHIII", _checked(read, pos, 16, size, "version needs (.gnu.version_r)")
        )
        file = strtab(vn_file)
        names: list[str] = []
        aux = pos + vn_aux
        if cnt > left:
            raise FormatError(
                f"version needs (.gnu.version_r) hold more than {MAX_VERSION_ENTRIES} versions"
            )
        left -= cnt
        for _ in range(cnt):
            _hash, _flags, other, vna_name, vna_next = struct.unpack(
                "<IHHII", _checked(read, aux, 16, size, "version needs (.gnu.version_r)")
            )
            name = strtab(vna_name)
            names.append(name)
            by_index[other & 0x7FFF] = (file, name)
            if not vna_next:
                break
            aux += vna_next
        needs.append((file, tuple(names)))
        if not vn_next:
            break
        pos += vn_next
    return by_index, needs


def _versions_defined(
    read: Read, size: int, off: int, count: int, strtab: _Strings
) -> tuple[dict[int, str], list[str]]:
    by_index: dict[int, str] = {}
    names: list[str] = []
    pos = off
    for _ in range(min(count, MAX_VERSION_ENTRIES)):
        _v, flags, ndx, cnt, _hash, vd_aux, vd_next = struct.unpack(
            "<HHHHIII", _checked(read, pos, 20, size, "version definitions (.gnu.version_d)")
        )
        if cnt:
            (vda_name, _next) = struct.unpack(
                "<II", _checked(read, pos + vd_aux, 8, size, "version definitions")
            )
            name = strtab(vda_name)
            if not flags & 1:  # VER_FLG_BASE: the file's own name, not a version
                by_index[ndx & 0x7FFF] = name
                names.append(name)
        if not vd_next:
            break
        pos += vd_next
    return by_index, names


def parse_dynamic(read: Read, size: int, path: str) -> DynamicInfo:
    """The loader's view of the ELF file behind ``read``; problems become ``problems``.

    Raises ``Missing`` only when ``read`` itself does (a capture that lacks a range).
    """
    try:
        head = read(0, min(64, size))
        if not head.startswith(ELF_MAGIC):
            return DynamicInfo(path, size, "not-elf", problems=("not an ELF file",))
        header = parse_elf_header(head)
        kind = header.file_kind
        is64, segments, dyn = program_headers(read, size)
    except FormatError as exc:
        return DynamicInfo(path, size, "unknown-elf", problems=(str(exc),))
    if dyn is None or header.e_type not in (2, 3):
        return DynamicInfo(path, size, kind, machine=header.e_machine)
    try:
        return _parse_dynamic_segment(
            read, size, path, kind=kind, machine=header.e_machine, is64=is64,
            segments=segments, dyn=dyn,
        )  # fmt: skip
    except FormatError as exc:
        return DynamicInfo(path, size, kind, True, header.e_machine, problems=(str(exc),))
    except struct.error as exc:
        return DynamicInfo(
            path, size, kind, True, header.e_machine, problems=(f"malformed table: {exc}",)
        )


def _parse_dynamic_segment(
    read: Read,
    size: int,
    path: str,
    *,
    kind: str,
    machine: int,
    is64: bool,
    segments: list[Segment],
    dyn: Segment,
) -> DynamicInfo:
    entries = dynamic_entries(read, size, is64, dyn)
    tags: dict[int, int] = {}
    for tag, value in entries:
        tags.setdefault(tag, value)
    if DT_STRTAB not in tags or DT_STRSZ not in tags:
        raise FormatError("dynamic section has no string table (DT_STRTAB/DT_STRSZ)")
    str_off = to_offset(segments, tags[DT_STRTAB], "DT_STRTAB")
    strtab = _Strings(
        _checked(read, str_off, tags[DT_STRSZ], size, "dynamic string table (.dynstr)")
    )
    needed = tuple(strtab(v) for t, v in entries if t == DT_NEEDED)
    soname = strtab(tags[DT_SONAME]) if DT_SONAME in tags else None

    def paths(tag: int) -> tuple[str, ...]:
        return tuple(p for t, v in entries if t == tag for p in strtab(v).split(":") if p)

    bind_now = bool(tags.get(DT_FLAGS, 0) & DF_BIND_NOW or tags.get(DT_FLAGS_1, 0) & DF_1_NOW)
    need_index: dict[int, tuple[str, str]] = {}
    needs: list[tuple[str, tuple[str, ...]]] = []
    if DT_VERNEED in tags:
        off = to_offset(segments, tags[DT_VERNEED], "DT_VERNEED")
        need_index, needs = _versions_needed(read, size, off, tags.get(DT_VERNEEDNUM, 1), strtab)
    def_index: dict[int, str] = {}
    definitions: list[str] = []
    if DT_VERDEF in tags:
        off = to_offset(segments, tags[DT_VERDEF], "DT_VERDEF")
        def_index, definitions = _versions_defined(
            read, size, off, tags.get(DT_VERDEFNUM, 1), strtab
        )
    undefined: list[UndefinedSymbol] = []
    # name -> its versions, each once, in the table's order (a tuple grown per symbol was
    # quadratic in a table of one name repeated).
    exported: dict[str, dict[str | None, None]] = {}
    if DT_SYMTAB in tags:
        count = _symbol_count(read, size, is64, segments, tags)
        if count > MAX_SYMBOLS:
            raise FormatError(f"absurd dynamic symbol count {count}")
        entsize = tags.get(DT_SYMENT, 24 if is64 else 16)
        if entsize != (24 if is64 else 16):
            raise FormatError(f"dynamic symbol entry size {entsize}, expected {24 if is64 else 16}")
        sym_off = to_offset(segments, tags[DT_SYMTAB], "DT_SYMTAB")
        table = _checked(read, sym_off, count * entsize, size, "dynamic symbol table (.dynsym)")
        versym: tuple[int, ...] = ()
        if DT_VERSYM in tags:
            v_off = to_offset(segments, tags[DT_VERSYM], "DT_VERSYM")
            raw = _checked(read, v_off, count * 2, size, "symbol versions (.gnu.version)")
            versym = struct.unpack(f"<{count}H", raw)
        fmt = "<IBBHQQ" if is64 else "<IIIBBH"
        for i, fields in enumerate(struct.iter_unpack(fmt, table)):
            if i == 0:
                continue
            if is64:
                st_name, info, _other, shndx = fields[0], fields[1], fields[2], fields[3]
            else:
                st_name, info, _other, shndx = fields[0], fields[3], fields[4], fields[5]
            bind = info >> 4
            if bind == 0:  # local
                continue
            name = strtab(st_name)
            index = versym[i] & 0x7FFF if versym else 1
            if shndx == 0:
                file, version = need_index.get(index, (None, None))
                undefined.append(
                    UndefinedSymbol(
                        name, version, file, bind == STB_WEAK, STT_NAMES.get(info & 0xF, "other")
                    )
                )
            else:
                version = def_index.get(index) if index >= 2 else None
                exported.setdefault(name, {})[version] = None
    exports = {name: tuple(versions) for name, versions in exported.items()}
    return DynamicInfo(
        path=path,
        size=size,
        file_kind=kind,
        is_dynamic=True,
        machine=machine,
        soname=soname,
        needed=needed,
        rpath=paths(DT_RPATH),
        runpath=paths(DT_RUNPATH),
        bind_now=bind_now,
        undefined=tuple(undefined),
        exports=exports,
        version_definitions=tuple(definitions),
        version_needs=tuple(needs),
    )


# -- sources -----------------------------------------------------------------------------------


def read_file_dynamic(path: Path, label: str | None = None) -> DynamicInfo:
    """The loader's view of a file on disk (random access, nothing read beyond the tables)."""
    name = label or str(path)
    try:
        # Never blocks (a FIFO), and only a regular file is read (by type, on the descriptor).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return DynamicInfo(name, 0, "unreadable", problems=(f"cannot open: {exc.strerror}",))
    try:
        status = os.fstat(fd)
        try:
            check_regular(path, status)
        except NotRegularFile as exc:
            return DynamicInfo(name, 0, "unreadable", problems=(f"cannot open: {exc.strerror}",))
        size = status.st_size

        def read(offset: int, length: int) -> bytes:
            return os.pread(fd, length, offset)

        return parse_dynamic(read, size, name)
    finally:
        os.close(fd)


# -- inputs: which members are libraries, and the symbols kept for one input ---------------


def is_library_member(name: str) -> bool:
    """A member the loader could open: ``*.so`` or ``*.so.N...`` (extension modules included)."""
    base = name.rsplit("/", 1)[-1]
    if base.endswith(".so"):
        return True
    head, sep, tail = base.partition(".so.")
    return bool(sep and head and all(p.isdigit() for p in tail.split(".") if p) and tail)


def _symbols_kept(info: DynamicInfo) -> int:
    return len(info.undefined) + sum(len(versions) for versions in info.exports.values())


class SymbolBudget:
    """At most ``limit`` symbols kept for one input: a library read past it is kept as a
    problem only (its symbols dropped as soon as it arrives)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def admit(self, info: DynamicInfo) -> DynamicInfo:
        """``info`` itself while its symbols fit the budget (and counts them); past the
        budget, a copy without symbols that carries the reason as its problem."""
        count = _symbols_kept(info)
        if self.used + count <= self.limit:
            self.used += count
            return info
        return DynamicInfo(
            info.path, info.size, info.file_kind, info.is_dynamic, info.machine,
            problems=(f"not read: the input's libraries hold more than {self.limit} dynamic "
                      "symbols together",),
        )  # fmt: skip


# -- an installed environment ------------------------------------------------------------------

_INSTALLED_PROBE = """
import json, sys
from importlib import metadata
out = []
for dist in metadata.distributions():
    name = (dist.metadata["Name"] or "").lower().replace("_", "-")
    if name != "torch" and not name.startswith(("nvidia-", "cuda-")):
        continue
    files = [str(f) for f in (dist.files or []) if ".so" in str(f) and not str(f).startswith("..")]
    out.append({"name": name, "version": dist.version, "requires": dist.requires or [],
                "root": str(dist.locate_file("")), "files": files})
print(json.dumps(out))
"""


@dataclass(frozen=True)
class InstalledDistribution:
    """torch or an nvidia-*/cuda-* distribution of a Python environment, with its libraries
    (``path`` relative to site-packages, as in a wheel)."""

    name: str
    version: str
    requires: tuple[str, ...]
    libraries: tuple[DynamicInfo, ...]


def read_installed_dynamic(python: str | None = None) -> tuple[InstalledDistribution, ...]:
    """torch and the nvidia-*/cuda-* distributions installed for ``python`` (default: this
    interpreter), their shared libraries read from disk."""
    from archwheel.effects.process import MAX_ANSWER_NESTING, run_program

    interpreter = python or sys.executable
    result = run_program(
        [interpreter, "-c", _INSTALLED_PROBE], echo=None, timeout=120, what=f"{interpreter} probe"
    )
    # The interpreter is the user's: its answer is read as untrusted input.
    unexpected = f"unexpected output from {interpreter} listing its packages"
    entries = load_document(
        result.stdout, origin=unexpected, nesting=MAX_ANSWER_NESTING, error=ToolError
    )
    if not isinstance(entries, list) or not all(_is_installed_entry(e) for e in entries):
        raise ToolError(f"{unexpected} (not the probe's list of distributions)")
    found: list[InstalledDistribution] = []
    budget = SymbolBudget(MAX_SYMBOLS_PER_INPUT)  # one environment: one input
    for entry in entries:
        root = Path(entry["root"])
        libraries = tuple(
            budget.admit(_read_installed(root, f)) for f in entry["files"] if is_library_member(f)
        )
        found.append(
            InstalledDistribution(
                entry["name"], entry["version"], tuple(entry["requires"]), libraries
            )
        )
    return tuple(found)


def _is_installed_entry(entry: object) -> bool:
    """One distribution as ``_INSTALLED_PROBE`` writes it: strings, and lists of strings."""
    if not isinstance(entry, dict):
        return False
    texts = all(isinstance(entry.get(k), str) for k in ("name", "version", "root"))
    return texts and all(is_text_list(entry.get(k)) for k in ("requires", "files"))


def _read_installed(root: Path, member: str) -> DynamicInfo:
    """A distribution's library, read only when it resolves inside the distribution's root
    (a listed path with '..', an absolute one or a link out of it is not followed)."""
    path = root / member
    try:
        inside = path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):
        inside = False
    if Path(member).is_absolute() or ".." in Path(member).parts or not inside:
        return DynamicInfo(
            member, 0, "unreadable", problems=("lies outside its distribution: not read",)
        )
    return read_file_dynamic(path, member)
