"""The compile container's one way to a compile farm: an allowlist HTTP proxy on a Unix socket.

Build containers compile with ``--network none``. To send compile jobs to an sccache-dist farm
the container's sccache daemon must reach the scheduler and then each build server the
scheduler hands out, and nothing else. As for the Redis cache (redis_relay.py), archwheel
listens on a Unix socket in a folder of its own, mounted into the container, where the same
small forwarder (``sccache_launcher.FORWARDER_SCRIPT``) turns it into a loopback TCP port; the
daemon gets ``HTTP_PROXY`` and ``HTTPS_PROXY`` naming that port. ``FarmProxy`` is the host end:
an HTTP proxy that lets through only what ``FarmRoute`` allows (farm_route.py: the three
requests sccache's client makes of the scheduler, by method and exact path, and ``CONNECT`` to
the build servers the scheduler allocated this build's jobs to) and answers everything else
``403`` with one line, never reaching the address asked for.

- every request it forwards is written anew (``farm_head``): the head is read strictly (a bare
  CR or LF, a NUL, a header name that is not a token, two or non-ASCII ``Content-Length``s, a
  ``Transfer-Encoding``: one ``400``, nothing sent), and the scheduler gets the request line
  with the checked path, ``Host``, ``Accept``/``Content-Type``/``User-Agent`` as read, the
  body's ``Content-Length``, the host's token and ``Connection: close``, nothing else.
- the socket is the build user's: ``owner`` (the container's ``--user`` uid and gid) owns it
  with mode 0600 and its folder opens only to pass through (``unix_server``), so another local
  user cannot have the token added to its requests.

- the token stays on the host: the proxy puts the scheduler's client token (``token``) into
  every request it forwards to the scheduler (``Authorization: Bearer``), replacing whatever
  the container sent, so the container's client configuration carries a placeholder
  (``PLACEHOLDER_TOKEN``). Build servers authenticate each job with a per-job token the
  scheduler hands out, inside the TLS tunnel, which the proxy neither reads nor logs. Nothing
  here logs a header; ``refused`` keeps the first refusals' one-line reasons (targets only).
- an ``https`` scheduler: the container still asks ``http://HOST:PORT`` (its configuration
  says so, ``container_scheduler_url``) and the proxy speaks TLS to the scheduler, verifying
  its certificate against the system's authorities (``SSL_CERT_FILE`` names another bundle),
  so it can read the ``alloc_job`` answers the allowlist learns from (tested with the tests'
  farm behind a TLS front; a certificate not trusted is a ``502`` naming why).
- bounded: a request head ``HEAD_LIMIT`` bytes, a scheduler request's body and answer
  ``BODY_LIMIT``; every scheduler exchange within ``SCHEDULER_TIMEOUT_S``, a connection to a
  server within ``CONNECT_TIMEOUT_S``; a tunnel closes after ``TUNNEL_IDLE_S`` without a byte
  (sccache's own request timeout); at most ``MAX_CONNECTIONS`` at once (``503`` past it).
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import ssl
import threading
import time
from pathlib import Path

from archwheel.effects.farm_head import BadRequest, RequestHead, answer_body, parse_request_head
from archwheel.effects.farm_route import (
    BadTarget,
    Decision,
    Endpoint,
    FarmRoute,
    parse_authority,
    scheduler_endpoint,
)
from archwheel.effects.unix_server import UnixServer

SOCKET_NAME = "farm.sock"
PLACEHOLDER_TOKEN = "archwheel-adds-the-token-on-the-host"  # noqa: S105 (not a secret)
HEAD_LIMIT = 16 << 10
BODY_LIMIT = 1 << 20
HEAD_TIMEOUT_S = 10.0
SCHEDULER_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 5.0
TUNNEL_IDLE_S = 1200.0
MAX_CONNECTIONS = 256
MAX_REFUSALS_KEPT = 20
# The container's headers the route writes on (each read and checked first); it writes
# ``Host``, ``Content-Length``, ``Authorization`` and ``Connection`` itself, and no other.
_KEPT = ("accept", "content-type", "user-agent")


class _Refused(Exception):
    """A request the proxy answers itself: an HTTP status and one line."""

    def __init__(self, status: int, line: str) -> None:
        super().__init__(line)
        self.status = status
        self.line = line


_REASONS = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway", 503: "Service Unavailable",
            504: "Gateway Timeout"}  # fmt: skip


def container_scheduler_url(scheduler_url: str) -> str:
    """The scheduler's URL as the container's client configuration names it: always
    ``http://HOST:PORT`` (the proxy reads the requests and speaks TLS onwards for https)."""
    endpoint, _ = scheduler_endpoint(scheduler_url)
    return f"http://{endpoint}"


