"""A server on a Unix socket in its own owned folder, for a compile container to mount.

The Redis relay (``redis_relay.UnixRelay``) and the compile farm's route
(``farm_proxy.FarmProxy``) share this life: bind the socket in a fresh folder open to every
user (the container's build user is not archwheel's when it runs as root), accept in a thread,
and on close stop listening, cut every open connection and remove the socket, its folder and
the folder's owner record, so a finished build leaves nothing for ``clean``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from archwheel.effects.owner import owned_tempdir, unmark_folder

_Server = TypeVar("_Server", bound="UnixServer")


class UnixServer:
    """The socket, folder, accept thread and open connections of one Unix-socket server;
    a subclass accepts in ``_accept`` (until ``_stop`` is set) and registers each connection
    it serves in ``_open`` under ``_lock`` so ``close`` can cut it."""

    def __init__(
        self, prefix: str, socket_name: str, thread_name: str, *, parent: Path | None
    ) -> None:
        self.folder = owned_tempdir(prefix, parent)
        self.path = self.folder / socket_name
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept, name=thread_name, daemon=True)

    def __enter__(self: _Server) -> _Server:
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
        """Stop listening, cut every open connection and remove the socket, its folder and the
        folder's owner record."""
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
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            self.folder.rmdir()
            unmark_folder(self.folder)

    def _accept(self) -> None:
        raise NotImplementedError
