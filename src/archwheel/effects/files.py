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
import errno
import functools
import json
import os
import shutil
import stat
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, BinaryIO, TypeGuard

from archwheel.errors import InputError
from archwheel.facts import documents
from archwheel.facts.documents import (
    ErrorFactory,
    load_document,
    unreadable,
)

HASH_BLOCK = 1 << 20
# Filesystems whose files report a size they do not have, block, or never end.
PSEUDO_FILESYSTEMS = ("/proc", "/sys")


class NotRegularFile(OSError):
    """An input that is not a regular file: a FIFO, a device, a socket, a directory, or a
    pseudo-file of /proc or /sys (refused by type, never by its size)."""

    def __init__(self, path: Path | str, what: str) -> None:
        super().__init__(errno.EINVAL, f"not a regular file ({what}): only regular files are read")
        self.filename = str(path)


class FileTooLarge(OSError):
    """A file above the size a caller accepts for it."""

    def __init__(self, path: Path | str, limit: int) -> None:
        super().__init__(errno.EFBIG, f"larger than the limit of {limit} bytes")
        self.filename = str(path)


def kind_of(mode: int) -> str:
    """What ``st_mode`` describes, in words."""
    for test, word in (
        (stat.S_ISREG, "regular file"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISLNK, "symbolic link"),
    ):
        if test(mode):
            return word
    return "special file"


@functools.cache
def _pseudo_devices() -> frozenset[int]:
    """The devices of /proc and /sys where they are mounted (not merely folders of /)."""
    devices = set()
    with contextlib.suppress(OSError):
        plain = Path("/").stat().st_dev
        for root in PSEUDO_FILESYSTEMS:
            with contextlib.suppress(OSError):
                device = Path(root).stat().st_dev
                if device != plain:
                    devices.add(device)
    return frozenset(devices)


def is_pseudo(status: os.stat_result) -> bool:
    """Whether ``status`` is of a file or folder of /proc or /sys."""
    return status.st_dev in _pseudo_devices()


def check_regular(path: Path | str, status: os.stat_result) -> None:
    """Raise ``NotRegularFile`` unless ``status`` (of ``path``) is a real regular file."""
    if not stat.S_ISREG(status.st_mode):
        raise NotRegularFile(path, kind_of(status.st_mode))
    if is_pseudo(status):
        raise NotRegularFile(path, "a pseudo-file of " + " or ".join(PSEUDO_FILESYSTEMS))


@contextlib.contextmanager
def open_regular(path: Path | str) -> Iterator[BinaryIO]:
    """Open a regular file for reading, refusing special files by type (``NotRegularFile``).

    The open itself never blocks (``O_NONBLOCK``: a FIFO put in the file's place between a
    check and the open cannot stall), and the type is checked on the open descriptor.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        check_regular(path, os.fstat(fd))
        os.set_blocking(fd, True)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        yield handle


def is_text_list(value: object) -> TypeGuard[list[str]]:
    """Whether a parsed document's ``value`` is a list of strings (a shape check of untrusted
    JSON: the readers of program answers check their fields with it)."""
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def _read_text(path: Path | str, limit: int, what: str) -> bytes:
    """The bytes of a document file; ``documents.DocumentUnreadable`` (one line) when there are
    none."""
    try:
        return read_regular(path, limit)
    except FileTooLarge:
        raise documents.DocumentUnreadable(
            f"larger than {limit} bytes" + (f"; not {what}" if what else "")
        ) from None
    except FileNotFoundError:
        raise documents.DocumentUnreadable("does not exist (no such file)") from None
    except OSError as exc:
        raise documents.DocumentUnreadable(f"cannot read: {exc.strerror or exc}") from None


def read_document(
    path: Path | str,
    limit: int,
    nesting: int,
    *,
    toml: bool = False,
    error: ErrorFactory = InputError,
    what: str = "",
    origin: object = None,
) -> tuple[object, bytes]:
    """The JSON (or TOML) document in a regular file of at most ``limit`` bytes, nested at most
    ``nesting`` deep, and its bytes. Anything else is ``error("{file}: {problem}")``, one line
    (no such file, not a regular file, larger than the limit, not UTF-8, not JSON/TOML, a JSON
    key given twice, nested too deep); ``what`` ("a recipe") is said of a file too large to be
    one; ``origin`` names the file in the message (default: ``path``)."""
    where = path if origin is None else origin
    try:
        raw = _read_text(path, limit, what)
    except documents.DocumentUnreadable as exc:
        raise unreadable(where, str(exc), error) from None
    return load_document(raw, origin=where, nesting=nesting, toml=toml, error=error), raw


def read_regular(path: Path | str, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (``FileTooLarge`` above it)."""
    with open_regular(path) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise FileTooLarge(path, limit)
    return data


def sha256_stream(stream: IO[bytes]) -> str:
    """The hex sha256 of what is left to read in ``stream``, read in blocks."""
    import hashlib

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
    import tempfile

    from archwheel.effects.owner import part_token  # a writer's only: a scan writes nothing

    # The writer's pid and start time in the name: a run killed before the rename leaves a
    # part that the next one can tell from a live writer's (effects.owner.dead_parts).
    prefix = f".{path.name[:160]}.{part_token()}."
    fd, tmp_name = tempfile.mkstemp(prefix=prefix, suffix=".part", dir=path.parent)
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
    """Write ``data`` to ``path`` through a synced temporary file: a reader or a crash sees
    the old file or the new one, never half of it."""
    with atomic_writer(path) as f:
        f.write(data)


def write_text_atomic(path: Path, text: str) -> None:
    """``text`` as UTF-8, written as ``write_bytes_atomic`` does."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, document: object) -> None:
    """JSON with two-space indent, sorted as given, a trailing newline; atomically."""
    write_text_atomic(path, json.dumps(document, indent=2) + "\n")


def json_bytes(document: object) -> bytes:
    """The bytes ``write_json_atomic`` writes for ``document``."""
    return (json.dumps(document, indent=2) + "\n").encode("utf-8")


def copy_into(source: Path, out: IO[bytes]) -> None:
    """``source``'s bytes written to an open file."""
    with source.open("rb") as src:
        shutil.copyfileobj(src, out, HASH_BLOCK)


def copy_file_atomic(source: Path, target: Path) -> None:
    """Copy ``source``'s bytes to ``target``; a reader sees the old file or the whole new one."""
    with source.open("rb") as src, atomic_writer(target) as dst:
        shutil.copyfileobj(src, dst, HASH_BLOCK)


# The errors that mean "this file system has no room or takes no writes" (not a bug, not a
# permission the user could have known about beforehand).
NO_ROOM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def place_together(files: Sequence[tuple[Path, Callable[[IO[bytes]], object]]]) -> None:
    """Write every ``(path, write)`` beside its path first, then rename them all, the first
    one last: all of them are placed or none (a full disk, a crash before the renames leave
    the old files as they were, and no part). The first is the one the others describe (a
    wheel): a reader never sees it without them."""
    with contextlib.ExitStack() as stack:
        for path, write in files:
            write(stack.enter_context(atomic_writer(path)))


# What reading one zip member may raise, beside the bounds archwheel checks itself: a damaged
# archive (BadZipFile, EOFError, zlib.error), the file system (OSError), and a member zipfile
# does not read (encrypted: RuntimeError; patched data or another method: NotImplementedError).
# An encrypted METADATA made every command that reads it end with an internal error.
ZIP_MEMBER_ERRORS: tuple[type[Exception], ...] = (
    zipfile.BadZipFile, OSError, EOFError, zlib.error, RuntimeError, NotImplementedError,
)  # fmt: skip


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
