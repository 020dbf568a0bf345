"""A real HTTP server on 127.0.0.1 that serves a folder with range requests, and misbehaves on
request: the package index of the range tests (``effects.ranged``, ``can-load --torch``).

Each file is served at ``/files/NAME``; the first path segment picks a behaviour:

- ``/files/``: ranges as HTTP/1.1 says (206 with ``Content-Range``; 200 without ``Range``);
- ``/whole/``: ranges ignored, the whole file with 200 (a server without range support);
- ``/lie/``: 206 with a ``Content-Range`` other than the one asked for;
- ``/short/``: 206, the right headers, half the body, then the connection ends;
- ``/trickle/``: 206, a byte every 50 ms;
- ``/loop/``: a redirect to itself, for ever;
- ``/gone/``: 404;
- ``/cut/``: 200 with the whole file's ``Content-Length``, half the body, then the connection
  ends (every time): an index that goes away in the middle of a download;
- ``/slowhead/``: the status line, then one header byte every ``HEADER_PACE_S`` (for at most
  ``HEADER_TRICKLE_S``, then the rest of an ordinary answer): a socket timeout never fires;
- ``/ftp/``: a redirect to an ``ftp://`` URL.

A folder holding an ``index.html`` is served as that page (a PEP 503 index: ``simple_index``
writes one whose links use one of the behaviours above); one holding an ``index.json`` as a
PEP 691 page (``index_page(..., pep691=True)``). Under ``/slowhead/`` and ``/ftp/`` a page
misbehaves as a file does.

``requests`` counts the requests per behaviour, ``served`` the body bytes sent and
``connections`` the TCP connections accepted, so that tests see what a reader cost.
"""

from __future__ import annotations

import http.server
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

_RANGE = re.compile(r"bytes=(\d+)-(\d*)\Z")
HEADER_PACE_S = 0.2
HEADER_TRICKLE_S = 8.0
PEP691 = "application/vnd.pypi.simple.v1+json"


@dataclass
class RangeServer:
    url: str
    folder: Path
    requests: Counter[str] = field(default_factory=Counter)
    served: int = 0
    connections: int = 0  # TCP connections accepted (a kept-alive client makes one)


def _handler(state: RangeServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            state.connections += 1
            super().setup()

        def do_GET(self) -> None:
            _, mode, *rest = self.path.split("/")
            state.requests[mode] += 1
            if mode in ("loop", "ftp"):
                self.send_response(302)
                where = self.path if mode == "loop" else "ftp://127.0.0.1/torch/"
                self.send_header("Location", where)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if mode == "slowhead":
                self._slow_head()
                return
            path = state.folder / "/".join(rest)
            if path.is_dir() and (path / "index.json").is_file():  # a PEP 691 page
                self._send(200, (path / "index.json").read_bytes(), {}, kind=PEP691)
                return
            if path.is_dir() and (path / "index.html").is_file():  # a PEP 503 page
                self._send(200, (path / "index.html").read_bytes(), {}, kind="text/html")
                return
            if mode == "gone" or not rest or not path.is_file():
                self.send_error(404)
                return
            size = path.stat().st_size
            match = _RANGE.match(self.headers.get("Range", ""))
            if mode == "cut":
                self._send_file(path, size, cut=size // 2)
                return
            if match is None or mode == "whole":
                self._send_file(path, size)
                return
            lo = int(match.group(1))
            hi = min(int(match.group(2)) if match.group(2) else size - 1, size - 1)
            if lo >= size:
                self.send_error(416)
                return
            said_lo, said_hi = (lo + 1, hi) if mode == "lie" else (lo, hi)
            headers = {"Content-Range": f"bytes {said_lo}-{said_hi}/{size}"}
            with path.open("rb") as fh:
                fh.seek(lo)
                body = fh.read(hi + 1 - lo)
            if mode == "short":
                self._send(206, body, headers, cut=len(body) // 2)
            elif mode == "trickle":
                self._send(206, body, headers, trickle=True)
            else:
                self._send(206, body, headers)

        def _slow_head(self) -> None:
            """The status line, then a header a byte at a time, then an empty page."""
            try:
                self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                self.wfile.flush()
                header = b"X-Slow: " + b"a" * 10_000
                started = time.monotonic()
                for byte in header:
                    if time.monotonic() - started > HEADER_TRICKLE_S:
                        break
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(HEADER_PACE_S)
                self.wfile.write(b"\r\nContent-Type: text/html\r\nContent-Length: 0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

        def _send_file(self, path: Path, size: int, cut: int | None = None) -> None:
            """The whole file with 200, streamed (torch wheels are half a gigabyte); with
            ``cut``, only that many bytes, then the connection is closed."""
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            left = size if cut is None else cut
            try:
                with path.open("rb") as fh:
                    while left > 0 and (block := fh.read(min(1 << 20, left))):
                        self.wfile.write(block)
                        state.served += len(block)
                        left -= len(block)
            except (BrokenPipeError, ConnectionResetError):
                pass
            if cut is not None:
                self.wfile.flush()
                self.close_connection = True

        def _send(
            self,
            status: int,
            body: bytes,
            headers: dict[str, str],
            *,
            cut: int | None = None,
            trickle: bool = False,
            kind: str = "application/octet-stream",
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Accept-Ranges", "bytes")
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            try:
                if trickle:
                    for byte in body[:200]:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(0.05)
                    return
                sent = body if cut is None else body[:cut]
                self.wfile.write(sent)
                state.served += len(sent)
                if cut is not None:
                    self.close_connection = True
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@contextmanager
def range_server(folder: Path) -> Iterator[RangeServer]:
    """Serve ``folder`` on 127.0.0.1 (an ephemeral port) until the block ends."""
    state = RangeServer("", folder)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def simple_index(root: Path, project: str, wheels: list[Path], *, mode: str = "files") -> str:
    """A PEP 503 page for ``project`` under ``root/simple-MODE/`` whose links are served with
    behaviour ``mode`` and state each file's sha256, the wheels linked (not copied) into
    ``root``; the index's path."""
    index = f"simple-{mode}"
    page = root / index / project
    page.mkdir(parents=True, exist_ok=True)
    links = []
    for wheel in wheels:
        target = root / wheel.name
        if not target.exists():
            target.symlink_to(wheel)
        digest = _sha256(wheel)  # as PyPI states it: what archwheel verifies before keeping
        links.append(f'<a href="/{mode}/{wheel.name}#sha256={digest}">{wheel.name}</a>')
    (page / "index.html").write_text("<html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    return f"/files/{index}/"


def index_page(
    root: Path,
    project: str,
    links: Sequence[tuple[str, str, str | None]],
    *,
    name: str = "hostile",
    pep691: bool = False,
) -> str:
    """A project page under ``root/NAME/PROJECT/`` listing ``links`` as written, each
    (file name, href, sha256 as stated or None): an HTML page (the sha256 in the link's
    fragment) or a PEP 691 JSON one; the index's path on the server (``/files/NAME/``)."""
    import json

    page = root / name / project
    page.mkdir(parents=True, exist_ok=True)
    if pep691:
        files = [
            {"filename": f, "url": href, "hashes": {} if sha is None else {"sha256": sha}}
            for f, href, sha in links
        ]
        (page / "index.json").write_text(
            json.dumps({"meta": {"api-version": "1.0"}, "files": files})
        )
    else:
        anchors = [
            f'<a href="{href}{"" if sha is None else "#sha256=" + sha}">{f}</a>'
            for f, href, sha in links
        ]
        (page / "index.html").write_text(
            "<html><body>\n" + "\n".join(anchors) + "\n</body></html>\n"
        )
    return f"/files/{name}/"