def _answer(status: int, line: str) -> bytes:
    body = f"archwheel farm route: {line}\n".encode("utf-8", errors="replace")
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


def _recv_until(sock: socket.socket, buffer: bytearray, end: bytes, limit: int, deadline: float
                ) -> int:  # fmt: skip
    """Read into ``buffer`` until it holds ``end``; the index just past it."""
    while (at := buffer.find(end)) < 0:
        if len(buffer) > limit:
            raise _Refused(400, f"a request head over {limit} bytes")
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Refused(400, "the request head did not come in time")
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            raise _Refused(400, "the request head did not come in time") from None
        if not chunk:
            raise ConnectionError("the client went away")
        buffer += chunk
    if at + len(end) > limit:
        raise _Refused(400, f"a request head over {limit} bytes")
    return at + len(end)


def _recv_exactly(sock: socket.socket, buffer: bytearray, size: int, deadline: float) -> None:
    while len(buffer) < size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(min(65536, size - len(buffer)))
        if not chunk:
            raise ConnectionError("closed early")
        buffer += chunk


class FarmProxy(UnixServer):
    """An allowlist HTTP proxy on ``<folder>/farm.sock`` to one sccache-dist farm.

    ``with FarmProxy(scheduler_url, token, owner=(uid, gid)) as proxy:`` mount
    ``proxy.folder``; the socket is the build user's (``owner``: the container's ``--user``)
    alone (``unix_server``) and removed on exit, its folder with it. ``route`` is the
    allowlist; ``scheduler_requests`` and ``tunnels`` (per endpoint) count what went through,
    ``refused_count`` and ``refused`` (the first reasons) what did not."""

    def __init__(self, scheduler_url: str, token: str | None, *, parent: Path | None = None,
                 owner: tuple[int, int] | None = None) -> None:  # fmt: skip
        endpoint, self._tls = scheduler_endpoint(scheduler_url)
        self.route = FarmRoute(endpoint, _addresses_of(endpoint))
        self._token = token
        super().__init__("archwheel-farm-", SOCKET_NAME, "archwheel-farm", parent=parent,
                         owner=owner)  # fmt: skip
        self.scheduler_requests = 0
        self.tunnels: dict[str, int] = {}
        self.refused_count = 0
        self.refused: list[str] = []
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def __repr__(self) -> str:
        return f"FarmProxy(scheduler={self.route.scheduler}, socket={self.path})"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._slots.acquire(blocking=False):
                self._refuse(client, _Refused(503, "too many connections at once"))
                continue
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)

    def _close(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)
        with contextlib.suppress(OSError):
            sock.close()

    def _refuse(self, client: socket.socket, refusal: _Refused) -> None:
        with self._lock:
            self.refused_count += 1
            if len(self.refused) < MAX_REFUSALS_KEPT:
                self.refused.append(refusal.line)
        with contextlib.suppress(OSError):
            client.settimeout(5)
            client.sendall(_answer(refusal.status, refusal.line))
        self._close(client)

    def _serve(self, client: socket.socket) -> None:
        self._track(client)
        try:
            buffer = bytearray()
            end = _recv_until(client, buffer, b"\r\n\r\n", HEAD_LIMIT,
                              time.monotonic() + HEAD_TIMEOUT_S)  # fmt: skip
            try:
                head = parse_request_head(bytes(buffer[:end]), BODY_LIMIT)
            except BadRequest as exc:
                raise _Refused(400, str(exc)) from None
            rest = bytearray(buffer[end:])
            decision = self.route.request(head.method, head.target)
            if not decision.allowed:
                raise _Refused(403, decision.why)
            if decision.kind == "connect":
                self._tunnel(client, head.target, rest)
            else:
                self._forward(client, head, decision, rest)
        except _Refused as refusal:
            self._refuse(client, refusal)
        except (OSError, ValueError):
            pass  # the client went away, or sent what is no HTTP
        finally:
            self._close(client)
            self._slots.release()

    def _tunnel(self, client: socket.socket, target: str, early: bytearray) -> None:
        endpoint = _endpoint_of(target)
        try:
            upstream = socket.create_connection((endpoint.host, endpoint.port), CONNECT_TIMEOUT_S)
        except OSError as exc:
            raise _Refused(502, f"CONNECT {endpoint}: {exc.strerror or exc}") from None
        self._track(upstream)
        with self._lock:
            self.tunnels[str(endpoint)] = self.tunnels.get(str(endpoint), 0) + 1
        try:
            client.settimeout(None)
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if early:
                upstream.sendall(early)
            back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
            back.start()
            _pump(client, upstream)
            back.join()
        finally:
            self._close(upstream)

    def _forward(self, client: socket.socket, head: RequestHead, decision: Decision,
                 body: bytearray) -> None:  # fmt: skip
        """One request to the scheduler, written anew from what was read, whole, with the
        host's token; its answer whole back."""
        method, length = head.method, head.content_length
        if method == "GET" and length:
            raise _Refused(400, "a body on a GET request")
        kept = [f"{_CASED[key]}: {value}" for key, value in head.headers if key in _KEPT]
        deadline = time.monotonic() + SCHEDULER_TIMEOUT_S
        try:
            _recv_exactly(client, body, length, deadline)
        except TimeoutError:
            raise _Refused(400, "the request body did not come in time") from None
        endpoint = self.route.scheduler
        lines = [f"{method} {decision.path} HTTP/1.1", f"Host: {endpoint}", *kept]
        if method == "POST":
            lines.append(f"Content-Length: {length}")
        if self._token is not None:
            lines.append(f"Authorization: Bearer {self._token}")
        lines.append("Connection: close")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + bytes(body[:length])
        answer = self._ask_scheduler(endpoint, request, deadline)
        if decision.kind == "alloc_job":  # the server the scheduler allocated: one to reach
            self.route.learn_allocation(_status_of(answer), answer_body(answer) or b"")
        with self._lock:
            self.scheduler_requests += 1
        client.settimeout(max(1.0, deadline - time.monotonic()))
        client.sendall(answer)

    def _ask_scheduler(self, endpoint: Endpoint, request: bytes, deadline: float) -> bytes:
        where = f"the scheduler {endpoint}"
        try:
            raw = socket.create_connection((endpoint.host, endpoint.port), CONNECT_TIMEOUT_S)
        except OSError as exc:
            raise _Refused(502, f"{where}: {exc.strerror or exc}") from None
        sock: socket.socket = raw
        self._track(raw)
        try:
            if self._tls:
                sock = ssl.create_default_context().wrap_socket(raw, server_hostname=endpoint.host)
                self._track(sock)
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            sock.sendall(request)
            answer = bytearray()
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _Refused(504, f"{where} did not answer in time")
                sock.settimeout(left)
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
                if len(answer) > BODY_LIMIT + HEAD_LIMIT:
                    raise _Refused(502, f"{where} answered over {BODY_LIMIT} bytes")
        except TimeoutError:
            raise _Refused(504, f"{where} did not answer in time") from None
        except (OSError, ssl.SSLError) as exc:
            raise _Refused(502, f"{where}: {exc.strerror or exc}") from None
        finally:
            self._close(sock)
            self._close(raw)
        if _status_of(bytes(answer)) == 0:
            raise _Refused(502, f"{where} answered no HTTP")
        return bytes(answer)


