"""Files archwheel writes and hashes: atomic writes, sha256 of a file.

Every file archwheel writes for someone else to read (a wheel placed in the output folder, its
provenance, a manifest, a downloaded sdist, the podman configuration) goes through here.

An output file is never seen half-written: it is written to a temporary file in the same
folder, flushed, and renamed over the target (``os.replace`` is atomic on POSIX). A failure at
any point removes the temporary file. New files get the usual permissions (0666 less the
umask), not the 0600 that ``tempfile`` would leave.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

HASH_BLOCK = 1 << 20


def sha256_stream(stream: IO[bytes]) -> str:
    """The hex sha256 of what is left to read in ``stream``, read in blocks."""
    digest = hashlib.sha256()
    while block := stream.read(HASH_BLOCK):
        digest.update(block)
    return digest.hexdigest()


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file's bytes, read in blocks (``OSError`` when unreadable)."""
    with path.open("rb") as f:
        return sha256_stream(f)


def record_form(sha256_hex: str) -> str:
    """A sha256 as a wheel's RECORD writes it: ``sha256=`` + urlsafe base64, without padding."""
    return "sha256=" + base64.urlsafe_b64encode(bytes.fromhex(sha256_hex)).rstrip(b"=").decode()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_writer(path: Path) -> Iterator[IO[bytes]]:
    """Open a temporary file beside ``path``; on success it replaces ``path``, else vanishes."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        tmp.chmod(0o666 & ~_umask())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: Path, data: bytes) -> None:
    with atomic_writer(path) as f:
        f.write(data)


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, document: object) -> None:
    """JSON with two-space indent, sorted as given, a trailing newline; atomically."""
    write_text_atomic(path, json.dumps(document, indent=2) + "\n")


def copy_file_atomic(source: Path, target: Path) -> None:
    """Copy ``source``'s bytes to ``target``; a reader sees the old file or the whole new one."""
    with source.open("rb") as src, atomic_writer(target) as dst:
        shutil.copyfileobj(src, dst, HASH_BLOCK)


class OversizedMember(ValueError):
    """A zip member that inflates to more bytes than its header declares (a zip bomb)."""


def extract_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, *, exclusive: bool = False
) -> None:
    """Stream one zip member into ``target``, never writing more than the member declares.

    ``exclusive``: ``target`` must not exist yet (``FileExistsError`` otherwise). A member that
    inflates past its declared size is an ``OversizedMember``; errors of the archive itself
    (``zipfile.BadZipFile``, ``OSError``, ``zlib.error``, ...) propagate as they are.
    """
    written = 0
    with archive.open(info) as src, target.open("xb" if exclusive else "wb") as dst:
        while chunk := src.read(HASH_BLOCK):
            written += len(chunk)
            if written > info.file_size:  # zipfile stops at the declared size; be sure
                raise OversizedMember(f"{info.filename} inflates past its declared size")
            dst.write(chunk)
