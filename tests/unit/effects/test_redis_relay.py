"""The probe and the relay against a real Redis server (Debian's redis-server, started here)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from archwheel.effects import redis_relay
from archwheel.effects.redis_relay import RedisAddress, UnixRelay, probe
from tests.support.faulty_redis import Mode, faulty_redis
from tests.support.fuzz import watchdog
from tests.support.redis_server import free_port, redis_server
from tests.support.redis_wire import GET, KEY, SET, command


def _ask(path: str, payload: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(path)
        sock.sendall(payload)
        return sock.recv(4096)


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
        assert server.cli("GET", KEY).endswith("value\r\n")
    assert not relay.path.exists() and not relay.folder.exists()


def test_relay_authenticates_on_the_host() -> None:
    with redis_server(password="s3cret") as server:
        assert probe(RedisAddress("127.0.0.1", server.port)) is not None  # NOAUTH
        assert probe(RedisAddress("127.0.0.1", server.port, password="wrong")) is not None
        address = RedisAddress("127.0.0.1", server.port, password="s3cret")
        assert probe(address) is None
        with UnixRelay(address) as relay:  # the client sends no AUTH at all
            assert _ask(str(relay.path), SET) == b"+OK\r\n"


def test_relay_to_a_down_server_answers_as_an_empty_cache() -> None:
    """sccache waits 30 s per request on a server that does not answer: the relay answers
    for it, at once, as an empty Redis (a miss; the write dropped), and counts each."""
    with UnixRelay(RedisAddress("127.0.0.1", free_port())) as relay:
        with watchdog(10):
            assert _ask(str(relay.path), GET) == b"$-1\r\n"
            assert _ask(str(relay.path), SET) == b"+OK\r\n"
            assert _ask(str(relay.path), b"*1\r\n$4\r\nPING\r\n") == b"+PONG\r\n"
        assert relay.failures == 3 and relay.connections == 0


@pytest.mark.parametrize("mode", ["garbage", "hang"])
def test_a_server_that_answers_wrong_is_answered_for(
    mode: Mode, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_relay, "REPLY_TIMEOUT_S", 1.0)
    with faulty_redis(mode) as server, UnixRelay(RedisAddress("127.0.0.1", server.port)) as relay:
        with watchdog(15):
            assert _ask(str(relay.path), GET) == b"$-1\r\n"
            assert _ask(str(relay.path), SET) == b"+OK\r\n"  # taken for down: not asked
        assert server.commands == 1 and relay.failures == 2


def test_requests_pipelined_on_one_connection_get_their_replies_in_order() -> None:
    with redis_server() as server, UnixRelay(RedisAddress("127.0.0.1", server.port)) as relay:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(str(relay.path))
            sock.sendall(SET + GET + command("GET", "f/f/f/fff" + "0" * 61))
            got = b""
            while not got.endswith(b"$-1\r\n"):
                got += sock.recv(4096)
        assert got == b"+OK\r\n$5\r\nvalue\r\n$-1\r\n"
        assert relay.failures == 0


def test_a_server_that_trickles_its_answer_is_given_up_in_time() -> None:
    """A socket timeout bounds each recv only: a server sending its reply a byte at a time,
    each a little sooner than the timeout, kept the probe (and so a build's start) waiting up
    to 4096 timeouts. The probe's whole exchange now has a deadline."""
    import threading
    import time

    from tests.support.fuzz import watchdog

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    stop = threading.Event()

    def trickle() -> None:
        client, _ = listener.accept()
        with client:
            client.recv(64)  # the PING
            while not stop.is_set():
                try:
                    client.sendall(b"P")
                except OSError:
                    return
                time.sleep(0.2)

    server = threading.Thread(target=trickle, daemon=True)
    server.start()
    try:
        with watchdog(20):
            why = probe(RedisAddress("127.0.0.1", listener.getsockname()[1]), timeout=1.0)
        assert why == "the server did not answer in time"
    finally:
        stop.set()
        listener.close()
        server.join(timeout=5)
