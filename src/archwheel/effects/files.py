"""Files archwheel writes and hashes: atomic writes, sha256 of a file.

An output file is never seen half-written: it is written to a temporary file in the same
folder, flushed, and renamed over the target (``os.replace`` is atomic on POSIX). A failure at
any point removes the temporary file. New files get the usual permissions (0666 less the
umask), not the 0600 that ``tempfile`` would leave.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

HASH_BLOCK = 1 << 20


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


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
