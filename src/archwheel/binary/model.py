"""Frozen results of binary inspection: entries, libraries, inputs, and the problems met.

These objects are what every upper layer consumes: the audit verdict, the compatibility
verdicts, the manifest and the renderers. They hold no file handles and no bytes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from archwheel.facts.arch import CodeKind, Target
from archwheel.facts.versions import PtxIsaVersion


class Compression(str, Enum):
    """How a fatbin entry's payload is stored."""

    NONE = "none"
    LZ4 = "lz4"
    ZSTD = "zstd"
    LEGACY = "legacy"  # flag 0x1000: the pre-12.4 fatbin compression (not decodable here)


class Origin(str, Enum):
    """Where an image was found: in a fatbin container, or as a bare ELF cubin."""

    FATBIN = "fatbin"  # an entry of a fatbin container
    RAW_CUBIN = "raw-cubin"  # an ELF cubin stored outside any container (e.g. in .rodata)
    CUBIN_FILE = "cubin-file"  # the file itself is a cubin


class Severity(str, Enum):
    """How bad a ``Problem`` is: an error makes the inventory incomplete, a warning does not."""

    ERROR = "error"  # part of the input could not be read: the result is incomplete
    WARNING = "warning"  # read completely, but something deserves attention


# Control characters (C0, DEL, C1) shown as escapes: a name read from an input keeps its exact
# bytes in the model and in JSON, but a problem's one line stays one line.
_ONE_LINE = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}


@dataclass(frozen=True)
class Problem:
    """Something wrong with one input, file or member, as one clear line."""

    source: str  # the input (wheel or file path)
    message: str
    member: str | None = None  # member path inside a wheel or archive
    severity: Severity = Severity.ERROR

    def one_line(self) -> str:
        """``source!member: message`` with control characters escaped, for the report."""
        where = f"{self.source}!{self.member}" if self.member else self.source
        return f"{where}: {self.message}".translate(_ONE_LINE)


class FatbinEntry(NamedTuple):
    """One image inside a fatbin container.

    A named tuple, not a frozen dataclass: a library may hold 2^18 entries, and a frozen
    dataclass costs about 1 us to make against 0.2 us
    (docs/maintainers/performance.md, "Hostile input"). Immutable and compared by value all the
    same; no field may be named like a tuple method.
    """

    section: str  # ELF section holding the container, e.g. ".nv_fatbin"; "" for raw fatbins
    offset: int  # offset of the entry header within the library file
    kind: CodeKind
    target: Target
    compression: Compression
    stored_bytes: int  # bytes the entry occupies in the file: entry header + padded payload
    uncompressed_bytes: int  # payload size once decompressed
    ptx_isa: PtxIsaVersion | None = None  # PTX only: the PTX ISA version
    flags: int = 0
    origin: Origin = Origin.FATBIN

    @property
    def arch(self) -> str:
        """``sm_90a``, ``compute_120``, ``lto_90``."""
        return self.target.name(self.kind)


class FatbinContainer(NamedTuple):
    """One fatbin container: the unit the CUDA runtime picks an image for (one per translation
    unit), with the entries read from it in file order. A named tuple, as ``FatbinEntry``."""

    section: str  # ELF section holding it, as in ``FatbinEntry.section``
    offset: int  # offset of the container header within the library file
    size: int  # bytes its header declares: the 16-byte header and its entries
    entries: tuple[FatbinEntry, ...] = ()


@dataclass(frozen=True)
class ImageRow:
    """Entries aggregated per (section, kind, arch): the audit's unit of report."""

    section: str
    kind: CodeKind
    target: Target
    count: int
    stored_bytes: int
    uncompressed_bytes: int
    compressions: tuple[Compression, ...]
    ptx_isa: tuple[PtxIsaVersion, ...] = ()
    origin: Origin = Origin.FATBIN

    @property
    def arch(self) -> str:
        """The row's arch as users write it: ``sm_90a``, ``compute_120``, ``lto_90``."""
        return self.target.name(self.kind)


