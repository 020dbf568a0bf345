"""The one HTTP client of archwheel (urllib3): index pages, range reads, downloads, probes.

Every request archwheel makes over the network goes through a ``Client``
(``effects.simple_index`` for index pages, ``effects.ranged`` for range reads and whole
wheels, ``wheelbuild.sources.source`` for sdists, ``wheelbuild.compile.dist_farm`` for a compile
farm's scheduler), with the same bounds:

- time: each connection's socket is watched by the current ``effects.deadline.Deadline`` from
  its making (before TCP connects, so a trickling TLS handshake is bounded too), and again each
  time a kept-alive connection is reused; the socket timeout of a connection is at most what is
  left of the deadline;
- redirects are followed here, not by urllib3, and only for a GET: at most ``MAX_REDIRECTS``,
  to http(s) URLs only, a loop refused, where a URL redirected remembered for the next request,
  and an ``Authorization`` header never carried to another origin (scheme, host, port);
- an answer neither 2xx nor a redirect followed is an ``Answered`` error, unless the caller
  names its status in ``accept`` (a probe that reads 401 or 400 as an answer);
- no header value is ever part of an error's message (a bearer token stays out of any line);
- one request is one request: urllib3 retries nothing (``retries=False``);
- a body is read as it arrives (``Response.read1``, for ``effects.net.paced_blocks``'s rate
  floor and size bound), or whole up to a bound (``Response.read_all``), as the server sent it
  (never decompressed), and an answer cut short of its ``Content-Length`` is a
  ``TransferError``; an answer that is no HTTP is a ``NotHTTP``;
- proxies are those of the environment, as urllib finds them (``*_proxy``, ``no_proxy``);
- trust is the ``ssl.SSLContext`` given (pip's ``cert``), else the system's.

Connections are kept alive per host, so a file read in hundreds of ranges costs one name
lookup and one TLS handshake (measured: 453 lookups took 60 of a 68 s read).
"""

from __future__ import annotations

import contextlib
import http.client
import ssl
import urllib.request
from collections.abc import Collection, Mapping
from typing import Any
from urllib.parse import urljoin, urlparse

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import IncompleteRead

from archwheel.effects import deadline
from archwheel.effects.net import TransferError

MAX_REDIRECTS = 5
TIMEOUT_S = 60.0  # the socket timeout: at most this long without a byte
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_DISCARDED = 64 << 10  # the most of an unwanted answer read to keep its connection
_AUTHORIZATION = "authorization"


class Redirected(TransferError):
    """Redirected in a loop, more than ``MAX_REDIRECTS`` times, or to something not http(s)."""


class NotHTTP(TransferError):
    """The server answered something that is not HTTP (no status line, or a malformed one)."""


class Answered(TransferError):
    """The server answered with a status that is neither content nor a redirect."""

    def __init__(self, status: int) -> None:
        super().__init__(f"the server answered {status}")
        self.status = status


def _watch(sock: Any) -> None:
    watching = deadline.current()
    if watching is not None and sock is not None:
        watching.watch(sock)


