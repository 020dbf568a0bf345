"""A server on a Unix socket in its own owned folder, for a compile container to mount.

The Redis relay (``redis_relay.UnixRelay``) and the compile farm's route
(``farm_proxy.FarmProxy``) share this life: bind the socket in a fresh folder, accept in a
thread, and on close stop listening, cut every open connection and remove the socket, its
folder and the folder's owner record, so a finished build leaves nothing for ``clean``.

Who may connect: ``owner`` (``(uid, gid)``, the container's ``--user``) makes the socket that
user's alone. The socket is bound inside the fresh folder while it is still 0700 (mkdtemp),
then gets mode 0600 and, when ``owner`` is another user than archwheel's (archwheel runs as
root and builds as an unprivileged user), that owner (``chown``: a failure is an error, never
a wider socket); the folder stays archwheel's, 0700 when the owner is archwheel's own user,
else 0711 (others may pass through to the socket, not list or add). Connecting to a Unix
socket takes write permission on it, so only ``owner`` and root can. Without ``owner`` the
socket and folder are open to every local user (0777).
"""

from __future__ import annotations

import contextlib
import os
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
        self,
        prefix: str,
        socket_name: str,
        thread_name: str,
        *,
        parent: Path | None,
        owner: tuple[int, int] | None = None,
    ) -> None:
        self.owner = owner
        self.folder = owned_tempdir(prefix, parent)
        self.path = self.folder / socket_name
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept, name=thread_name, daemon=True)

    def __enter__(self: _Server) -> _Server:
        self._listener.bind(str(self.path))
        try:
            self._open_to_owner()
        except OSError:
            self.close()
            raise
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

    def _open_to_owner(self) -> None:
        """The socket's and folder's owner and modes (see the module)."""
        if self.owner is None:
            self.folder.chmod(0o777)
            self.path.chmod(0o777)
            return
        uid, gid = self.owner
        self.path.chmod(0o600)
        if uid == os.geteuid():
            self.folder.chmod(0o700)
            return
        os.chown(self.path, uid, gid)
        self.folder.chmod(0o711)

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
