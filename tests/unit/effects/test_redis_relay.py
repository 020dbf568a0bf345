"""The probe and the relay against a real Redis server (Debian's redis-server, started here)."""

from __future__ import annotations

import socket
from pathlib import Path

from archwheel.effects.redis_relay import RedisAddress, UnixRelay, probe
from tests.support.redis_server import free_port, redis_server


def _ask(path: str, payload: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(path)
        sock.sendall(payload)
        return sock.recv(4096)


SET = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n"
GET = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"


def test_probe_answers_and_a_closed_port_does_not() -> None:
    with redis_server() as server:
        assert probe(RedisAddress("127.0.0.1", server.port)) is None
    closed = probe(RedisAddress("127.0.0.1", free_port()), timeout=1)
    assert closed and "refused" in closed.lower()
    missing = probe(RedisAddress(socket_path=Path("/nonexistent/r.sock")))
    assert missing


def test_relay_forwards_to_the_server() -> None:
    with redis_server() as server, UnixRelay(RedisAddress("127.0.0.1", server.port)) as relay:
        assert _ask(str(relay.path), SET) == b"+OK\r\n"
        assert _ask(str(relay.path), GET) == b"$5\r\nvalue\r\n"
        assert relay.connections == 2 and relay.failures == 0
        assert server.cli("GET", "k").endswith("value\r\n")
    assert not relay.path.exists() and not relay.folder.exists()


def test_relay_authenticates_on_the_host() -> None:
    with redis_server(password="s3cret") as server:
        assert probe(RedisAddress("127.0.0.1", server.port)) is not None  # NOAUTH
        assert probe(RedisAddress("127.0.0.1", server.port, password="wrong")) is not None
        address = RedisAddress("127.0.0.1", server.port, password="s3cret")
        assert probe(address) is None
        with UnixRelay(address) as relay:  # the client sends no AUTH at all
            assert _ask(str(relay.path), SET) == b"+OK\r\n"


def test_relay_to_a_down_server_closes_the_client() -> None:
    with UnixRelay(RedisAddress("127.0.0.1", free_port())) as relay:
        try:
            answer = _ask(str(relay.path), GET)
        except ConnectionResetError:
            answer = b""
        assert answer == b""  # closed: ccache counts a remote error and compiles on its own
        assert relay.failures == 1
