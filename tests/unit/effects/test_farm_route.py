"""The farm route's allowlist (``FarmRoute``) and the proxy's bounds (``FarmProxy``) against a
real HTTP server on 127.0.0.1 standing in for a scheduler (the real farm is in
tests/integration/farm/test_farm_route.py)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from archwheel.effects import farm_proxy
from archwheel.effects.farm_proxy import FarmProxy, container_scheduler_url
from archwheel.effects.farm_route import (
    MAX_SERVERS,
    BadTarget,
    Endpoint,
    FarmRoute,
    parse_absolute,
    parse_authority,
    scheduler_endpoint,
)

SCHED = Endpoint("10.0.0.1", 10600)
CERT = "/api/v1/scheduler/server_certificate/"


def route() -> FarmRoute:
    return FarmRoute(SCHED)


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("127.0.0.1:80", "127.0.0.1", 80),
        ("[::1]:10501", "::1", 10501),
        ("[0:0::1]:10501", "::1", 10501),
        ("Farm.Example.:443", "farm.example", 443),
    ],
)
def test_authorities_are_normalised(text: str, host: str, port: int) -> None:
    assert parse_authority(text) == Endpoint(host, port)


@pytest.mark.parametrize(
    "text", ["127.0.0.1", "::1:80", "host:0", "host:65536", "host:x", ":80", "a b:80", "h/x:1"]
)
def test_bad_authorities_are_refused(text: str) -> None:
    with pytest.raises(BadTarget):
        parse_authority(text)


def test_scheduler_urls_and_absolute_targets() -> None:
    assert scheduler_endpoint("http://10.0.0.1:10600") == (SCHED, False)
    assert scheduler_endpoint("https://farm.example") == (Endpoint("farm.example", 443), True)
    assert parse_absolute("http://10.0.0.1:10600/api/v1/x?y=1") == (SCHED, "/api/v1/x?y=1")
    assert parse_absolute("http://farm/") == (Endpoint("farm", 80), "/")
    for bad in ("https://10.0.0.1:10600/", "/api/v1/", "http://u:p@10.0.0.1:10600/"):
        with pytest.raises(BadTarget):
            parse_absolute(bad)
    assert container_scheduler_url("https://Farm.Example:8443") == "http://farm.example:8443"


def test_only_the_schedulers_api_is_let_through() -> None:
    r = route()
    assert r.request("GET", "http://10.0.0.1:10600/api/v1/scheduler/status").allowed
    assert r.request("POST", "http://10.0.0.1:10600/api/v1/scheduler/alloc_job").allowed
    assert r.request("CONNECT", "10.0.0.1:10600").allowed
    for method, target in [
        ("GET", "http://10.0.0.1:10601/api/v1/scheduler/status"),  # another port
        ("GET", "http://10.0.0.2:10600/api/v1/scheduler/status"),  # another host
        ("GET", "http://10.0.0.1:10600/"),  # off the API
        ("GET", "http://10.0.0.1:10600/api/v1/distserver/run_job/1"),
        ("GET", "/api/v1/scheduler/status"),  # origin form: not a proxy request
        ("CONNECT", "10.0.0.2:443"),
        ("CONNECT", "not an authority"),
    ]:
        decision = r.request(method, target)
        assert not decision.allowed and decision.why and "\n" not in decision.why, target


def test_a_server_is_reachable_once_the_scheduler_vouched_for_it() -> None:
    r = route()
    assert not r.request("CONNECT", "10.0.0.7:10501").allowed
    assert r.learn(CERT + "10.0.0.7:10501", 404) is None  # the scheduler does not know it
    assert r.learn("/api/v1/scheduler/status", 200) is None
    assert not r.request("CONNECT", "10.0.0.7:10501").allowed
    assert r.learn(CERT + "10.0.0.7:10501", 200) == Endpoint("10.0.0.7", 10501)
    assert r.request("CONNECT", "10.0.0.7:10501").allowed
    assert not r.request("CONNECT", "10.0.0.7:10502").allowed  # the address, not the host
    assert r.learn(CERT + "%5B::1%5D:10501", 200) == Endpoint("::1", 10501)
    assert r.request("CONNECT", "[::1]:10501").allowed
    assert r.learn(CERT + "junk", 200) is None
    assert r.servers == {Endpoint("10.0.0.7", 10501), Endpoint("::1", 10501)}


def test_the_route_learns_a_bounded_number_of_servers() -> None:
    r = route()
    for n in range(MAX_SERVERS + 5):
        r.learn(f"{CERT}10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}:1", 200)
    assert len(r.servers) == MAX_SERVERS


class _Scheduler(BaseHTTPRequestHandler):
    """Answers every request with the Authorization header it got (a real HTTP server)."""

    seen: ClassVar[list[str | None]] = []

    def _reply(self) -> None:
        _Scheduler.seen.append(self.headers.get("Authorization"))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        status = 200 if self.path.startswith("/api/v1/scheduler/server_certificate/") else 201
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _reply

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def scheduler() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Scheduler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Scheduler.seen = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _ask(proxy: FarmProxy, data: bytes, timeout: float = 10) -> bytes:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(timeout)
        sock.connect(str(proxy.path))
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_the_proxy_forwards_with_the_hosts_token_and_learns(scheduler: str) -> None:
    with FarmProxy(scheduler, "HOST-TOKEN") as proxy:
        body = b"x" * 1000
        ask = (
            f"POST {scheduler}/api/v1/scheduler/alloc_job HTTP/1.1\r\n"
            "Authorization: Bearer from-the-container\r\nProxy-Authorization: x\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        answer = _ask(proxy, ask)
        assert answer.startswith(b"HTTP/1.0 201 ") and answer.endswith(body)
        assert _Scheduler.seen == ["Bearer HOST-TOKEN"]
        cert = f"GET {scheduler}/api/v1/scheduler/server_certificate/10.9.9.9:7 HTTP/1.1\r\n\r\n"
        assert _ask(proxy, cert.encode()).startswith(b"HTTP/1.0 200 ")
        assert Endpoint("10.9.9.9", 7) in proxy.route.servers
        assert proxy.scheduler_requests == 2 and proxy.refused_count == 0
        assert "HOST-TOKEN" not in repr(proxy)
    assert not proxy.path.exists() and not proxy.folder.exists()


def test_refusals_are_one_line_and_bounded(scheduler: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(farm_proxy, "HEAD_TIMEOUT_S", 0.5)
    with FarmProxy(scheduler, None) as proxy:
        cases = {
            b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n": b"403",
            b"GARBAGE\r\n\r\n": b"400",
            b"GET http://x/ HTTP/1.1\r\n" + b"A: b\r\n" * 4000 + b"\r\n": b"400",
            f"POST {scheduler}/api/v1/scheduler/alloc_job HTTP/1.1\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode(): b"501",
            f"POST {scheduler}/api/v1/scheduler/alloc_job HTTP/1.1\r\n"
            "Content-Length: 99999999\r\n\r\n".encode(): b"400",
        }
        for ask, status in cases.items():
            answer = _ask(proxy, ask)
            assert answer.split(b" ")[1] == status, (ask[:60], answer[:120])
            assert answer.split(b"\r\n\r\n", 1)[1].count(b"\n") == 1
        start = time.monotonic()
        slow = _ask(proxy, b"GET http://x/ HTTP/1.1\r\n")  # a head that never ends
        assert slow.split(b" ")[1] == b"400" and time.monotonic() - start < 5
        assert proxy.refused_count == len(cases) + 1 and _Scheduler.seen == []


def test_a_scheduler_that_is_down_is_a_502(scheduler: str) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{unused.getsockname()[1]}"
    with FarmProxy(down, "t") as proxy:
        answer = _ask(proxy, f"GET {down}/api/v1/scheduler/status HTTP/1.1\r\n\r\n".encode())
        assert answer.split(b" ")[1] == b"502"
        assert b"refused" in answer.lower()
