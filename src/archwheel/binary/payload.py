"""Deep checks of fatbin payloads (``archwheel audit --deep``).

The audit normally trusts the entry headers. With ``--deep`` each payload is decompressed
(ZSTD or LZ4, bounded by the size its header declares) and compared with its header: the
uncompressed size, the cubin's ELF machine and SM (from ``e_flags``), the PTX text's
``.version`` and ``.target``. A disagreement means a damaged or doctored fatbin.
"""

from __future__ import annotations

import io
import re

import lz4.block
import zstandard

from archwheel.binary.elf import ELF_MAGIC, EM_CUDA, FormatError, cubin_sm, parse_elf_header
from archwheel.binary.fatbin import (
    FLAG_ARCH_SPECIFIC,
    FLAG_FAMILY_SPECIFIC,
    KIND_ELF,
    KIND_PTX,
    EntryHeader,
)
from archwheel.binary.model import Compression

# The largest payload --deep reads (the stream's request limit); real cubins are a few MB.
MAX_DEEP_PAYLOAD = 64 << 20
_PTX_VERSION = re.compile(rb"^\s*\.version\s+(\d+)\.(\d+)", re.MULTILINE)
_PTX_TARGET = re.compile(rb"^\s*\.target\s+(sm_\d+[af]?)", re.MULTILINE)


def stored_payload(header: EntryHeader, data: bytes) -> bytes:
    """The payload bytes as stored (compressed payloads are shorter than their padding)."""
    if header.compressed_size:
        return data[: header.compressed_size]
    return data


def decompress(header: EntryHeader, data: bytes) -> bytes:
    """The payload, decompressed; raise ``FormatError`` when it cannot be."""
    compression = header.compression
    stored = stored_payload(header, data)
    if compression is Compression.NONE:
        return stored
    limit = header.uncompressed_size
    if not 0 < limit <= MAX_DEEP_PAYLOAD:
        raise FormatError(f"entry at {header.offset:#x}: uncompressed size {limit} out of range")
    if compression is Compression.ZSTD:
        try:
            # A stream reader bounds the output whatever size the frame header claims.
            with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(stored)) as reader:
                out: bytes = reader.read(limit + 1)
        except zstandard.ZstdError as exc:
            raise FormatError(
                f"entry at {header.offset:#x}: corrupt ZSTD payload ({exc})"
            ) from None
        return out
    if compression is Compression.LZ4:
        try:
            block: bytes = lz4.block.decompress(stored, uncompressed_size=limit)
        except (lz4.block.LZ4BlockError, ValueError) as exc:
            raise FormatError(f"entry at {header.offset:#x}: corrupt LZ4 payload ({exc})") from None
        return block
    raise FormatError(f"entry at {header.offset:#x}: legacy compression cannot be checked")


def check_payload(header: EntryHeader, data: bytes) -> str | None:
    """Why the payload disagrees with its header, or None when it agrees."""
    where = f"entry at {header.offset:#x}"
    try:
        payload = decompress(header, data)
    except FormatError as exc:
        return str(exc)
    if header.compressed_size and len(payload) > header.uncompressed_size:
        size = header.uncompressed_size
        return f"{where}: payload inflates past the {size} bytes its header declares"
    if header.compressed_size and len(payload) != header.uncompressed_size:
        return (
            f"{where}: payload inflates to {len(payload)} bytes, "
            f"the header says {header.uncompressed_size}"
        )
    suffix = ""
    if header.flags & FLAG_ARCH_SPECIFIC:
        suffix = "a"
    elif header.flags & FLAG_FAMILY_SPECIFIC:
        suffix = "f"
    if header.kind == KIND_ELF:
        if not payload.startswith(ELF_MAGIC):
            return f"{where}: SASS payload is not an ELF cubin"
        try:
            elf = parse_elf_header(payload[:64])
        except FormatError as exc:
            return f"{where}: cubin header unreadable ({exc})"
        if elf.e_machine != EM_CUDA:
            return f"{where}: cubin machine {elf.e_machine}, expected {EM_CUDA} (CUDA)"
        sm = cubin_sm(elf)
        if sm != header.sm:
            return f"{where}: header says sm_{header.sm}{suffix}, the cubin says sm_{sm}"
    elif header.kind == KIND_PTX:
        text = payload[: 1 << 20]
        version = _PTX_VERSION.search(text)
        target = _PTX_TARGET.search(text)
        if version is None or target is None:
            return f"{where}: PTX payload without .version/.target"
        isa = (int(version.group(1)), int(version.group(2)))
        if isa != (header.version_major, header.version_minor):
            return (
                f"{where}: header says PTX ISA {header.version_major}.{header.version_minor}, "
                f"the PTX says {isa[0]}.{isa[1]}"
            )
        declared = f"sm_{header.sm}{suffix}"
        if target.group(1).decode() != declared:
            return f"{where}: header says {declared}, the PTX targets {target.group(1).decode()}"
    return None
