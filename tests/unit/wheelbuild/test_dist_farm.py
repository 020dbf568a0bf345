"""The compile farm's host side without a farm: the token file, the scheduler URL, the client
configuration (its mode and what it holds) and the probe against real sockets on 127.0.0.1 that
are no scheduler (nothing listening, a listener that never answers, one that talks garbage)."""

from __future__ import annotations

import contextlib
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from archwheel.errors import UsageError
from archwheel.exit_codes import ExitCode, exit_code_for
from archwheel.facts.documents import load_document
from archwheel.wheelbuild.compile.dist_farm import (
    TOKEN_LIMIT,
    DistFarm,
    FarmUnavailable,
    SchedulerStatus,
    check_farm,
    dist_farm_option,
    parse_scheduler_url,
    probe_scheduler,
    read_token_file,
    write_client_config,
)

SECRET = "s3cret-TOKEN-value"


def _token(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "token"
    path.write_bytes(data)
    return path


def test_token_file_one_line_is_read_with_its_newline_stripped(tmp_path: Path) -> None:
    assert read_token_file(_token(tmp_path, SECRET.encode() + b"\n")) == SECRET


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "empty"),
        (b"\n  \n", "empty"),
        (b"SEKRIT\nSEKRIT2\n", "more than one line"),
        (b"SEKRIT with space\n", "not a token"),
        (b"SEKRIT\xc3\xa9\n", "not a token"),
        (b"x" * (TOKEN_LIMIT + 1), f"larger than {TOKEN_LIMIT} bytes"),
    ],
)
def test_bad_token_file_is_one_usage_line_without_its_contents(
    tmp_path: Path, data: bytes, why: str
) -> None:
    path = _token(tmp_path, data)
    with pytest.raises(UsageError) as caught:
        read_token_file(path)
    message = str(caught.value)
    assert why in message and str(path) in message and "\n" not in message
    assert "SEKRIT" not in message
    assert exit_code_for(caught.value) == ExitCode.USAGE


def test_missing_and_unreadable_token_files_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        read_token_file(tmp_path / "absent")
    with pytest.raises(UsageError, match="not a regular file"):
        read_token_file(tmp_path)


@pytest.mark.parametrize(
    ("text", "url"),
    [
        ("http://127.0.0.1:10600", "http://127.0.0.1:10600"),
        ("https://farm.example/", "https://farm.example"),
        ("http://[::1]:10600", "http://[::1]:10600"),
    ],
)
def test_scheduler_url_is_normalized(text: str, url: str) -> None:
    assert parse_scheduler_url(text) == url


@pytest.mark.parametrize(
    "text",
    ["127.0.0.1:10600", "ftp://host", "http://user:pw@host:1", "http://host/api", "http://h:99999"],
)
def test_bad_scheduler_url_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_scheduler_url(text)
    assert "pw" not in str(caught.value)


def test_options_go_together(tmp_path: Path) -> None:
    token = _token(tmp_path, SECRET.encode())
    assert dist_farm_option(None, None, required=False) is None
    with pytest.raises(UsageError, match="needs a farm"):
        dist_farm_option(None, None, required=True)
    with pytest.raises(UsageError, match="without --dist-scheduler"):
        dist_farm_option(None, token, required=False)
    with pytest.raises(UsageError, match="without --dist-token-file"):
        dist_farm_option("http://127.0.0.1:1", None, required=False)
    farm = dist_farm_option("http://127.0.0.1:1", token, required=True)
    assert farm == DistFarm("http://127.0.0.1:1", SECRET, required=True)
    assert SECRET not in repr(farm)


