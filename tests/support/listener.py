"""A TCP listener that counts every connection made to it (each gets a short HTTP answer and
is closed): how a farm test shows that an address it was refused was never reached."""

from __future__ import annotations

import socket
import threading


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
