"""Random access to a file on a package index: HTTP range requests, each block fetched once.

``can-load --torch RANGE`` needs, of each torch wheel (about 500 MB, its nvidia-* companions
more), only its zip directory and the first bytes of each library (what the dynamic loader
reads). ``RangedFile`` reads a remote file by ranges: the bytes asked for are fetched in blocks of
``BLOCK`` bytes (consecutive missing blocks in one request) and kept in a sparse file under the
cache folder, with a one-byte-per-block map of what is there, so that a second run reads nothing
from the network. A block is marked only after its bytes are written, so a run killed halfway
leaves blocks that are fetched again, never bytes that are wrong.

Bounded against a hostile server: the bounds of ``effects.http`` (its redirects, its time),
every answer's status, ``Content-Range`` and length checked against what was asked, at most
``MAX_REQUESTS`` requests per file, the size of the file as the index or the server first says
it (a later answer that disagrees is refused), and ``effects.net.paced_blocks`` against a server
that trickles. A server that answers a range request with the whole file (status 200) is read
whole, once, into the same cache, and ``Transfer.whole`` says so.

Every request runs under a ``effects.deadline.Deadline`` of the run's ``NetBudget``: its
headers within the request bound, every request together within the run's.

What the index states is data: the cache folder of a file is named by a sha256 archwheel
computes (of the URL and the stated sha256), never by the stated sha256 itself, and that stated
sha256 (``digest``) is checked: a whole download is hashed as it arrives and nothing of it is
marked before it matches; ``verify`` fetches what a ranged reader left out and hashes the whole
file. A mismatch is ``HashMismatch`` (one line) and the file's folder is emptied
(``discard``). Before ``verify`` passes, the blocks are only the server's word: the caller keeps
nothing judged from them (docs/verdicts.md, "What is trusted").

A local path or a ``file://`` URL is read directly (``os.pread``), without a cache, and only a
regular file (a FIFO is refused without ever blocking).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import shutil
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from archwheel.effects.deadline import NetBudget
from archwheel.effects.files import check_regular
from archwheel.effects.http import Client, Response
from archwheel.effects.net import TransferError, is_sha256, paced_blocks

BLOCK = 256 << 10
# A read that continues the last one fetches as far ahead as the run of reads has come, up to
# this (a member inflated from its start: 1 MiB reads would be one request each), so at most
# about twice what a reader takes is fetched.
MAX_AHEAD = 32 << 20
MAX_RUNS = 64  # runs of sequential reads followed at once (members inflated in turn)
MAX_REQUESTS = 4096
# The largest file read: a wheel on PyPI is at most a few GB (torch's are about 0.5-1 GB).
MAX_FILE_BYTES = 16 << 30

Progress = Callable[[int, int], None]  # (bytes so far, bytes in all) of a whole download

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)\Z")


class RemoteFileError(TransferError):
    """A remote file that could not be read as asked; the message is one line."""


class HashMismatch(RemoteFileError):
    """The bytes of a remote file do not hash to the sha256 its index states."""


@dataclass
class Transfer:
    """What reading one file cost: requests made, bytes from the network, bytes handed out."""

    requests: int = 0
    fetched: int = 0
    served: int = 0
    whole: bool = False  # the server refused ranges: the file was downloaded whole
    whole_failed: bool = False  # a whole download failed (what it wrote is emptied)


def is_local(location: str) -> bool:
    """A path or a ``file://`` URL (read directly), not an http(s) URL."""
    return "://" not in location or location.startswith("file://")


def local_path(location: str) -> Path:
    """The path of a local location (``is_local``): a ``file://`` URL decoded, a path as is."""
    return Path(unquote(urlparse(location).path)) if "://" in location else Path(location)


