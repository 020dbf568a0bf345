"""Fatbin containers and entries, decoded from bytes (cuda-facts.md section 5).

A container is a 16-byte header (magic 0xBA55ED50, version 1, header size 16, size of the
entries) followed by entries that tile it exactly. Each entry has a header of at least 64 bytes
whose own size field says where the payload starts, and a padded payload size that says where
the next entry starts. The arch, its 'a'/'f' suffix, the kind and the compression are read
from the entry header, never from the payload.

Validation is strict so that random bytes never produce a false entry: every field that has a
known range is checked, and a container is only accepted when its entries tile it exactly.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from archwheel.binary.elf import FormatError
from archwheel.binary.model import Compression, FatbinEntry
from archwheel.facts.arch import CodeKind, Target, Variant
from archwheel.facts.versions import ComputeCapability, PtxIsaVersion

CONTAINER_MAGIC = 0xBA55ED50
CONTAINER_MAGIC_BYTES = struct.pack("<I", CONTAINER_MAGIC)
CONTAINER_HEADER_SIZE = 16
_CONTAINER = struct.Struct("<IHHQ")
# An entry header's first 64 bytes: kind, marker, header size, padded payload size, compressed
# size, descriptor, PTX minor, PTX major, SM, id offset, id length, flags, (0x30), uncompressed.
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
ENTRY_HEADER_MIN = 64
ENTRY_HEADER_MAX = 4096
ENTRY_MARKER = 0x0101

KIND_PTX = 1
KIND_ELF = 2
KIND_LTOIR = 8
KINDS = {KIND_PTX: CodeKind.PTX, KIND_ELF: CodeKind.SASS, KIND_LTOIR: CodeKind.LTOIR}

FLAG_64BIT = 0x1
FLAG_DEBUG = 0x2
FLAG_HOST_LINUX = 0x10
FLAG_HOST_MAC = 0x20
FLAG_HOST_WINDOWS = 0x40
FLAG_COMPRESS_LEGACY = 0x1000
FLAG_COMPRESS_LZ4 = 0x2000
FLAG_COMPRESS_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY_SPECIFIC = 0x200000
# Observed on every entry that carries an options/compatibility descriptor (nvcc 12.8+, 13.x).
FLAG_HAS_DESCRIPTOR = 0x1000000
# Observed on every LTO-IR entry nvcc 13.0 writes (docs/maintainers/fixtures.md); meaning not
# documented.
FLAG_LTOIR_OBSERVED = 0x10000
KNOWN_FLAGS = (
    FLAG_64BIT
    | FLAG_DEBUG
    | FLAG_HOST_LINUX
    | FLAG_HOST_MAC
    | FLAG_HOST_WINDOWS
    | FLAG_COMPRESS_LEGACY
    | FLAG_COMPRESS_LZ4
    | FLAG_COMPRESS_ZSTD
    | FLAG_ARCH_SPECIFIC
    | FLAG_FAMILY_SPECIFIC
    | FLAG_HAS_DESCRIPTOR
    | FLAG_LTOIR_OBSERVED
)
# SM numbers outside this range cannot be real (sm_10 .. sm_199).
SM_MIN, SM_MAX = 10, 199
_COMPRESSION_BITS = FLAG_COMPRESS_LEGACY | FLAG_COMPRESS_LZ4 | FLAG_COMPRESS_ZSTD
_BOTH_VARIANTS = FLAG_ARCH_SPECIFIC | FLAG_FAMILY_SPECIFIC


@dataclass(frozen=True)
class ContainerHeader:
    """A checked fatbin container header at ``offset``; made by ``parse_container_header``."""

    offset: int
    entries_size: int

    @property
    def entries_start(self) -> int:
        """Where the first entry header starts (just past the 16-byte container header)."""
        return self.offset + CONTAINER_HEADER_SIZE

    @property
    def end(self) -> int:
        """One past the container's last byte: where a following container may start."""
        return self.entries_start + self.entries_size


def container_entries_size(data: bytes | memoryview, offset: int) -> int:
    """Check a container header; its entries' size, or ``FormatError`` when it is not one."""
    if len(data) < CONTAINER_HEADER_SIZE:
        raise FormatError(f"container header at {offset:#x} cut short")
    magic, version, header_size, size = _CONTAINER.unpack_from(data, 0)
    if magic != CONTAINER_MAGIC:
        raise FormatError(f"no container magic at {offset:#x}")
    if version != 1:
        raise FormatError(f"container at {offset:#x} has unknown version {version}")
    if header_size != CONTAINER_HEADER_SIZE:
        raise FormatError(f"container at {offset:#x} has header size {header_size}, not 16")
    # nvcc's device link writes valid empty containers (PTX-only builds): 0 is legitimate.
    if 0 < size < ENTRY_HEADER_MIN:
        raise FormatError(f"container at {offset:#x} declares {size} bytes of entries")
    return int(size)


def parse_container_header(data: bytes, offset: int) -> ContainerHeader:
    """Decode and check a container header; raise ``FormatError`` when it is not one."""
    return ContainerHeader(offset, container_entries_size(data, offset))