def test_client_config_is_private_and_says_what_sccache_reads(tmp_path: Path) -> None:
    path = tmp_path / "client.toml"
    path.write_text("old, readable by all")
    path.chmod(0o644)
    farm = DistFarm("http://127.0.0.1:10600", 'to"k\\en')
    write_client_config(path, farm, "/build/.archwheel/toolchains")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    config = load_document(path.read_bytes(), origin=path, nesting=8, toml=True)
    assert config == {
        "dist": {
            "rewrite_includes_only": True,  # a server's object is the local one (farm tests)
            "scheduler_url": "http://127.0.0.1:10600",
            "toolchains": [],
            "cache_dir": "/build/.archwheel/toolchains",
            "auth": {"type": "token", "token": 'to"k\\en'},
        }
    }


def _listener(behaviour: str) -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port: int = server.getsockname()[1]
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)
            if behaviour == "garbage":
                conn.recv(4096)
                conn.sendall(b"garbage\r\n\r\n")
                conn.close()

    serving = threading.Thread(target=serve, daemon=True)
    serving.start()
    try:
        yield port
    finally:
        # shutdown() wakes the blocked accept() (close() alone does not), so the thread ends
        # with the test: a later test's forked pool needs a process with one thread.
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_RDWR)
        server.close()
        serving.join(timeout=10)
        for conn in held:
            conn.close()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A listener on 127.0.0.1 that accepts and never answers."""
    yield from _listener("silent")


@pytest.fixture
def garbage_port() -> Iterator[int]:
    """A listener on 127.0.0.1 that answers something that is no HTTP."""
    yield from _listener("garbage")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_probe_of_nothing_listening_is_not_reached() -> None:
    status = probe_scheduler(DistFarm(f"http://127.0.0.1:{_closed_port()}", SECRET), 5)
    assert not status.reached and "refused" in status.why.lower()


def test_probe_of_a_silent_listener_ends_at_its_deadline(silent_port: int) -> None:
    start = time.monotonic()
    status = probe_scheduler(DistFarm(f"http://127.0.0.1:{silent_port}", SECRET), 1.0)
    assert not status.reached and "in time" in status.why
    assert time.monotonic() - start < 3


def test_probe_of_garbage_is_not_reached(garbage_port: int) -> None:
    status = probe_scheduler(DistFarm(f"http://127.0.0.1:{garbage_port}", SECRET), 5)
    assert status == SchedulerStatus(reached=False, why="not an HTTP answer")


def _fixed(status: SchedulerStatus):  # type: ignore[no-untyped-def]
    return lambda farm, timeout: status


def test_check_farm_warns_once_and_builds_locally_when_unreached() -> None:
    lines: list[str] = []
    farm = DistFarm("http://127.0.0.1:9", SECRET)
    down = SchedulerStatus(reached=False, why="Connection refused")
    assert check_farm(farm, lines.append, probe=_fixed(down)) == down
    assert lines == ["compile farm http://127.0.0.1:9 cannot be reached (Connection refused): "
                     "compiling locally"]  # fmt: skip
    empty = SchedulerStatus(reached=True, servers=0, token_accepted=True)
    lines.clear()
    check_farm(farm, lines.append, probe=_fixed(empty))
    assert lines == ["compile farm http://127.0.0.1:9 has no build server: compiling locally"]


def test_check_farm_required_refuses_with_exit_4() -> None:
    farm = DistFarm("http://127.0.0.1:9", SECRET, required=True)
    with pytest.raises(FarmUnavailable) as caught:
        check_farm(farm, print, probe=_fixed(SchedulerStatus(reached=False, why="x")))
    assert exit_code_for(caught.value) == ExitCode.TOOL
    assert int(ExitCode.TOOL) == 4


def test_check_farm_wrong_token_is_exit_2_without_the_token() -> None:
    farm = DistFarm("http://127.0.0.1:9", SECRET)
    refused = SchedulerStatus(reached=True, servers=2, token_accepted=False)
    with pytest.raises(UsageError) as caught:
        check_farm(farm, print, probe=_fixed(refused))
    assert "refused the token" in str(caught.value) and SECRET not in str(caught.value)
    lines: list[str] = []
    good = SchedulerStatus(reached=True, servers=2, token_accepted=True)
    assert check_farm(farm, lines.append, probe=_fixed(good)) == good and lines == []
