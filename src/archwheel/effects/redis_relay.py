"""A Redis server as the build containers see it: a reachability probe and a socket relay.

Build containers compile with ``--network none`` (nothing reachable, a build cannot fetch
what its recipe does not declare), and Docker here runs with ``--bridge=none``. So a remote
compiler cache on ``HOST:PORT`` is reached through a relay: archwheel listens on a Unix socket
in a folder of its own, which is bind-mounted into the compile container, and forwards each
request to the TCP server and its reply back, whole (``effects/resp.py``), with a deadline. The
container can reach that one server and nothing else, and the compile keeps ``--network none``.

The relay sends ``AUTH`` (and ``SELECT`` for a database) itself, so what it forwards is done
with the host's credentials: it forwards only what sccache sends (``redis_commands.allowed``:
``PING``, ``GET``, ``SET``, ``SETEX`` on keys of sccache's shape) and answers every other
request ``-ERR`` on the host. Bounded: a request or a reply ``MAX_VALUE_BYTES``, all of them
held at once ``MAX_HELD_BYTES`` (a request past either is answered ``-ERR`` and its connection
closed, nothing forwarded), ``MAX_CONNECTIONS`` at once (past it: ``-ERR``, closed). With
``owner`` (the container's ``--user``), the socket is that user's alone.

A server that is down, hangs or answers what is no Redis reply costs the cache, never the
build: the relay answers that request, and every request for ``DOWN_FOR_S`` after, as an empty
Redis would (a GET finds nothing, a SET is dropped), and counts it in ``failures``. sccache
itself waits 30 s per request on a server that does not answer, which on a build of thousands
of steps is a hang.

``probe`` asks the server ``PING`` (after ``AUTH`` when the URL has a password) with a short
timeout, so an unreachable or down server is known before the build starts.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from archwheel.effects.redis_commands import allowed, request_args
from archwheel.effects.resp import (
    Budget,
    Busy,
    Hold,
    ProtocolError,
    Reader,
    TooLarge,
    empty_cache_reply,
    read_value,
)
from archwheel.effects.unix_server import UnixServer

PROBE_TIMEOUT_S = 3.0
CONNECT_TIMEOUT_S = 5.0
REPLY_TIMEOUT_S = 10.0  # a whole reply (a cached object of some MB) from the request sent
DOWN_FOR_S = 30.0  # after a failure, requests are answered here without asking the server
SOCKET_NAME = "redis.sock"
# One request or reply: a cache entry is sccache's zip of one compile step's outputs; Redis's
# own bound on one string is 512 MB (proto-max-bulk-len).
MAX_VALUE_BYTES = 256 << 20
MAX_HELD_BYTES = 1 << 30  # every connection's requests and replies held at once
MAX_CONNECTIONS = 64  # sccache's daemon opens one (OpenDAL's pool: at most 10)


@dataclass(frozen=True)
class RedisAddress:
    """Where the server listens: TCP (host, port) or a Unix socket path."""

    host: str | None = None
    port: int | None = None
    socket_path: Path | None = None
    username: str | None = None
    password: str | None = None

    def connect(self, timeout: float) -> socket.socket:
        """A connected socket to the server (not yet authenticated); ``OSError`` on failure."""
        if self.socket_path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            try:
                sock.connect(str(self.socket_path))
            except OSError:
                sock.close()
                raise
            return sock
        assert self.host is not None and self.port is not None
        return socket.create_connection((self.host, self.port), timeout=timeout)


def _command(*parts: str) -> bytes:
    out = [f"*{len(parts)}\r\n".encode()]
    for part in parts:
        raw = part.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(raw), raw))
    return b"".join(out)


MAX_REPLY = 4096  # bytes of a one-line reply (+PONG, +OK, -ERR ...) read at most
LATE = "the server did not answer in time"


def _reply(sock: socket.socket, deadline: float | None = None) -> bytes:
    """The first line the server answers. With ``deadline`` (a ``time.monotonic()`` value) the
    whole reply must come by then: a socket timeout bounds each ``recv`` only, and a server
    sending a byte a little faster than it would wait 4096 times as long."""
    data = b""
    while not data.endswith(b"\r\n"):
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(LATE)
            sock.settimeout(left)
        try:
            chunk = sock.recv(512)
        except TimeoutError:
            raise TimeoutError(LATE) from None
        if not chunk:
            raise OSError("the server closed the connection")
        data += chunk
        if len(data) > MAX_REPLY:
            break
    return data.split(b"\r\n", 1)[0]


def _authenticate(
    sock: socket.socket, address: RedisAddress, deadline: float | None = None, db: int | None = None
) -> str | None:
    """Send AUTH when the address has a password, then SELECT when ``db`` is given; None when
    accepted (or not needed)."""
    if address.password is not None:
        auth = (
            ("AUTH", address.username, address.password)
            if address.username
            else ("AUTH", address.password)
        )
        sock.sendall(_command(*auth))
        answer = _reply(sock, deadline)
        if not answer.startswith(b"+OK"):
            return f"AUTH refused: {answer.decode(errors='replace')[:80]}"
    if db:
        sock.sendall(_command("SELECT", str(db)))
        answer = _reply(sock, deadline)
        if not answer.startswith(b"+OK"):
            return f"SELECT refused: {answer.decode(errors='replace')[:80]}"
    return None


def probe(address: RedisAddress, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when the server answers PING; else why not, in a few words. The whole exchange
    (connect, AUTH, PING) takes at most about ``timeout``, however the server paces it."""
    deadline = time.monotonic() + timeout
    try:
        with address.connect(timeout) as sock:
            sock.settimeout(timeout)
            refused = _authenticate(sock, address, deadline)
            if refused:
                return refused
            sock.sendall(_command("PING"))
            answer = _reply(sock, deadline)
    except (TimeoutError, OSError) as exc:
        return exc.strerror or str(exc) or type(exc).__name__
    if not answer.startswith(b"+PONG"):
        return f"not a Redis answer to PING: {answer.decode(errors='replace')[:80]}"
    return None


