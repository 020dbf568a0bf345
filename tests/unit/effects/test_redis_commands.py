"""The relay's command allowlist and RESP bounds, read as an attacker in the container would:
every way past them is refused on the host."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest

from archwheel.effects.redis_commands import FORWARD, allowed, request_args
from archwheel.effects.resp import Budget, Busy, Hold, ProtocolError, Reader, TooLarge, read_value
from tests.support.fuzz import watchdog
from tests.support.redis_wire import KEY, command


def _verdict(*parts: str | bytes) -> bytes | None:
    """None when forwarded, else the relay's own answer."""
    verdict = allowed(request_args(command(*parts)))
    return None if verdict.forward else verdict.answer


@pytest.mark.parametrize(
    "parts",
    [
        ("PING",),
        ("GET", KEY),
        ("get", ".sccache_check"),
        ("SET", KEY, b"\x00\xff" * 100),
        ("SET", ".sccache_check", "Hello, World!"),
        ("SETEX", KEY, "600", "value"),
    ],
)
def test_what_sccache_sends_is_forwarded(parts: tuple[str, ...]) -> None:
    assert _verdict(*parts) is None


@pytest.mark.parametrize("info", ["LIB-NAME", "lib-ver"])
def test_client_setinfo_is_answered_on_the_host(info: str) -> None:
    assert _verdict("CLIENT", "SETINFO", info, "redis-rs") == b"+OK\r\n"


@pytest.mark.parametrize(
    "parts",
    [
        ("FLUSHALL",), ("FLUSHDB", "ASYNC"), ("CONFIG", "SET", "dir", "/tmp"), ("SHUTDOWN",),
        ("SLAVEOF", "127.0.0.1", "1"), ("REPLICAOF", "NO", "ONE"),
        ("MODULE", "LOAD", "/tmp/x.so"), ("AUTH", "guess"), ("AUTH", "default", "guess"),
        ("SELECT", "1"), ("HELLO", "3"), ("HELLO", "2", "AUTH", "default", "x"), ("KEYS", "*"),
        ("SCAN", "0"), ("DEL", KEY), ("UNLINK", KEY), ("EVAL", "return 1", "0"), ("DEBUG", "SLEEP", "9"),
        ("MONITOR",), ("SAVE",), ("BGREWRITEAOF",), ("ACL", "LIST"), ("CLIENT", "LIST"),
        ("CLIENT", "KILL", "TYPE", "normal"), ("CLIENT", "SETNAME", "x"), ("MIGRATE", "h", "1", KEY, "0", "1"),
        ("RENAME", KEY, "other"), ("SET", "session:1", "x"), ("GET", "user:password"),
        ("GET", "a/b/c/XYZ" + "0" * 61), ("GET", KEY + "\n"), ("GET", KEY, KEY),
        ("SET", KEY, "v", "GET"), ("SET", KEY, "v", "EX", "1"), ("SET", KEY, "v", "KEEPTTL"),
        ("SETEX", KEY, "-1", "v"), ("SETEX", KEY, "0", "v"), ("SETEX", KEY, "1e9", "v"),
        ("PING", "x"), ("MULTI",), ("EXEC",), ("SUBSCRIBE", "c"), ("CLIENT", "SETINFO", "LIB-NAME", "x" * 200),
    ],
)  # fmt: skip
def test_everything_else_is_an_error_on_the_host(parts: tuple[str, ...]) -> None:
    answer = _verdict(*parts)
    assert answer is not None and answer.startswith(b"-ERR archwheel's relay: ")
    assert answer.endswith(b"\r\n") and answer.count(b"\r\n") == 1


@pytest.mark.parametrize(
    "raw",
    [
        b"+PING\r\n",  # no array
        b"*1\r\n+GET\r\n",  # not a bulk string
        b"*2\r\n$3\r\nGET\r\n*1\r\n$1\r\nk\r\n",  # nested
        b"*0\r\n",
        b"*9\r\n" + b"$3\r\nGET\r\n" * 9,  # past MAX_ARGS
        b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nEXTRA",  # trailing bytes
        b"*1\r\n$-1\r\n",
        # lengths Redis would read otherwise than int() does: the raw request is forwarded, so
        # the relay reads it exactly as the server will, or not at all
        b"*1_0\r\n" + b"$3\r\nGET\r\n" * 10,
        b"*+2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
        b"* 2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
        b"*02\r\n$3\r\nGET\r\n$1\r\nk\r\n",
        b"*2\r\n$3\r\nGET\r\n$0_1\r\nk\r\n",
        b"*2\r\n$3\r\nGET\r\n$\xd9\xa1\r\nk\r\n",  # an Arabic-Indic one
    ],
)
def test_what_is_no_plain_request_array_is_refused(raw: bytes) -> None:
    assert request_args(raw) is None
    assert not allowed(request_args(raw)).forward


def test_a_request_array_is_read_back_whole() -> None:
    assert request_args(command("SETEX", KEY, "600", b"a\r\nb")) == [
        b"SETEX",
        KEY.encode(),
        b"600",
        b"a\r\nb",
    ]
    assert allowed([b"GET", KEY.encode()]) is FORWARD


def test_a_value_over_its_limit_is_refused_from_its_length_line() -> None:
    """A 1 GiB bulk string announced and never sent: refused at once (nothing read or held)."""
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"*3\r\n$3\r\nSET\r\n$70\r\n" + KEY.encode() + b"\r\n$1073741824\r\n")
        hold = Hold(1 << 20, Budget(1 << 30))
        with watchdog(5), pytest.raises(TooLarge):
            read_value(Reader(right), hold=hold)
        hold.release()
        assert hold.budget is not None and hold.budget.held == 0


def test_many_small_lines_count_against_the_limit_too() -> None:
    left, right = socket.socketpair()
    with left, right:

        def send() -> None:
            with contextlib.suppress(OSError):  # the reader stops early: a broken pipe
                left.sendall(b"*100000\r\n" + b"+xxxxxxxxxx\r\n" * 100000)

        threading.Thread(target=send, daemon=True).start()
        with watchdog(10), pytest.raises(TooLarge):
            read_value(Reader(right), hold=Hold(64 << 10))


def test_the_shared_budget_refuses_what_it_has_no_room_for() -> None:
    budget = Budget(100)
    first, second = Hold(1000, budget), Hold(1000, budget)
    first.charge(80)
    with pytest.raises(Busy):
        second.charge(30)
    first.release()
    second.charge(30)
    assert budget.held == 30


@pytest.mark.parametrize("line", [b"$1_0\r\n", b"$+1\r\n", b"$ 1\r\n", b"$01\r\n", b"*-2\r\n"])
def test_the_reader_takes_lengths_as_redis_does(line: bytes) -> None:
    """What the relay holds is read by ``resp``'s reader first: a length Redis would refuse is
    a protocol error there too, before anything is held or forwarded."""
    left, right = socket.socketpair()
    with left, right:
        left.sendall(line + b"x" * 16 + b"\r\n")
        with pytest.raises(ProtocolError):
            read_value(Reader(right), time.monotonic() + 5)
