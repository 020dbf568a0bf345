"""A fault injector in Redis's place, for the cache-server fault tests: it passes
archwheel's reachability probe (``PING`` -> ``+PONG``) and then misbehaves on every other
command, as a broken proxy, a wrong service on the port or a wedged server would. Not a stand-in
for a working Redis (the tests that need one use Debian's ``redis-server``,
``tests/support/redis_server.py``): it only answers wrong.

``garbage``: each command gets bytes that are no RESP reply, then the connection is closed.
``hang``: each command is read and never answered (the connection stays open until the client
gives up).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

Mode = Literal["garbage", "hang"]
PING = b"*1\r\n$4\r\nPING\r\n"
GARBAGE = b"%\xff\x00 this is not RESP \x01\x02\r\n$-99\r\n"


@dataclass
class FaultyRedis:
    mode: Mode
    port: int = 0
    commands: int = 0  # commands other than PING received
    _listener: socket.socket | None = None
    _open: list[socket.socket] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(600)
            while True:
                try:
                    data = conn.recv(1 << 16)
                except OSError:
                    return
                if not data:
                    return
                if data == PING:
                    conn.sendall(b"+PONG\r\n")
                    continue
                self.commands += 1
                if self.mode == "garbage":
                    with contextlib.suppress(OSError):
                        conn.sendall(GARBAGE)
                    return
                # hang: read on, answer nothing

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._open.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()


@contextlib.contextmanager
def faulty_redis(mode: Mode) -> Iterator[FaultyRedis]:
    server = FaultyRedis(mode)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    server.port = listener.getsockname()[1]
    server._listener = listener
    thread = threading.Thread(target=server._accept, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        # close() alone does not wake a thread blocked in accept(); shutdown() does
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(timeout=10)
        for conn in server._open:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