@dataclass(frozen=True)
class LibraryInventory:
    """Device code found in one library (a shared object, executable, object, cubin, fatbin).

    ``path`` is the member path inside a wheel, the path relative to an audited directory, or
    the file path; an object inside a static library is ``libfoo.a(bar.o)``.

    ``entries`` holds every image, sorted by offset; ``containers`` the fatbin containers they
    were read from, in file order. Every entry sits in one container except a standalone
    cubin's, which is no fatbin at all, and raw cubins (``Origin.RAW_CUBIN``): ELF cubins a
    library keeps in an ordinary data section for ``cuModuleLoadData``.
    """

    path: str
    file_kind: str  # "shared-object", "executable", "relocatable", "cubin", "fatbin", "unknown-elf"
    size: int
    entries: tuple[FatbinEntry, ...] = ()
    containers: tuple[FatbinContainer, ...] = ()
    # Bytes in its .debug_* and .zdebug_* sections (DWARF): what strip --strip-debug removes.
    debug_bytes: int = 0

    @property
    def has_device_code(self) -> bool:
        """Whether any image was found (a CPU-only library has none)."""
        return bool(self.entries)

    def images(self) -> list[ImageRow]:
        """The library's entries grouped per (section, kind, arch), as the audit reports them."""
        return aggregate(self.entries)

    def targets(self, kind: CodeKind) -> frozenset[Target]:
        """The targets the library has images of ``kind`` for (SASS, PTX or LTO-IR)."""
        return frozenset(e.target for e in self.entries if e.kind is kind)

    @property
    def raw_cubins(self) -> tuple[FatbinEntry, ...]:
        """The ELF cubins kept outside any container, which the library loads itself."""
        return tuple(e for e in self.entries if e.origin is Origin.RAW_CUBIN)


@dataclass(frozen=True)
class VariantFile:
    """A wheel's (or an installed distribution's) ``.dist-info/variant.json`` as found: the
    parsed JSON document, or the one-line reason it could not be read (too large, not JSON).
    Its claims are judged by ``verdicts.variants``, whoever wrote it."""

    member: str  # the member (wheel) or file (installed) it was read from
    document: object = None  # the parsed JSON; None where ``problem`` says why
    problem: str | None = None


@dataclass(frozen=True)
class InputInventory:
    """Everything found in one input (a wheel, a file, a directory, an installed distribution)."""

    source: str
    input_kind: str  # "wheel", "file", "directory", "installed"
    libraries: tuple[LibraryInventory, ...]  # every ELF-like file scanned, device code or not
    problems: tuple[Problem, ...] = ()
    members_scanned: int = 0
    bytes_scanned: int = 0
    metadata: dict[str, str] = field(default_factory=dict)  # e.g. wheel name/version
    # Wheel member -> hex sha256 of its bytes, for the binary members read whole; only from a
    # scan asked for them (``scan_path(..., digests=True)``).
    member_digests: dict[str, str] = field(default_factory=dict)
    # Its .dist-info/variant.json, where a wheel or an installed distribution has one.
    variant_json: VariantFile | None = None

    @property
    def complete(self) -> bool:
        """Whether the whole input was read (no error-severity problem)."""
        return not any(p.severity is Severity.ERROR for p in self.problems)

    @property
    def device_libraries(self) -> tuple[LibraryInventory, ...]:
        """The libraries holding device code: those the arch verdicts judge."""
        return tuple(lib for lib in self.libraries if lib.has_device_code)

    def images(self) -> list[ImageRow]:
        """Rows over the whole input (sections merged per kind/arch, section = "*")."""
        return aggregate((e for lib in self.libraries for e in lib.entries), merge_sections=True)


def aggregate(entries: Iterable[FatbinEntry], *, merge_sections: bool = False) -> list[ImageRow]:
    """Group entries per (section, kind, target, origin), sorted by section, kind, target."""
    groups: dict[tuple[str, CodeKind, Target, Origin], list[FatbinEntry]] = defaultdict(list)
    for e in entries:
        groups[("*" if merge_sections else e.section, e.kind, e.target, e.origin)].append(e)
    kind_order = {CodeKind.SASS: 0, CodeKind.PTX: 1, CodeKind.LTOIR: 2}
    rows = [
        ImageRow(
            section=section,
            kind=kind,
            target=target,
            count=len(group),
            stored_bytes=sum(e.stored_bytes for e in group),
            uncompressed_bytes=sum(e.uncompressed_bytes for e in group),
            compressions=tuple(sorted({e.compression for e in group}, key=lambda c: c.value)),
            ptx_isa=tuple(sorted({e.ptx_isa for e in group if e.ptx_isa is not None})),
            origin=origin,
        )
        for (section, kind, target, origin), group in groups.items()
    ]
    rows.sort(key=lambda r: (r.section, kind_order[r.kind], r.target, r.origin.value))
    return rows
