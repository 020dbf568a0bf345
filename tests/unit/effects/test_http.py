"""The HTTP client's requests other than a plain GET, against real servers on 127.0.0.1: a
method and headers sent as given (a POST without a body says ``Content-Length: 0``), statuses
the caller accepts handed back as answers, a body read whole up to a bound, the deadline over
the whole request, an answer that is no HTTP, and a bearer token kept out of every error and
off a redirect to another origin."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from archwheel.effects.deadline import NetBudget, NetLimits, TimedOut
from archwheel.effects.http import Answered, Client, NotHTTP
from archwheel.effects.net import TransferError

SECRET = "Bearer s3cret-TOKEN-value"


@dataclass
class Seen:
    """What a server was asked: one (method, path, headers, body) per request."""

    url: str
    requests: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)


def _handler(seen: Seen) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            seen.requests.append((self.command, self.path, headers, body))
            kind, _, arg = self.path.strip("/").partition("/")
            if kind == "status":
                self._send(int(arg), b'{"why": "said"}')
            elif kind == "size":
                self._send(200, b"x" * int(arg))
            elif kind == "to":  # /to/PORT/PATH: a redirect to http://127.0.0.1:PORT/PATH
                self.send_response(302)
                self.send_header("Location", f"http://127.0.0.1:{arg}")
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self._send(404, b"")

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def _serve() -> Iterator[Seen]:
    seen = Seen("")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(seen))
    seen.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def server() -> Iterator[Seen]:
    yield from _serve()


@pytest.fixture
def other() -> Iterator[Seen]:
    """A second server: another origin (another port)."""
    yield from _serve()


def test_a_post_without_a_body_sends_its_method_headers_and_no_body(server: Seen) -> None:
    with (
        Client() as client,
        client.open(
            f"{server.url}/status/400", {"Authorization": SECRET}, method="POST", accept={400}
        ) as response,
    ):
        assert response.status == 400
        assert response.read_all(100) == b'{"why": "said"}'
    [(method, path, headers, body)] = server.requests
    assert (method, path, body) == ("POST", "/status/400", b"")
    assert headers["authorization"] == SECRET and headers["content-length"] == "0"


def test_a_status_not_accepted_is_answered_and_the_token_is_not_in_it(server: Seen) -> None:
    with Client() as client:
        with pytest.raises(Answered) as caught:
            client.open(f"{server.url}/status/401", {"Authorization": SECRET}, method="POST")
        assert caught.value.status == 401 and SECRET not in str(caught.value)
        with pytest.raises(Answered, match="500"):
            client.open(f"{server.url}/status/500", method="POST", accept={401})
        with client.open(f"{server.url}/status/401", accept={401}) as response:
            assert response.status == 401  # a GET too hands an accepted status back


def test_a_post_is_not_redirected(server: Seen) -> None:
    target = f"/to/{_port(server)}/status/200"
    with Client() as client, pytest.raises(Answered) as caught:
        client.open(f"{server.url}{target}", method="POST")
    assert caught.value.status == 302
    assert [r[1] for r in server.requests] == [target]
    with Client() as client, client.open(f"{server.url}{target}") as response:
        assert response.status == 200  # a GET's redirect is followed


def _port(seen: Seen) -> str:
    return seen.url.rsplit(":", 1)[1]


def test_a_body_is_read_whole_up_to_its_bound(server: Seen) -> None:
    with Client() as client:
        with client.open(f"{server.url}/size/100") as response:
            assert response.read_all(100) == b"x" * 100
        with (
            client.open(f"{server.url}/size/101") as response,
            pytest.raises(TransferError, match="an answer over 100 bytes"),
        ):
            response.read_all(100)


def test_the_token_goes_to_the_same_origin_only(server: Seen, other: Seen) -> None:
    with Client() as client:
        for port in (_port(server), _port(other)):
            url = f"{server.url}/to/{port}/status/200"
            with client.open(url, {"Authorization": SECRET}) as response:
                assert response.status == 200
    assert [r[2].get("authorization") for r in server.requests] == [SECRET, SECRET, SECRET]
    assert [(r[1], r[2].get("authorization")) for r in other.requests] == [("/status/200", None)]


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, list[socket.socket]]]:
    """A socket on 127.0.0.1 whose connections the test answers itself (or never)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    held: list[socket.socket] = []
    try:
        yield sock, held
    finally:
        sock.close()
        for conn in held:
            conn.close()


def test_a_listener_that_never_answers_ends_at_the_deadline(
    listener: tuple[socket.socket, list[socket.socket]],
) -> None:
    sock, held = listener
    threading.Thread(target=lambda: held.append(sock.accept()[0]), daemon=True).start()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    start = time.monotonic()
    with (
        pytest.raises(TimedOut) as caught,
        NetBudget(NetLimits(request_timeout_s=0.5, run_timeout_s=0.5)).request(url),
    ):
        Client().open(url, {"Authorization": SECRET}, method="POST", accept=range(100, 600))
    assert time.monotonic() - start < 3 and SECRET not in str(caught.value)


def test_an_answer_that_is_no_http_is_not_http(
    listener: tuple[socket.socket, list[socket.socket]],
) -> None:
    sock, held = listener

    def garbage() -> None:
        conn = sock.accept()[0]
        held.append(conn)
        conn.recv(4096)
        conn.sendall(b"garbage\r\n\r\n")
        conn.close()

    threading.Thread(target=garbage, daemon=True).start()
    with Client() as client, pytest.raises(NotHTTP) as caught:
        client.open(f"http://127.0.0.1:{sock.getsockname()[1]}/", {"Authorization": SECRET})
    assert SECRET not in str(caught.value) and "\n" not in str(caught.value)


def test_a_closed_port_is_a_transfer_error_without_the_token() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with Client() as client, pytest.raises(TransferError) as caught:
        client.open(f"http://127.0.0.1:{port}/", {"Authorization": SECRET}, method="POST")
    assert not isinstance(caught.value, NotHTTP)
    assert "refused" in str(caught.value) and SECRET not in str(caught.value)