class _Watched:
    """What both connection classes add: the socket watched from its making and on reuse."""

    sock: Any

    def _new_conn(self) -> Any:
        sock = super()._new_conn()  # type: ignore[misc]
        _watch(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        _watch(self.sock)  # a kept-alive connection: watched by this request's deadline too
        super().request(*args, **kwargs)  # type: ignore[misc]


class _WatchedHTTP(_Watched, HTTPConnection):
    pass


class _WatchedHTTPS(_Watched, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTP


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPS


_POOLS: Mapping[str, type[HTTPConnectionPool]] = {"http": _HTTPPool, "https": _HTTPSPool}


class Response:
    """One answer: its status and headers, its body read as it arrives (``read1``). Used in a
    ``with`` block: a body read to its end gives the connection back for the next request;
    otherwise the connection is closed (what is left of the body is never read as another
    answer)."""

    def __init__(self, raw: urllib3.BaseHTTPResponse, url: str) -> None:
        self._raw = raw
        self.url = url
        self.status = raw.status
        self.headers = raw.headers
        self._ended = False

    def read1(self, size: int = -1, /) -> bytes:
        """What has arrived, up to ``size`` bytes (b"" at the end of the body)."""
        try:
            block = self._raw.read1(size if size >= 0 else None)
        except (Urllib3Error, OSError) as exc:
            short = next((a for a in (exc, *exc.args) if isinstance(a, IncompleteRead)), None)
            if short is not None:  # urllib3 wraps it: ProtocolError('Connection broken', ...)
                raise TransferError(
                    f"the connection ended {short.expected} bytes before the announced length"
                ) from None
            raise TransferError(f"the answer was cut short or malformed ({exc!r})") from None
        if not block:
            self._ended = True
        return block

    def read(self, size: int) -> bytes:
        """At most ``size`` bytes of the body (a small one, already bounded by the caller)."""
        out = bytearray()
        while len(out) < size and (block := self.read1(size - len(out))):
            out += block
        return bytes(out)

    def read_all(self, limit: int) -> bytes:
        """The whole body, of at most ``limit`` bytes: a longer one is a ``TransferError``
        (read no further than ``limit + 1`` bytes)."""
        body = self.read(limit + 1)
        if len(body) > limit:
            raise TransferError(f"an answer over {limit} bytes")
        return body

    def close(self) -> None:
        """Give the connection back when the body was read whole, else close it."""
        if not self._ended:
            self._raw.close()
        self._raw.release_conn()

    def __enter__(self) -> Response:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Client:
    """Requests over kept-alive connections under the bounds of the module doc. ``context``:
    the TLS trust (None: the system's)."""

    def __init__(
        self, context: ssl.SSLContext | None = None, *, timeout: float = TIMEOUT_S
    ) -> None:
        self._context = context
        self._timeout = timeout
        self._managers: dict[str | None, urllib3.PoolManager] = {}
        self._moved: dict[str, str] = {}  # a URL -> where it redirected to

    def opened(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        method: str = "GET",
        body: bytes | None = None,
        accept: Collection[int] = (),
    ) -> Response:
        """``open``, its headers read: from now on only the run's time bound applies."""
        response = self.open(url, headers, method=method, body=body, accept=accept)
        watching = deadline.current()
        if watching is not None:
            watching.headers_done()
        return response

    def open(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        method: str = "GET",
        body: bytes | None = None,
        accept: Collection[int] = (),
    ) -> Response:
        """A ``method`` request of ``url`` with ``headers`` and ``body`` (None: none; a POST
        then says ``Content-Length: 0``). A 2xx answer or one whose status is in ``accept`` is
        handed back; a GET's redirect is followed; any other status is ``Answered`` (4xx, 5xx,
        1xx, a redirect of another method), a bad redirect ``Redirected``, an answer that is
        no HTTP ``NotHTTP``; any failure on the way is a ``TransferError`` (one line)."""
        follow = method == "GET"
        url = self._moved.get(url, url) if follow else url
        sent = dict(headers or {})
        seen: list[str] = []
        while True:
            response = self._send(method, url, sent, body)
            if response.status in accept:
                return response
            status = response.status
            if status not in _REDIRECTS or not follow:
                if status >= 400 or status < 200 or status in _REDIRECTS:
                    self._discard(response)
                    raise Answered(status)
                for earlier in seen:
                    self._moved[earlier] = url
                return response
            location = response.headers.get("Location") or ""
            self._discard(response)
            seen.append(url)
            url = urljoin(url, location)
            if urlparse(url).scheme not in ("http", "https"):
                raise Redirected(f"redirected to {url[:200]!r}, not an http(s) URL")
            if url in seen or len(seen) > MAX_REDIRECTS:
                raise Redirected(f"redirected in a loop or more than {MAX_REDIRECTS} times")
            if _origin(url) != _origin(seen[-1]):
                sent = {k: v for k, v in sent.items() if k.lower() != _AUTHORIZATION}

    def _send(self, method: str, url: str, headers: dict[str, str], body: bytes | None) -> Response:
        watching = deadline.current()
        connect = self._timeout if watching is None else min(self._timeout, watching.left())
        timeout = urllib3.Timeout(connect=max(0.001, connect), read=self._timeout)
        try:
            raw = self._manager(url).request(
                method,
                url,
                body=body,
                headers=headers,
                redirect=False,
                retries=False,
                preload_content=False,
                decode_content=False,
                timeout=timeout,
            )
        except (Urllib3Error, OSError, ValueError) as exc:
            if any(_not_http(a) for a in (exc, *exc.args)):
                raise NotHTTP(_one_line(exc)) from None
            raise TransferError(_one_line(exc)) from None
        return Response(raw, url)

    def _manager(self, url: str) -> urllib3.PoolManager:
        """The pool manager for ``url``: direct, or through the proxy the environment names."""
        parts = urlparse(url)
        proxy = urllib.request.getproxies().get(parts.scheme)
        if proxy and urllib.request.proxy_bypass(parts.hostname or ""):
            proxy = None
        manager = self._managers.get(proxy)
        if manager is None:
            options: dict[str, Any] = {"maxsize": 1, "ssl_context": self._context}
            manager = (
                urllib3.ProxyManager(proxy, **options) if proxy else urllib3.PoolManager(**options)
            )
            manager.pool_classes_by_scheme = _POOLS  # type: ignore[assignment]
            self._managers[proxy] = manager
        return manager

    def _discard(self, response: Response) -> None:
        """An answer not handed out: a small body read so the connection can go on, else the
        connection closed."""
        length = response._raw.length_remaining
        if length is not None and length <= _DISCARDED:
            with contextlib.suppress(TransferError):
                response.read(length + 1)
        response.close()

    def close(self) -> None:
        """Close every connection."""
        for manager in self._managers.values():
            manager.clear()
        self._managers.clear()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _not_http(error: object) -> bool:
    """Whether ``error`` says the answer was not HTTP (a connection that ended before any
    answer is not that: it is an ordinary ``TransferError``)."""
    return isinstance(error, http.client.HTTPException) and not isinstance(error, OSError)


def _origin(url: str) -> tuple[str, str, int | None]:
    """Scheme, host and port of ``url`` (a port that is none: -1, an origin of no other)."""
    parts = urlparse(url)
    try:
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        port = -1
    return parts.scheme, (parts.hostname or ""), port


def _one_line(exc: BaseException) -> str:
    """urllib3's error, said in one line, by its cause where it has one."""
    reason = getattr(exc, "reason", None)
    text = str(reason or exc)
    return " ".join(text.split())