class RangedFile:
    """One remote file, read by ``pread`` at any offset; see the module doc."""

    def __init__(
        self,
        url: str,
        cache: Path,
        *,
        size: int | None = None,
        digest: str | None = None,
        context: ssl.SSLContext | None = None,
        progress: Progress | None = None,
        block: int = BLOCK,
        budget: NetBudget | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise RemoteFileError(f"{url}: not an http(s) URL")
        if digest is not None and not is_sha256(digest):
            raise RemoteFileError(
                f"{url}: the index states the sha256 {digest[:80]!r}, which is not one; not read"
            )
        self.url = url
        self.digest = digest  # the sha256 the index states, unverified until ``verify``
        self.block = block
        self.transfer = Transfer()
        self.verified = False
        self._progress = progress
        self._budget = budget or NetBudget()
        self._connection = Client(context)  # one kept-alive connection for all its ranges
        # Named by what archwheel computes, never by what the index states.
        key = hashlib.sha256(f"{url}\0{digest or ''}".encode("utf-8", "surrogateescape"))
        self.folder = cache / key.hexdigest()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.size = size if size is not None else self._size_from_server()
        if not 0 < self.size <= MAX_FILE_BYTES:
            raise RemoteFileError(f"{url}: a size of {self.size} bytes is not one archwheel reads")
        self._blocks = -(-self.size // block)
        # Runs of sequential reads: where each ended -> its bytes so far (oldest first).
        self._runs: dict[int, int] = {}
        self._data = self._open("data", self.size)
        self._map = self._open("blocks", self._blocks)
        # Blocks kept by an earlier run: the server's word then, checked only by ``verify``.
        self.reused = 1 in self._have(0, self._blocks - 1)

    # -- the cache ---------------------------------------------------------------------------

    def _open(self, name: str, size: int) -> int:
        path = self.folder / name
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        if os.fstat(fd).st_size != size:  # another file, or a different size: start again
            os.ftruncate(fd, 0)
            os.ftruncate(fd, size)
        return fd

    def _have(self, first: int, last: int) -> bytes:
        return os.pread(self._map, last - first + 1, first)

    def close(self) -> None:
        """Close the connection and the cache files; the cached blocks stay for a later run."""
        self._connection.close()
        for fd in (self._data, self._map):
            with contextlib.suppress(OSError):
                os.close(fd)

    def discard(self) -> None:
        """Close the file and remove its cache folder (named by archwheel, under the cache
        folder given): what failed or did not match is never kept."""
        self.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def verify(self) -> bool:
        """Check the file against the sha256 its index states: fetch the blocks no read asked
        for, then hash the whole file. True when it matches; False when the index states no
        sha256 (nothing to check against); ``HashMismatch`` when it differs."""
        if self.digest is None:
            return False
        step = max(1, MAX_AHEAD // self.block)
        have = self._have(0, self._blocks - 1)
        at = 0
        while at < self._blocks and not self.verified:
            if have[at]:
                at += 1
                continue
            end = at
            while end + 1 < self._blocks and not have[end + 1] and end + 1 - at < step:
                end += 1
            self._fetch(at, end)
            at = end + 1
        if not self.verified:  # a whole download was checked as it arrived
            digest = hashlib.sha256()
            for offset in range(0, self.size, 1 << 20):
                digest.update(os.pread(self._data, min(1 << 20, self.size - offset), offset))
            self._compare(digest.hexdigest())
        return True

    def _compare(self, actual: str) -> None:
        if actual != self.digest:
            raise HashMismatch(
                f"{self.url}: its sha256 is {actual}, the index states {self.digest}: not kept"
            )
        self.verified = True

    def __enter__(self) -> RangedFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------------------

    def pread(self, length: int, offset: int) -> bytes:
        """Up to ``length`` bytes at ``offset`` (fewer only at the end of the file)."""
        if offset < 0 or length < 0:
            raise ValueError("negative offset or length")
        end = min(self.size, offset + length)
        if end <= offset:
            return b""
        first, last = offset // self.block, (end - 1) // self.block
        # A read that continues an earlier one (where it ended) continues its run; several
        # members inflated in turn are several runs, each followed on its own.
        run_length = self._runs.pop(offset, 0) + (end - offset)
        self._runs[end] = run_length
        if len(self._runs) > MAX_RUNS:
            del self._runs[next(iter(self._runs))]  # the run not continued for longest
        have = self._have(first, last)
        if run_length > end - offset and 0 in have:
            # A sequential reader that needs the network: fetch as far ahead as it has read
            # (the reads the fetch serves then cost nothing, so requests grow with the log of
            # a member's size, not with it).
            ahead = min(run_length, MAX_AHEAD)
            last = max(last, min(self._blocks - 1, (end + ahead - 1) // self.block))
            have = self._have(first, last)
        run: int | None = None
        for i in range(first, last + 2):
            missing = i <= last and have[i - first] == 0
            if missing and run is None:
                run = i
            elif not missing and run is not None:
                self._fetch(run, i - 1)
                run = None
                if self.transfer.whole:
                    break
        data = os.pread(self._data, end - offset, offset)
        if len(data) != end - offset:
            raise RemoteFileError(f"{self.url}: the cache file is shorter than the answer")
        self.transfer.served += len(data)
        return data

    def _request(self, headers: dict[str, str]) -> Response:
        if self.transfer.requests >= MAX_REQUESTS:
            raise RemoteFileError(f"{self.url}: more than {MAX_REQUESTS} requests; given up")
        self.transfer.requests += 1
        try:
            return self._connection.opened(self.url, headers)
        except TransferError as exc:  # refused, redirected too often, answered 404, ...
            raise RemoteFileError(f"{self.url}: {exc}") from None

    def _size_from_server(self) -> int:
        try:
            with self._budget.request(self.url):
                return self._ask_size()
        except TransferError as exc:
            self._connection.close()
            if isinstance(exc, RemoteFileError):
                raise
            raise RemoteFileError(f"{self.url}: {exc}") from None

    def _ask_size(self) -> int:
        response = self._request({"Range": "bytes=0-0"})
        with response:
            status = response.status
            if status == 206:
                try:
                    total = _content_range(response)[2]
                    list(paced_blocks(response, limit=1))
                except BaseException:
                    self._connection.close()  # the body was not read: the connection is spent
                    raise
                return total
            length = response.headers.get("Content-Length")
        self._connection.close()  # a whole file's answer, unread
        if status == 200 and length and length.isdigit():
            return int(length)
        raise RemoteFileError(f"{self.url}: the server says neither the size nor a range")

    def _fetch(self, first: int, last: int) -> None:
        try:
            with self._budget.request(self.url):
                self._fetch_blocks(first, last)
        except BaseException as exc:
            # An answer not read to its end leaves its rest on the connection: never reused.
            self._connection.close()
            if isinstance(exc, TransferError) and not isinstance(exc, RemoteFileError):
                # cut short or too slow (effects.net.paced_blocks)
                raise RemoteFileError(f"{self.url}: {exc}") from None
            raise

    def _fetch_blocks(self, first: int, last: int) -> None:
        lo, hi = first * self.block, min(self.size, (last + 1) * self.block) - 1
        response = self._request({"Range": f"bytes={lo}-{hi}", "Accept-Encoding": "identity"})
        with response:
            status = response.status
            if status == 200:
                self._whole(response)
                return
            if status != 206:
                raise RemoteFileError(f"{self.url}: the server answered {status} to a range")
            start, stop, total = _content_range(response)
            if (start, stop, total) != (lo, hi, self.size):
                raise RemoteFileError(
                    f"{self.url}: asked for bytes {lo}-{hi} of {self.size}, the server sent "
                    f"{start}-{stop} of {total}"
                )
            at = lo
            for chunk in paced_blocks(response, limit=hi - lo + 1):
                os.pwrite(self._data, chunk, at)
                at += len(chunk)
            if at != hi + 1:
                raise RemoteFileError(f"{self.url}: the answer ended {hi + 1 - at} bytes short")
        self.transfer.fetched += hi + 1 - lo
        os.pwrite(self._map, b"\x01" * (last - first + 1), first)

    def _whole(self, response: Response) -> None:
        """The server ignored the range and sends the whole file: keep all of it, hashed as it
        arrives and marked only once it is whole and matches the stated sha256; a download
        that fails leaves nothing (the data file emptied)."""
        at = 0
        digest = hashlib.sha256()
        try:
            for chunk in paced_blocks(response, limit=self.size):
                os.pwrite(self._data, chunk, at)
                digest.update(chunk)
                at += len(chunk)
                if self._progress is not None:
                    self._progress(at, self.size)
            if at != self.size:
                raise RemoteFileError(
                    f"{self.url}: the server sent {at} bytes, not the {self.size} it announced"
                )
            self.transfer.fetched += at
            if self.digest is not None:
                self._compare(digest.hexdigest())
        except BaseException:
            self.transfer.whole_failed = True
            with contextlib.suppress(OSError):
                os.ftruncate(self._map, 0)
                os.ftruncate(self._map, self._blocks)
                os.ftruncate(self._data, 0)
                os.ftruncate(self._data, self.size)
            raise
        self.transfer.whole = True
        os.pwrite(self._map, b"\x01" * self._blocks, 0)

    def reader(self) -> io.BufferedReader:
        """A read-only, seekable file object over this file (for ``zipfile``)."""
        return io.BufferedReader(_View(self.pread, self.size), buffer_size=64 << 10)


class LocalFile:
    """A local file with the same ``pread``/``size``/``transfer`` as ``RangedFile``."""

    def __init__(self, path: Path) -> None:
        self.url = str(path)
        # Never blocks (a FIFO), and only a regular file is read (effects.files.open_regular).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            status = os.fstat(fd)
            check_regular(path, status)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.size = status.st_size
        self.transfer = Transfer()

    def pread(self, length: int, offset: int) -> bytes:
        """``length`` bytes at ``offset`` (fewer at the end), counted as served."""
        data = os.pread(self._fd, length, offset)
        self.transfer.served += len(data)
        return data

    def reader(self) -> io.BufferedReader:
        """A read-only, seekable file object over this file (for ``zipfile``)."""
        return io.BufferedReader(_View(self.pread, self.size), buffer_size=64 << 10)

    def close(self) -> None:
        """Close the file."""
        os.close(self._fd)

    def __enter__(self) -> LocalFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _View(io.RawIOBase):
    def __init__(self, pread: Callable[[int, int], bytes], size: int) -> None:
        self._pread = pread
        self._size = size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise OSError(22, "negative seek position")
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self._pread(len(buffer), self._pos)
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)


def _content_range(response: Response) -> tuple[int, int, int]:
    text = (response.headers.get("Content-Range") or "").strip()
    match = _CONTENT_RANGE.match(text)
    if not match:
        raise RemoteFileError(f"an answer to a range request with Content-Range {text[:80]!r}")
    start, stop, total = (int(g) for g in match.groups())
    if stop < start or stop >= total:
        raise RemoteFileError(f"an impossible Content-Range {text[:80]!r}")
    return start, stop, total