_CASED = {"accept": "Accept", "content-type": "Content-Type", "user-agent": "User-Agent"}


def _addresses_of(endpoint: Endpoint) -> frozenset[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses a scheduler named by DNS has now (none for an IP literal or a name that
    does not resolve): the route refuses them as build servers at the scheduler's port."""
    if endpoint.ip is not None:
        return frozenset()
    try:
        found = socket.getaddrinfo(endpoint.host, endpoint.port, type=socket.SOCK_STREAM)
    except OSError:
        return frozenset()
    return frozenset(ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found)


def _endpoint_of(target: str) -> Endpoint:
    try:
        return parse_authority(target)
    except BadTarget as exc:  # the route decided it already; kept for the type
        raise _Refused(400, str(exc)) from None


def _status_of(answer: bytes) -> int:
    """The status code of an HTTP answer; 0 when it is none."""
    line = answer.split(b"\r\n", 1)[0].split(b" ")
    if len(line) >= 2 and line[0].startswith(b"HTTP/1.") and line[1].isdigit():
        return int(line[1])
    return 0


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Bytes from ``source`` to ``sink`` until either ends or ``TUNNEL_IDLE_S`` passes quietly."""
    try:
        source.settimeout(TUNNEL_IDLE_S)
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    for sock, how in ((sink, socket.SHUT_WR), (source, socket.SHUT_RD)):
        with contextlib.suppress(OSError):
            sock.shutdown(how)