@dataclass(frozen=True)
class EntryHeader:
    """A checked fatbin entry header (one SASS, PTX or LTO-IR image) at ``offset``.

    Made by ``parse_entry_header`` and ``entry_header``; ``entry_model`` turns it into a
    ``FatbinEntry``.
    """

    offset: int
    kind: int
    header_size: int
    padded_size: int
    compressed_size: int
    version_major: int
    version_minor: int
    sm: int
    flags: int
    uncompressed_size: int

    @property
    def end(self) -> int:
        """One past the padded payload: where the next entry of the container starts."""
        return self.offset + self.header_size + self.padded_size

    @property
    def payload_start(self) -> int:
        """Where the image's bytes start (the header's own size field says)."""
        return self.offset + self.header_size

    @property
    def compression(self) -> Compression:
        """How the payload is compressed, from the flags (ZSTD over LZ4 over legacy)."""
        if self.flags & FLAG_COMPRESS_ZSTD:
            return Compression.ZSTD
        if self.flags & FLAG_COMPRESS_LZ4:
            return Compression.LZ4
        if self.flags & FLAG_COMPRESS_LEGACY:
            return Compression.LEGACY
        return Compression.NONE

    @property
    def unknown_flags(self) -> int:
        """The flag bits outside ``KNOWN_FLAGS`` (a newer nvcc's), which the audit reports."""
        return self.flags & ~KNOWN_FLAGS


RawEntry = tuple[int, tuple[int, ...]]
"""An entry header that passed every check: its absolute offset and its ``_ENTRY`` fields.

The scanner keeps these (one tuple per entry, up to 2^18 per binary) and makes the public
``FatbinEntry`` once the section is known, without an ``EntryHeader`` in between."""


def parse_entry_header(data: bytes | memoryview, offset: int, limit: int) -> EntryHeader:
    """Decode and check an entry header at ``offset``; ``limit`` is its container's end."""
    if len(data) < ENTRY_HEADER_MIN:
        raise FormatError(f"entry at {offset:#x} cut short ({len(data)} bytes)")
    return entry_header(offset, _checked(_ENTRY.unpack_from(data, 0), offset, limit))


def _checked(fields: tuple[int, ...], offset: int, limit: int) -> tuple[int, ...]:
    """``fields`` when they form a valid entry header at ``offset``, else ``FormatError``."""
    (kind, marker, header_size, padded, compressed, _descriptor, _vminor, _vmajor, sm, _id_off,
     _id_len, flags, _reserved, _uncompressed) = fields  # fmt: skip
    where = f"entry at {offset:#x}"
    if kind not in KINDS:
        raise FormatError(f"{where}: unknown kind {kind} (known: 1 PTX, 2 ELF, 8 LTO-IR)")
    if marker != ENTRY_MARKER:
        raise FormatError(f"{where}: bad marker {marker:#06x} (expected 0x0101)")
    if not ENTRY_HEADER_MIN <= header_size <= ENTRY_HEADER_MAX or header_size % 8:
        raise FormatError(f"{where}: implausible header size {header_size}")
    if not SM_MIN <= sm <= SM_MAX:
        raise FormatError(f"{where}: implausible SM number {sm}")
    end = offset + header_size + padded
    if end > limit:
        raise FormatError(
            f"{where}: payload of {padded} bytes runs {end - limit} bytes past its container"
        )
    if compressed and compressed > padded:
        raise FormatError(f"{where}: compressed size {compressed} exceeds its payload {padded}")
    compression_bits = flags & _COMPRESSION_BITS
    if compression_bits & (compression_bits - 1):
        raise FormatError(f"{where}: several compression flags at once ({flags:#x})")
    if flags & FLAG_ARCH_SPECIFIC and flags & FLAG_FAMILY_SPECIFIC:
        raise FormatError(f"{where}: both 'a' and 'f' flags set ({flags:#x})")
    return fields


def entry_header(offset: int, fields: tuple[int, ...]) -> EntryHeader:
    """The ``EntryHeader`` of checked ``fields`` (``RawEntry``) at ``offset``."""
    return EntryHeader(
        offset=offset,
        kind=fields[0],
        header_size=fields[2],
        padded_size=fields[3],
        compressed_size=fields[4],
        version_major=fields[7],
        version_minor=fields[6],
        sm=fields[8],
        flags=fields[11],
        uncompressed_size=fields[13],
    )


