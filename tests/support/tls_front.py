"""TLS in front of a plain-HTTP server, as docs/building-at-scale.md tells farm operators to put
in front of an sccache-dist scheduler (which speaks HTTP only).

``tls_front(port, folder)`` makes a certificate authority and a certificate for 127.0.0.1 signed
by it (the ``openssl`` command line, Debian's ``openssl`` package), listens on a free port of
127.0.0.1 with that certificate, and pumps every connection's bytes to ``127.0.0.1:port`` and
back. It yields a ``TLSFront``: the ``https://127.0.0.1:PORT`` address, the authority's file (to
trust through ``SSL_CERT_FILE``) and the count of connections it accepted."""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.components import require


@dataclass
class TLSFront:
    """A running TLS front: its address, the authority that signed its certificate, and how
    many connections completed a handshake."""

    url: str
    ca_file: Path
    handshakes: int = 0


def _openssl(*args: str) -> None:
    program = shutil.which("openssl")
    require(program is not None, "openssl is not installed (apt-get install openssl)")
    assert program is not None
    done = subprocess.run([program, *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def make_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A certificate authority and a key and certificate for 127.0.0.1 that it signed."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, ca, key, cert = (folder / n for n in ("ca.key", "ca.pem", "server.key", "server.pem"))
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", str(ca_key), "-out", str(ca), "-days", "2",
             "-subj", "/CN=archwheel test authority")  # fmt: skip
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", str(key), "-out", str(cert), "-days", "2", "-CA", str(ca),
             "-CAkey", str(ca_key), "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1")  # fmt: skip
    return ca, key, cert


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


@contextlib.contextmanager
def tls_front(port: int, folder: Path) -> Iterator[TLSFront]:
    """TLS on a free port of 127.0.0.1 in front of ``127.0.0.1:port``; stopped at the end."""
    ca, key, cert = make_certificates(folder)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    front = TLSFront(f"https://127.0.0.1:{listener.getsockname()[1]}", ca)
    stop = threading.Event()

    def serve(raw: socket.socket) -> None:
        try:
            raw.settimeout(30)
            client = context.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()
            return
        front.handshakes += 1
        with client, socket.create_connection(("127.0.0.1", port), timeout=30) as upstream:
            back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
            back.start()
            _pump(client, upstream)
            back.join(timeout=60)

    def accept() -> None:
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=serve, args=(raw,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield front
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
