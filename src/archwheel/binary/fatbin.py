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
# Observed on every LTO-IR entry nvcc 13.0 writes (docs/fixtures.md); meaning not documented.
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


@dataclass(frozen=True)
class ContainerHeader:
    offset: int
    entries_size: int

    @property
    def entries_start(self) -> int:
        return self.offset + CONTAINER_HEADER_SIZE

    @property
    def end(self) -> int:
        return self.entries_start + self.entries_size


def parse_container_header(data: bytes, offset: int) -> ContainerHeader:
    """Decode and check a container header; raise ``FormatError`` when it is not one."""
    if len(data) < CONTAINER_HEADER_SIZE:
        raise FormatError(f"container header at {offset:#x} cut short")
    magic, version, header_size, size = struct.unpack_from("<IHHQ", data, 0)
    if magic != CONTAINER_MAGIC:
        raise FormatError(f"no container magic at {offset:#x}")
    if version != 1:
        raise FormatError(f"container at {offset:#x} has unknown version {version}")
    if header_size != CONTAINER_HEADER_SIZE:
        raise FormatError(f"container at {offset:#x} has header size {header_size}, not 16")
    # nvcc's device link writes valid empty containers (PTX-only builds): 0 is legitimate.
    if 0 < size < ENTRY_HEADER_MIN:
        raise FormatError(f"container at {offset:#x} declares {size} bytes of entries")
    return ContainerHeader(offset, size)


@dataclass(frozen=True)
class EntryHeader:
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
        return self.offset + self.header_size + self.padded_size

    @property
    def payload_start(self) -> int:
        return self.offset + self.header_size

    @property
    def compression(self) -> Compression:
        if self.flags & FLAG_COMPRESS_ZSTD:
            return Compression.ZSTD
        if self.flags & FLAG_COMPRESS_LZ4:
            return Compression.LZ4
        if self.flags & FLAG_COMPRESS_LEGACY:
            return Compression.LEGACY
        return Compression.NONE

    @property
    def unknown_flags(self) -> int:
        return self.flags & ~KNOWN_FLAGS


def parse_entry_header(data: bytes, offset: int, limit: int) -> EntryHeader:
    """Decode and check an entry header at ``offset``; ``limit`` is its container's end."""
    if len(data) < ENTRY_HEADER_MIN:
        raise FormatError(f"entry header at {offset:#x} cut short ({len(data)} bytes)")
    (kind, marker, header_size, padded, compressed, _descriptor, vminor, vmajor, sm, _id_off,
     _id_len, flags) = struct.unpack_from("<HHIQIIHHIIIQ", data, 0)  # fmt: skip
    (uncompressed,) = struct.unpack_from("<Q", data, 0x38)
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
    compression_bits = flags & (FLAG_COMPRESS_LEGACY | FLAG_COMPRESS_LZ4 | FLAG_COMPRESS_ZSTD)
    if compression_bits & (compression_bits - 1):
        raise FormatError(f"{where}: several compression flags at once ({flags:#x})")
    if flags & FLAG_ARCH_SPECIFIC and flags & FLAG_FAMILY_SPECIFIC:
        raise FormatError(f"{where}: both 'a' and 'f' flags set ({flags:#x})")
    return EntryHeader(
        offset=offset,
        kind=kind,
        header_size=header_size,
        padded_size=padded,
        compressed_size=compressed,
        version_major=vmajor,
        version_minor=vminor,
        sm=sm,
        flags=flags,
        uncompressed_size=uncompressed,
    )


def entry_model(header: EntryHeader, section: str) -> FatbinEntry:
    """The public ``FatbinEntry`` for a checked header found in ``section``."""
    if header.flags & FLAG_ARCH_SPECIFIC:
        variant = Variant.ARCH_SPECIFIC
    elif header.flags & FLAG_FAMILY_SPECIFIC:
        variant = Variant.FAMILY_SPECIFIC
    else:
        variant = Variant.PLAIN
    kind = KINDS[header.kind]
    compression = header.compression
    if compression is Compression.NONE:
        uncompressed = header.padded_size
    else:
        uncompressed = header.uncompressed_size or header.compressed_size
    return FatbinEntry(
        section=section,
        offset=header.offset,
        kind=kind,
        target=Target(ComputeCapability.from_number(header.sm), variant),
        compression=compression,
        stored_bytes=header.header_size + header.padded_size,
        uncompressed_bytes=uncompressed,
        ptx_isa=(
            PtxIsaVersion(header.version_major, header.version_minor)
            if kind is CodeKind.PTX
            else None
        ),
        flags=header.flags,
    )