def walk_entries(
    buf: bytes | memoryview,
    base: int,
    position: int,
    end: int,
    out: list[RawEntry],
    *,
    room: int,
) -> tuple[int, str | None]:
    """Check the entry headers from ``position`` on that lie wholly in ``buf`` (whose first
    byte is at absolute ``base``), up to the container's ``end``; append at most ``room`` of
    them to ``out``. Returns where it stopped and, when that entry is invalid, why.

    It stops at ``end``, at the first header not wholly in ``buf``, at an invalid header, or
    after ``room`` entries; with no room at all it checks the one at ``position`` and stops
    (a damaged entry is reported as such, a valid one as over the limit by the caller).
    One loop over a precompiled ``Struct``, no object per entry but its tuple: a container may
    hold thousands of 64-byte entries (the per-entry cost is the cost per byte there).
    """
    unpack = _ENTRY.unpack_from
    append = out.append
    kinds = KINDS
    last = base + len(buf) - ENTRY_HEADER_MIN  # the last position whose header is in buf
    while position < end and position <= last:
        fields = unpack(buf, position - base)
        (kind, marker, header_size, padded, compressed, _descriptor, _vminor, _vmajor, sm,
         _id_off, _id_len, flags, _reserved, _uncompressed) = fields  # fmt: skip
        following = position + header_size + padded
        bits = flags & _COMPRESSION_BITS
        if not (
            kind in kinds
            and marker == ENTRY_MARKER
            and ENTRY_HEADER_MIN <= header_size <= ENTRY_HEADER_MAX
            and not header_size & 7
            and SM_MIN <= sm <= SM_MAX
            and following <= end
            and (not compressed or compressed <= padded)
            and not bits & (bits - 1)
            and flags & _BOTH_VARIANTS != _BOTH_VARIANTS
        ):
            try:
                _checked(fields, position, end)
            except FormatError as exc:
                return position, str(exc)
        if room <= 0:
            return position, None
        append((position, fields))
        position = following
        room -= 1
        if not room:
            break
    return position, None


def _variant(flags: int) -> Variant:
    if flags & FLAG_ARCH_SPECIFIC:
        return Variant.ARCH_SPECIFIC
    if flags & FLAG_FAMILY_SPECIFIC:
        return Variant.FAMILY_SPECIFIC
    return Variant.PLAIN


def _compression(flags: int) -> Compression:
    if flags & FLAG_COMPRESS_ZSTD:
        return Compression.ZSTD
    if flags & FLAG_COMPRESS_LZ4:
        return Compression.LZ4
    if flags & FLAG_COMPRESS_LEGACY:
        return Compression.LEGACY
    return Compression.NONE


# The few distinct targets, compressions and PTX ISA versions of a binary, made once each
# (their values are frozen and compared by value: sharing them changes nothing but the cost).
_TARGETS: dict[tuple[int, int], Target] = {}
_PTX_ISAS: dict[tuple[int, int], PtxIsaVersion] = {}
_COMPRESSIONS = {bits: _compression(bits) for bits in (0, *(1 << n for n in range(24)))}


# At most this many of each are kept: PTX ISA versions come from the input (2^32 of them).
_MAX_SHARED = 4096


def _target(sm: int, flags: int) -> Target:
    key = (sm, flags & _BOTH_VARIANTS)
    found = _TARGETS.get(key)
    if found is None:
        if len(_TARGETS) >= _MAX_SHARED:
            _TARGETS.clear()
        found = _TARGETS.setdefault(key, Target(ComputeCapability.from_number(sm), _variant(flags)))
    return found


def _ptx_isa(major: int, minor: int) -> PtxIsaVersion:
    found = _PTX_ISAS.get((major, minor))
    if found is None:
        if len(_PTX_ISAS) >= _MAX_SHARED:
            _PTX_ISAS.clear()
        found = _PTX_ISAS.setdefault((major, minor), PtxIsaVersion(major, minor))
    return found


def describe(
    kind_code: int, sm: int, flags: int, vmajor: int, vminor: int
) -> tuple[CodeKind, Target, Compression, PtxIsaVersion | None]:
    """An entry's kind, target, compression and PTX ISA from its checked header fields: for
    ``entry_from_raw``, and for the compiled scan, which asks once per distinct header
    (``binary/_speedups.c``)."""
    kind = KINDS[kind_code]
    ptx = _ptx_isa(vmajor, vminor) if kind is CodeKind.PTX else None
    return kind, _target(sm, flags), _COMPRESSIONS[flags & _COMPRESSION_BITS], ptx


def entry_model(header: EntryHeader, section: str) -> FatbinEntry:
    """The public ``FatbinEntry`` for a checked header found in ``section``."""
    fields = (header.kind, 0, header.header_size, header.padded_size, header.compressed_size, 0,
              header.version_minor, header.version_major, header.sm, 0, 0, header.flags, 0,
              header.uncompressed_size)  # fmt: skip
    return entry_from_raw((header.offset, fields), section)


def entry_from_raw(raw: RawEntry, section: str, shift: int = 0) -> FatbinEntry:
    """The public ``FatbinEntry`` for a checked ``RawEntry`` found in ``section``; its offset is
    reported ``shift`` bytes lower (an archive member's entries, relative to the member)."""
    offset, fields = raw
    (kind_code, _marker, header_size, padded, compressed, _descriptor, vminor, vmajor, sm,
     _id_off, _id_len, flags, _reserved, uncompressed) = fields  # fmt: skip
    kind, target, compression, ptx_isa = describe(kind_code, sm, flags, vmajor, vminor)
    if compression is Compression.NONE:
        uncompressed = padded
    elif not uncompressed:
        uncompressed = compressed
    return FatbinEntry(
        section,
        offset - shift,
        kind,
        target,
        compression,
        header_size + padded,
        uncompressed,
        ptx_isa,
        flags,
    )
