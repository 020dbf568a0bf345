"""A TCP listener that counts every connection made to it (each gets a short HTTP answer and
is closed): how a farm test shows that an address it was refused was never reached; and a
``Recorder``, which keeps what each connection sent it, byte for byte."""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from collections.abc import Callable


class Listener:
    """Listens on ``host`` (127.0.0.1; ``0.0.0.0`` for every address of this machine) at a
    free port; ``accepted`` counts the connections; ``close`` stops it."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.sock = socket.create_server((host, 0))
        self.port = int(self.sock.getsockname()[1])
        self.accepted = 0
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            conn.close()

    def close(self) -> None:
        """Stop accepting and close the socket."""
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


class Recorder:
    """A TCP server on 127.0.0.1 at a free port that keeps, byte for byte, what each
    connection sent it (``received``, in order): an HTTP request (its head, then as many body
    bytes as its ``Content-Length`` says), or with ``raw`` whatever comes until the peer stops
    writing. Each gets ``answer(received)`` back and is closed; ``close`` stops it."""

    def __init__(
        self, answer: Callable[[bytes], bytes] | None = None, *, raw: bool = False
    ) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.received: list[bytes] = []
        self._answer = answer or (lambda _: b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        self._raw = raw
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _read(self, conn: socket.socket) -> bytes:
        data = b""
        conn.settimeout(5)
        try:
            while chunk := conn.recv(65536):
                data += chunk
                if self._raw:
                    continue
                head, sep, body = data.partition(b"\r\n\r\n")
                if sep:
                    match = re.search(rb"(?im)^content-length:\s*(\d+)\s*$", head)
                    if len(body) >= (int(match[1]) if match else 0):
                        break
        except OSError:
            pass
        return data

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = self._read(conn)
                with self._lock:
                    self.received.append(data)
                with contextlib.suppress(OSError):
                    conn.sendall(self._answer(data))
                    conn.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        """Stop accepting and close the socket."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._thread.join(timeout=5)
