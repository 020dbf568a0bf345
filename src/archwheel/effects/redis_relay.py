"""A Redis server as the build containers see it: a reachability probe and a socket relay.

Build containers compile with ``--network none`` (nothing reachable, a build cannot fetch
what its recipe does not declare), and Docker here runs with ``--bridge=none``. So a remote
compiler cache on ``HOST:PORT`` is reached through a relay: archwheel listens on a Unix socket
in a folder of its own, which is bind-mounted into the compile container, and forwards each
connection to the TCP server. The container can reach that one server and nothing else, and
the compile keeps ``--network none``.

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
from types import TracebackType

from archwheel.effects.owner import owned_tempdir, unmark_folder

PROBE_TIMEOUT_S = 3.0
CONNECT_TIMEOUT_S = 5.0
SOCKET_NAME = "redis.sock"
_BUFFER = 1 << 16


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
    sock: socket.socket, address: RedisAddress, deadline: float | None = None
) -> str | None:
    """Send AUTH when the address has a password; None when accepted (or not needed)."""
    if address.password is None:
        return None
    auth = (
        ("AUTH", address.username, address.password)
        if address.username
        else ("AUTH", address.password)
    )
    sock.sendall(_command(*auth))
    answer = _reply(sock, deadline)
    if not answer.startswith(b"+OK"):
        return f"AUTH refused: {answer.decode(errors='replace')[:80]}"
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


class UnixRelay:
    """Forward connections on ``<folder>/redis.sock`` to the server (TCP or a Unix socket),
    in threads, authenticating each one first when the address has a password.

    ``with UnixRelay(address) as relay:`` mount ``relay.folder``; the socket and its folder are
    open to every user (the build user in the container is not archwheel's user when it runs
    as root) and removed on exit.
    """

    def __init__(self, address: RedisAddress, *, parent: Path | None = None) -> None:
        self.address = address
        self.folder = owned_tempdir("archwheel-cache-", parent)
        self.path = self.folder / SOCKET_NAME
        self.connections = 0
        self.failures = 0
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept, name="archwheel-relay", daemon=True)

    def __enter__(self) -> UnixRelay:
        self._listener.bind(str(self.path))
        # Open to every user: the container's build user is not archwheel's when it runs as root.
        self.folder.chmod(0o777)
        self.path.chmod(0o777)
        self._listener.listen(64)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop listening, cut every open connection and remove the socket and its folder."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            for sock in list(self._open):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        for path in (self.path, self.folder):
            with contextlib.suppress(OSError):
                if path == self.path:
                    path.unlink()
                else:
                    path.rmdir()
                    unmark_folder(path)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            server = self.address.connect(CONNECT_TIMEOUT_S)
            deadline = time.monotonic() + CONNECT_TIMEOUT_S
            if _authenticate(server, self.address, deadline) is not None:
                server.close()
                raise OSError("AUTH refused")
        except OSError:
            with self._lock:
                self.failures += 1
            client.close()  # ccache counts a remote-storage error and compiles without it
            return
        server.settimeout(None)
        with self._lock:
            self.connections += 1
            self._open.update((client, server))
        pump = threading.Thread(target=self._pump, args=(server, client), daemon=True)
        pump.start()
        self._pump(client, server)
        pump.join()
        with self._lock:
            self._open.difference_update((client, server))
        client.close()
        server.close()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while chunk := source.recv(_BUFFER):
                target.sendall(chunk)
        except OSError:
            pass
        for sock, how in ((target, socket.SHUT_WR), (source, socket.SHUT_RD)):
            with contextlib.suppress(OSError):
                sock.shutdown(how)
