"""A server that trickles bytes is given up, against a real HTTP server on 127.0.0.1.

A socket timeout never fires for a server that sends a byte before each timeout ends, and
``read(n)`` waits for all ``n`` bytes: an sdist download or an index page could stall a build
for days. ``effects.net.paced_blocks`` asks for a least rate per window instead; the windows
here are shortened so that the test takes about a second.
"""

from __future__ import annotations

import http.server
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from archwheel.effects import net, simple_index
from archwheel.effects.pipconfig import PipSettings
from archwheel.errors import InputError, ToolError
from archwheel.wheelbuild.sources import source

BODY = b"x" * 300_000


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        trickle = self.path.startswith("/trickle")
        cut = self.path.startswith("/cut")
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        try:
            if trickle:  # a byte every 50 ms: never silent long enough for a timeout
                for byte in BODY[:100]:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.05)
            elif cut:  # half the announced length, then the connection ends
                self.wfile.write(BODY[: len(BODY) // 2])
            else:
                self.wfile.write(BODY)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up, as it should

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(autouse=True)
def short_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(net, "RATE_WINDOW_S", 0.5)
    monkeypatch.setattr(net, "MIN_BYTES_PER_WINDOW", 1000)


def test_a_fast_answer_is_read_whole(server: str) -> None:
    with urllib.request.urlopen(f"{server}/fast", timeout=10) as response:
        assert b"".join(net.paced_blocks(response, limit=len(BODY))) == BODY


def test_an_answer_past_its_limit_is_refused(server: str) -> None:
    with (
        urllib.request.urlopen(f"{server}/fast", timeout=10) as response,
        pytest.raises(net.TooLarge, match=f"larger than {len(BODY) - 1} bytes"),
    ):
        b"".join(net.paced_blocks(response, limit=len(BODY) - 1))


def test_a_trickle_is_given_up_within_two_windows(server: str) -> None:
    start = time.monotonic()
    with (
        urllib.request.urlopen(f"{server}/trickle", timeout=10) as response,
        pytest.raises(net.TooSlow, match=r"fewer than 1000 per 0 s: too slow"),
    ):
        b"".join(net.paced_blocks(response, limit=len(BODY)))
    assert time.monotonic() - start < 5  # the 10 s socket timeout never fired


def test_an_answer_cut_short_is_an_error(server: str) -> None:
    with (
        urllib.request.urlopen(f"{server}/cut", timeout=10) as response,
        pytest.raises(net.TransferError, match="ended 150000 bytes before the announced length"),
    ):
        b"".join(net.paced_blocks(response, limit=len(BODY)))


def test_an_sdist_download_that_trickles_fails_and_leaves_nothing(
    server: str, tmp_path: Path
) -> None:
    target = tmp_path / "demo-1.0.tar.gz"
    with pytest.raises(ToolError, match=r"could not download .*too slow, given up"):
        source._fetch(f"{server}/trickle/demo-1.0.tar.gz", target, None)
    assert list(tmp_path.iterdir()) == []  # no half-written file


def test_an_index_page_that_trickles_fails(server: str) -> None:
    with pytest.raises(ToolError, match=r"cannot read the package index page .*too slow"):
        simple_index.fetch_page(f"{server}/trickle/", "demo", PipSettings())


def test_an_sdist_past_its_bound_fails_and_leaves_nothing(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(source, "MAX_SDIST_BYTES", 1000)
    target = tmp_path / "demo-1.0.tar.gz"
    with pytest.raises(InputError, match=r"demo-1\.0\.tar\.gz is larger than 1000 bytes"):
        source._fetch(f"{server}/fast/demo-1.0.tar.gz", target, None)
    assert list(tmp_path.iterdir()) == []


def test_an_index_page_past_its_bound_fails(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simple_index, "MAX_PAGE_BYTES", 1000)
    with pytest.raises(ToolError, match="/fast/demo/ is larger than 1000 bytes"):
        simple_index.fetch_page(f"{server}/fast/", "demo", PipSettings())