class UnixRelay(UnixServer):
    """Forward the requests sccache sends on ``<folder>/redis.sock`` to the server (TCP or a
    Unix socket), in threads, each server connection authenticated (and its database selected)
    first; refuse every other request; answer as an empty cache where the server fails
    (``connections``: server connections made; ``failures``: requests answered without it;
    ``refused``: requests answered ``-ERR`` by the relay).

    ``with UnixRelay(address, db=N, owner=(uid, gid)) as relay:`` mount ``relay.folder``; the
    socket is ``owner``'s alone (mode 0600, that owner's; its folder 0700 when ``owner`` is
    archwheel's own user, else 0711), open to every user without ``owner``; both are removed on
    exit.
    """

    def __init__(
        self,
        address: RedisAddress,
        *,
        db: int | None = None,
        owner: tuple[int, int] | None = None,
        parent: Path | None = None,
    ) -> None:
        self.address = address
        self.db = db
        super().__init__(
            "archwheel-cache-", SOCKET_NAME, "archwheel-relay", parent=parent, owner=owner
        )
        self.connections = 0
        self.failures = 0
        self.refused = 0
        self._down_until = 0.0
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._budget = Budget(MAX_HELD_BYTES)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._slots.acquire(blocking=False):
                self._refuse_connection(client, "too many connections at once")
                continue
            threading.Thread(target=self._serve_counted, args=(client,), daemon=True).start()

    def _refuse_connection(self, client: socket.socket, why: str) -> None:
        with self._lock:
            self.refused += 1
        with contextlib.suppress(OSError):
            client.settimeout(5)
            client.sendall(f"-ERR archwheel's relay: {why}\r\n".encode())
        with contextlib.suppress(OSError):
            client.close()

    def _serve_counted(self, client: socket.socket) -> None:
        try:
            self._serve(client)
        finally:
            self._slots.release()

    def _connect(self) -> socket.socket | None:
        """A connection to the server, authenticated; None while it is taken for down."""
        if time.monotonic() < self._down_until:
            return None
        try:
            server = self.address.connect(CONNECT_TIMEOUT_S)
            deadline = time.monotonic() + CONNECT_TIMEOUT_S
            if _authenticate(server, self.address, deadline, self.db) is not None:
                server.close()
                raise OSError("AUTH refused")
        except OSError:
            self._down()
            return None
        with self._lock:
            self.connections += 1
            self._open.add(server)
        return server

    def _down(self) -> None:
        with self._lock:
            self._down_until = time.monotonic() + DOWN_FOR_S

    def _serve(self, client: socket.socket) -> None:
        """Each allowed request whole to the server and its reply whole back; the empty
        cache's answer where the server fails; ``-ERR`` for the rest."""
        with self._lock:
            self._open.add(client)
        requests = Reader(client)
        server: socket.socket | None = None
        replies: Reader | None = None
        hold = Hold(MAX_VALUE_BYTES, self._budget)
        try:
            while not self._stop.is_set():
                try:
                    request = read_value(requests, hold=hold)
                except (TooLarge, Busy) as exc:
                    self._refuse_connection(client, str(exc))
                    return
                except (OSError, ProtocolError):
                    return  # the client went away, or sent what is no request
                verdict = allowed(request_args(request))
                if not verdict.forward:
                    hold.release()
                    if verdict.answer.startswith(b"-"):
                        with self._lock:
                            self.refused += 1
                    client.settimeout(None)
                    client.sendall(verdict.answer)
                    continue
                if server is None:
                    server = self._connect()
                    replies = Reader(server) if server is not None else None
                answer = self._ask(server, replies, request, hold)
                if answer is None and server is not None:
                    self._close(server)
                    server = replies = None
                if answer is None:
                    with self._lock:
                        self.failures += 1
                    answer = empty_cache_reply(request)
                client.settimeout(None)
                client.sendall(answer)
                hold.release()
        except OSError:
            return
        finally:
            hold.release()
            self._close(client)
            if server is not None:
                self._close(server)

    def _ask(
        self, server: socket.socket | None, replies: Reader | None, request: bytes, hold: Hold
    ) -> bytes | None:
        """The server's whole reply to ``request`` (held in ``hold``), or None where it failed
        (the server is then taken for down) or held more than the relay may."""
        if server is None or replies is None:
            return None
        try:
            server.sendall(request)
            hold.release()
            return read_value(replies, time.monotonic() + REPLY_TIMEOUT_S, hold=hold)
        except Busy:
            return None
        except OSError:  # down, hung, no Redis reply (ProtocolError) or one too large
            self._down()
            return None

    def _close(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)
        with contextlib.suppress(OSError):
            sock.close()
