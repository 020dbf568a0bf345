"""Random access to a file on a package index: HTTP range requests, each block fetched once.

``can-load --torch RANGE`` needs, of each torch wheel (about 500 MB, its nvidia-* companions
more), only its zip directory and the first bytes of each library (what the dynamic loader
reads). ``RangedFile`` reads a remote file by ranges: the bytes asked for are fetched in blocks of
``BLOCK`` bytes (consecutive missing blocks in one request) and kept in a sparse file under the
cache folder, with a one-byte-per-block map of what is there, so that a second run reads nothing
from the network. A block is marked only after its bytes are written, so a run killed halfway
leaves blocks that are fetched again, never bytes that are wrong.

Bounded against a hostile server: at most ``MAX_REDIRECTS`` redirects (http and https only),
every answer's status, ``Content-Range`` and length checked against what was asked, at most
``MAX_REQUESTS`` requests per file, the size of the file as the index or the server first says
it (a later answer that disagrees is refused), and ``effects.net.paced_blocks`` against a server
that trickles. A server that answers a range request with the whole file (status 200) is read
whole, once, into the same cache, and ``Transfer.whole`` says so.

A local path or a ``file://`` URL is read directly (``os.pread``), without a cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import io
import os
import re
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast
from urllib.parse import unquote, urlparse

from archwheel.effects.net import TransferError, paced_blocks

BLOCK = 256 << 10
# A read that continues the last one fetches as far ahead as the run of reads has come, up to
# this (a member inflated from its start: 1 MiB reads would be one request each), so at most
# about twice what a reader takes is fetched.
MAX_AHEAD = 32 << 20
MAX_REDIRECTS = 5
MAX_REQUESTS = 4096
TIMEOUT_S = 60.0
# The largest file read: a wheel on PyPI is at most a few GB (torch's are about 0.5-1 GB).
MAX_FILE_BYTES = 16 << 30

Progress = Callable[[int, int], None]  # (bytes so far, bytes in all) of a whole download

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)\Z")


class RemoteFileError(TransferError):
    """A remote file that could not be read as asked; the message is one line."""


@dataclass
class Transfer:
    """What reading one file cost: requests made, bytes from the network, bytes handed out."""

    requests: int = 0
    fetched: int = 0
    served: int = 0
    whole: bool = False  # the server refused ranges: the file was downloaded whole


class _Redirects(urllib.request.HTTPRedirectHandler):
    max_redirections = MAX_REDIRECTS
    max_repeats = 2


def is_local(location: str) -> bool:
    """A path or a ``file://`` URL (read directly), not an http(s) URL."""
    return "://" not in location or location.startswith("file://")


def local_path(location: str) -> Path:
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
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise RemoteFileError(f"{url}: not an http(s) URL")
        self.url = url
        self.block = block
        self.transfer = Transfer()
        self._progress = progress
        self._opener = urllib.request.build_opener(
            _Redirects(), urllib.request.HTTPSHandler(context=context)
        )
        key = digest or hashlib.sha256(url.encode("utf-8", "surrogateescape")).hexdigest()
        self.folder = cache / key[:64]
        self.folder.mkdir(parents=True, exist_ok=True)
        self.size = size if size is not None else self._size_from_server()
        if not 0 < self.size <= MAX_FILE_BYTES:
            raise RemoteFileError(f"{url}: a size of {self.size} bytes is not one archwheel reads")
        self._blocks = -(-self.size // block)
        self._next = -1  # where the last read ended (a read starting there continues it)
        self._run = 0  # bytes read in this run of sequential reads
        self._data = self._open("data", self.size)
        self._map = self._open("blocks", self._blocks)

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
        for fd in (self._data, self._map):
            with contextlib.suppress(OSError):
                os.close(fd)

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
        if offset == self._next:  # a sequential reader: fetch as far ahead as it has read
            self._run += end - offset
            ahead = min(self._run, MAX_AHEAD)
            last = max(last, min(self._blocks - 1, (end + ahead - 1) // self.block))
        else:
            self._run = end - offset
        self._next = end
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

    def _request(self, headers: dict[str, str], method: str = "GET") -> http.client.HTTPResponse:
        if self.transfer.requests >= MAX_REQUESTS:
            raise RemoteFileError(f"{self.url}: more than {MAX_REQUESTS} requests; given up")
        self.transfer.requests += 1
        request = urllib.request.Request(self.url, headers=headers, method=method)  # noqa: S310
        try:
            return cast(http.client.HTTPResponse, self._opener.open(request, timeout=TIMEOUT_S))
        except urllib.error.HTTPError as exc:
            exc.close()
            if 300 <= exc.code < 400:
                raise RemoteFileError(
                    f"{self.url}: redirected in a loop or more than {MAX_REDIRECTS} times"
                ) from None
            raise RemoteFileError(f"{self.url}: the server answered {exc.code}") from None
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise RemoteFileError(f"{self.url}: {reason}") from None

    def _size_from_server(self) -> int:
        response = self._request({"Range": "bytes=0-0"})
        with response:
            status = response.status
            if status == 206:
                total = _content_range(response)[2]
                list(paced_blocks(response, limit=1))
                return total
            length = response.headers.get("Content-Length")
        if status == 200 and length and length.isdigit():
            return int(length)
        raise RemoteFileError(f"{self.url}: the server says neither the size nor a range")

    def _fetch(self, first: int, last: int) -> None:
        try:
            self._fetch_blocks(first, last)
        except RemoteFileError:
            raise
        except TransferError as exc:  # cut short or too slow (effects.net.paced_blocks)
            raise RemoteFileError(f"{self.url}: {exc}") from None

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

    def _whole(self, response: http.client.HTTPResponse) -> None:
        """The server ignored the range and sends the whole file: keep all of it."""
        at = 0
        for chunk in paced_blocks(response, limit=self.size):
            os.pwrite(self._data, chunk, at)
            at += len(chunk)
            if self._progress is not None:
                self._progress(at, self.size)
        if at != self.size:
            raise RemoteFileError(
                f"{self.url}: the server sent {at} bytes, not the {self.size} it announced"
            )
        self.transfer.fetched += at
        self.transfer.whole = True
        os.pwrite(self._map, b"\x01" * self._blocks, 0)

    def reader(self) -> io.BufferedReader:
        """A read-only, seekable file object over this file (for ``zipfile``)."""
        return io.BufferedReader(_View(self.pread, self.size), buffer_size=64 << 10)


class LocalFile:
    """A local file with the same ``pread``/``size``/``transfer`` as ``RangedFile``."""

    def __init__(self, path: Path) -> None:
        self.url = str(path)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        self._fd = fd
        self.size = os.fstat(fd).st_size
        self.transfer = Transfer()

    def pread(self, length: int, offset: int) -> bytes:
        data = os.pread(self._fd, length, offset)
        self.transfer.served += len(data)
        return data

    def reader(self) -> io.BufferedReader:
        return io.BufferedReader(_View(self.pread, self.size), buffer_size=64 << 10)

    def close(self) -> None:
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


def _content_range(response: http.client.HTTPResponse) -> tuple[int, int, int]:
    text = (response.headers.get("Content-Range") or "").strip()
    match = _CONTENT_RANGE.match(text)
    if not match:
        raise RemoteFileError(f"an answer to a range request with Content-Range {text[:80]!r}")
    start, stop, total = (int(g) for g in match.groups())
    if stop < start or stop >= total:
        raise RemoteFileError(f"an impossible Content-Range {text[:80]!r}")
    return start, stop, total
