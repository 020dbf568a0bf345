"""The relay against a real redis-server, as a hostile compile container would use it: what is
not sccache's is answered ``-ERR`` by the relay and never reaches the server (its ``MONITOR``
sees nothing of it); connections and bytes are capped; the socket is its owner's alone; and the
real sccache still writes to the cache through it and hits."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from archwheel.effects import redis_relay
from archwheel.effects.redis_relay import RedisAddress, UnixRelay
from archwheel.wheelbuild.compile.sccache_launcher import FORWARDER_SCRIPT
from archwheel.wheelbuild.compile.sccache_stats import CacheCounts, parse_stats_json
from tests.support.components import sccache
from tests.support.fuzz import watchdog
from tests.support.redis_server import RedisServer, redis_server
from tests.support.redis_wire import GET, KEY, SET, command

PASSWORD = "host-only-s3cret"
HOSTILE = [
    ("FLUSHALL",), ("CONFIG", "SET", "dir", "/tmp"), ("SHUTDOWN", "NOSAVE"),
    ("SLAVEOF", "127.0.0.1", "1"), ("MODULE", "LOAD", "/tmp/evil.so"), ("AUTH", "guess"),
    ("SELECT", "1"), ("HELLO", "3"), ("KEYS", "*"), ("DEL", KEY), ("EVAL", "return 1", "0"),
    ("SET", "victim", "overwritten"), ("GET", "victim"), ("SET", KEY, "v", "GET"),
    ("CLIENT", "KILL", "TYPE", "normal"), ("CONFIG", "GET", "requirepass"),
]  # fmt: skip


def _connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5)
    sock.connect(str(path))
    return sock


def _closed(sock: socket.socket) -> bool:
    """The relay closed it (a reset where the relay left the client's bytes unread)."""
    try:
        return sock.recv(16) == b""
    except ConnectionResetError:
        return True


def _line(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\r\n"):
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


@contextmanager
def _monitor(server: RedisServer) -> Iterator[socket.socket]:
    """A second connection to the server in MONITOR mode: it sees every command it runs."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(command("AUTH", PASSWORD) + command("MONITOR"))
        seen = b""
        while seen.count(b"+OK\r\n") < 2:
            seen += sock.recv(4096)
        yield sock


def _seen_until(monitor: socket.socket, marker: bytes) -> bytes:
    seen = b""
    while marker not in seen:
        chunk = monitor.recv(65536)
        assert chunk, "the monitor connection closed"
        seen += chunk
    return seen


def test_hostile_commands_are_answered_by_the_relay_and_never_reach_the_server() -> None:
    with redis_server(password=PASSWORD) as server, watchdog(30):
        server.cli("SET", "victim", "kept")
        address = RedisAddress("127.0.0.1", server.port, password=PASSWORD)
        with UnixRelay(address) as relay, _monitor(server) as monitor, _connect(relay.path) as c:
            for parts in HOSTILE:
                c.sendall(command(*parts))
                assert _line(c).startswith(b"-ERR archwheel's relay: "), parts
            c.sendall(SET)  # still served on the same connection
            assert _line(c) == b"+OK\r\n"
            seen = _seen_until(monitor, KEY.encode())
            assert relay.refused == len(HOSTILE)
        commands = [line.split(b"]", 1)[-1] for line in seen.split(b"\r\n") if b"]" in line]
        assert [c.split()[0] for c in commands] == [b'"AUTH"', b'"SET"'], commands
        assert b"overwritten" not in seen and b"victim" not in seen
        assert "kept" in server.cli("GET", "victim") and server.dbsize() == 2
        assert str(server.folder) in server.cli("CONFIG", "GET", "dir")
        assert "master" in server.cli("ROLE")


def test_a_request_over_the_bound_is_refused_and_its_connection_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(redis_relay, "MAX_VALUE_BYTES", 1 << 16)
    with redis_server() as server, watchdog(20):
        with UnixRelay(RedisAddress("127.0.0.1", server.port)) as relay:
            with _connect(relay.path) as c:
                # announced, never sent: refused from the length line, nothing forwarded
                c.sendall(
                    b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1073741824\r\n" % (len(KEY), KEY.encode())
                )
                assert _line(c).startswith(b"-ERR archwheel's relay: a value over 65536 bytes")
                assert _closed(c)
            with _connect(relay.path) as c:
                c.sendall(command("SET", KEY, b"x" * 60000))
                assert _line(c) == b"+OK\r\n"
            assert relay.connections == 1  # the refused request never opened one
        assert server.cli("STRLEN", KEY).strip() == ":60000"


def test_all_connections_together_hold_a_bounded_number_of_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(redis_relay, "MAX_HELD_BYTES", 100_000)
    with redis_server() as server, watchdog(20):
        with UnixRelay(RedisAddress("127.0.0.1", server.port)) as relay:
            big = command("SET", KEY, b"x" * 80_000)
            with _connect(relay.path) as first, _connect(relay.path) as second:
                first.sendall(big[:-10])  # 80 kB held, waiting for its last bytes
                time.sleep(0.3)
                second.sendall(big)
                assert _line(second).startswith(b"-ERR archwheel's relay: the relay holds")
                assert _closed(second)
                first.sendall(big[-10:])
                assert _line(first) == b"+OK\r\n"
        assert server.cli("STRLEN", KEY).strip() == ":80000"


def test_connections_past_the_cap_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redis_relay, "MAX_CONNECTIONS", 2)
    with (
        redis_server() as server,
        watchdog(20),
        UnixRelay(RedisAddress("127.0.0.1", server.port)) as relay,
    ):
        with _connect(relay.path) as a, _connect(relay.path) as b:
            a.sendall(GET)
            b.sendall(GET)
            assert _line(a) == _line(b) == b"$-1\r\n"
            with _connect(relay.path) as c:
                assert _line(c) == b"-ERR archwheel's relay: too many connections at once\r\n"
                assert _closed(c)
        with watchdog(5):
            while True:  # the two slots come back once their connections end
                with _connect(relay.path) as d:
                    try:  # refused while a slot is still held: the relay may close first
                        d.sendall(GET)
                        if _line(d) == b"$-1\r\n":
                            break
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                time.sleep(0.05)


def test_the_socket_is_its_owners_alone() -> None:
    me = (os.geteuid(), os.getegid())
    with UnixRelay(RedisAddress("127.0.0.1", 1), owner=me) as relay:
        assert stat.S_IMODE(relay.path.stat().st_mode) == 0o600
        assert stat.S_IMODE(relay.folder.stat().st_mode) == 0o700
        assert (relay.path.stat().st_uid, relay.path.stat().st_gid) == me
    if os.geteuid() == 0:  # archwheel as root builds as another user: the socket is given to it
        with UnixRelay(RedisAddress("127.0.0.1", 1), owner=(65534, 65534)) as relay:
            info = relay.path.stat()
            assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (65534, 65534, 0o600)
            assert stat.S_IMODE(relay.folder.stat().st_mode) == 0o711
            done = subprocess.run(
                ["setpriv", "--reuid=1", "--regid=1", "--clear-groups", "python3", "-c",
                 f"import socket; socket.socket(socket.AF_UNIX).connect({str(relay.path)!r})"],
                capture_output=True, text=True, check=False, timeout=30,
            )  # fmt: skip
            assert done.returncode != 0 and "Permission denied" in done.stderr


def test_sccache_writes_and_hits_through_the_relay(tmp_path: Path) -> None:
    """The pinned sccache and gcc, through the relay and the container's forwarder, against a
    password-protected server's database 2: a write, then another machine's hit; the server saw
    only the relay's AUTH and SELECT and sccache's allowed commands."""
    binary = sccache()
    (tmp_path / "kernel.c").write_text("int kernel(int x) { return 3 * x; }\n")
    (tmp_path / "fw.py").write_text(FORWARDER_SCRIPT)
    with redis_server(password=PASSWORD) as server, watchdog(120):
        address = RedisAddress("127.0.0.1", server.port, password=PASSWORD)
        with UnixRelay(address, db=2, owner=(os.geteuid(), os.getegid())) as relay:
            port_file = tmp_path / "port"
            forwarder = subprocess.Popen(
                [shutil.which("python3") or "python3", str(tmp_path / "fw.py"), str(relay.path),
                 str(port_file)]
            )  # fmt: skip
            try:
                while not port_file.exists():
                    time.sleep(0.05)
                stats = [
                    _compile(binary, tmp_path, machine, port_file.read_text())
                    for machine in ("one", "two")
                ]
            finally:
                forwarder.kill()
                forwarder.wait()
            assert relay.failures == 0 and relay.refused == 0
        assert (stats[0].misses, stats[0].remote_hits) == (1, 0)  # written to the server
        assert (stats[1].misses, stats[1].remote_hits, stats[1].local_hits) == (0, 1, 0)
        keyspace = server.cli("INFO", "keyspace")
        assert "db2:keys=2," in keyspace and "db0:" not in keyspace  # the check and the entry


def _compile(binary: Path, tmp_path: Path, machine: str, port: str) -> CacheCounts:
    env = {
        "PATH": os.environ["PATH"], "HOME": str(tmp_path), "SCCACHE_DIR": str(tmp_path / machine),
        "SCCACHE_IDLE_TIMEOUT": "0", "SCCACHE_SERVER_UDS": str(tmp_path / f"{machine}.sock"),
        "SCCACHE_MULTILEVEL_CHAIN": "disk,redis",
        "SCCACHE_MULTILEVEL_WRITE_ERROR_POLICY": "ignore",
        "SCCACHE_REDIS_ENDPOINT": f"redis://127.0.0.1:{port}",
    }  # fmt: skip
    subprocess.run([binary, "--start-server"], env=env, check=True, capture_output=True)
    try:
        subprocess.run(
            [binary, "gcc", "-c", "kernel.c", "-o", f"{machine}.o"],
            cwd=tmp_path, env=env, check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        stats = subprocess.run(
            [binary, "--show-stats", "--stats-format", "json"], env=env, check=True,
            capture_output=True, text=True,
        ).stdout  # fmt: skip
        return CacheCounts.from_stats(parse_stats_json(stats))
    finally:
        subprocess.run([binary, "--stop-server"], env=env, capture_output=True, check=False)
