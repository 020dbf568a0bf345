"""The farm route as a compile container meets it, driven by an attacker: requests over the
route's real Unix socket (``FarmProxy``), a real TCP listener on 127.0.0.1 as the scheduler
or its front (``Recorder``: what reaches it, byte for byte), another as a build server or as
an address of this machine nobody vouched for. Fast (no sccache-dist); the real farm through
the route is tests/integration/farm/test_farm_route.py.

The scheduler's listener checks at the end of each test that every request that reached it is
one of sccache's three client requests with the host's token; no other listener ever sees it."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from archwheel.effects import farm_proxy
from archwheel.effects.farm_proxy import FarmProxy
from archwheel.effects.farm_route import ALLOC_JOB, CERTIFICATE_PREFIX, STATUS, Endpoint
from tests.support.listener import Listener, Recorder
from tests.support.sccache_wire import alloc_job_body, alloc_job_fail, http_answer

pytestmark = [pytest.mark.farm]

TOKEN = "HOST-TOKEN-a1b2c3"


def _allowed_request(data: bytes) -> bool:
    line = data.split(b"\r\n", 1)[0].decode("ascii", errors="replace")
    method, path, _ = line.split(" ")
    if (method, path) in (("GET", STATUS), ("POST", ALLOC_JOB)):
        return True
    return method == "GET" and path.startswith(CERTIFICATE_PREFIX)


class Scene:
    """A scheduler (``Recorder``) answering with ``self.answer``, the route to it, and the
    address of this machine nobody vouched for (``other``, a counting listener)."""

    def __init__(self) -> None:
        self.answer: Callable[[bytes], bytes] = lambda _: http_answer(b"ok")
        self.scheduler = Recorder(self._reply)
        self.url = f"http://127.0.0.1:{self.scheduler.port}"
        self.other = Listener()
        self.proxy = FarmProxy(self.url, TOKEN)

    def _reply(self, data: bytes) -> bytes:
        return self.answer(data)  # the answer the test set last

    def ask(self, data: bytes, *, shut: bool = False) -> bytes:
        """Send ``data`` over the route's socket; its whole answer."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(10)
            sock.connect(str(self.proxy.path))
            sock.sendall(data)
            if shut:
                sock.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        return answer

    def get(self, path: str) -> bytes:
        return self.ask(f"GET {self.url}{path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())

    def alloc(self) -> bytes:
        return self.ask(
            f"POST {self.url}{ALLOC_JOB} HTTP/1.1\r\nContent-Length: 2\r\n\r\nTC".encode()
        )

    def connect(self, target: str, payload: bytes = b"") -> bytes:
        return self.ask(f"CONNECT {target} HTTP/1.1\r\n\r\n".encode() + payload, shut=True)


@pytest.fixture
def scene() -> Iterator[Scene]:
    made = Scene()
    try:
        with made.proxy:
            yield made
        for data in made.scheduler.received:  # the token went only where it may
            assert _allowed_request(data), data[:200]
            assert f"Authorization: Bearer {TOKEN}\r\n".encode() in data, data[:200]
            assert data.count(TOKEN.encode()) == 1
        assert made.other.accepted == 0
    finally:
        made.scheduler.close()
        made.other.close()


def _status(answer: bytes) -> bytes:
    assert answer.split(b"\r\n\r\n", 1)[1].count(b"\n") == 1 or answer.startswith(b"HTTP/1.1 2")
    return answer.split(b" ", 2)[1]


def test_a_request_is_rebuilt_and_reaches_the_scheduler_byte_for_byte(scene: Scene) -> None:
    body = b"\x00\x01bincode\r\n\r\nGET /x HTTP/1.1\r\n"
    ask = (
        (
            f"POST {scene.url}{ALLOC_JOB} HTTP/1.1\r\nHost: elsewhere.example\r\n"
            "Authorization: Bearer archwheel-adds-the-token-on-the-host\r\n"
            "Proxy-Authorization: Basic eDp5\r\nProxy-Connection: keep-alive\r\n"
            "Keep-Alive: 5\r\nX-Forwarded-For: 10.0.0.1\r\nCookie: a=b\r\nExpect: 100-continue\r\n"
            "content-type:application/octet-stream  \r\nAccept: */*\r\n"
            f"Content-Length: {len(body)}\r\nConnection: keep-alive\r\n\r\n"
        ).encode()
        + body
        + b"GET /after HTTP/1.1\r\n\r\n"
    )  # a pipelined request after the body
    answer = scene.ask(ask)
    assert answer == http_answer(b"ok")
    sched = f"127.0.0.1:{scene.scheduler.port}"
    assert scene.scheduler.received == [
        f"POST {ALLOC_JOB} HTTP/1.1\r\nHost: {sched}\r\n"
        "Content-Type: application/octet-stream\r\nAccept: */*\r\n"
        f"Content-Length: {len(body)}\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    ]
    assert scene.get(STATUS) == http_answer(b"ok")
    assert (
        scene.scheduler.received[1]
        == (
            f"GET {STATUS} HTTP/1.1\r\nHost: {sched}\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Connection: close\r\n\r\n"
        ).encode()
    )


SMUGGLED = {
    "bare LF hides a second request": b"Accept: */*\nGET /api/v1/scheduler/heartbeat_server "
    b"HTTP/1.1\r\n",
    "bare CR": b"Accept: */*\rX-Evil: 1\r\n",
    "NUL in a value": b"Accept: *\x00/*\r\n",
    "NUL in a name": b"Acc\x00ept: */*\r\n",
    "name not a token": b"Accept(x): */*\r\n",
    "space before the colon": b"Content-Length : 0\r\n",
    "folded line": b"Accept: */*\r\n folded\r\n",
    "two Content-Length": b"Content-Length: 0\r\nContent-Length: 0\r\n",
    "two differing Content-Length": b"Content-Length: 0\r\nContent-Length: 40\r\n",
    "non-ASCII digit": "Content-Length: \u0663\r\n".encode(),
    "superscript digit (latin-1)": b"Content-Length: \xb2\r\n",
    "Content-Length with a sign": b"Content-Length: +0\r\n",
    "chunked": b"Transfer-Encoding: chunked\r\n",
    "chunked beside a length": b"Transfer-Encoding: chunked\r\nContent-Length: 0\r\n",
    "identity coding": b"Transfer-Encoding: identity\r\n",
    "DEL in a value": b"Accept: *\x7f\r\n",
    "not ASCII": b"Accept: caf\xc3\xa9\r\n",
}


@pytest.mark.parametrize("extra", SMUGGLED.values(), ids=SMUGGLED.keys())
def test_a_head_another_reader_could_read_otherwise_is_one_400(scene: Scene, extra: bytes) -> None:
    ask = f"POST {scene.url}{ALLOC_JOB} HTTP/1.1\r\n".encode() + extra + b"\r\n"
    answer = scene.ask(ask)
    assert _status(answer) == b"400", answer
    assert answer.count(b"HTTP/1.1 ") == 1
    time.sleep(0.1)
    assert scene.scheduler.received == [] and scene.proxy.refused_count == 1


BAD_LINES = [
    b"GET  http://S/api/v1/scheduler/status HTTP/1.1",
    b"GET http://S/api/v1/scheduler/status HTTP/1.1 extra",
    b"GET http://S/api/v1/scheduler/status HTTP/2.0",
    b"G(T http://S/api/v1/scheduler/status HTTP/1.1",
    b"GET\thttp://S/api/v1/scheduler/status HTTP/1.1",
    b"GARBAGE",
]


@pytest.mark.parametrize("line", BAD_LINES)
def test_a_request_line_that_is_not_plain_is_one_400(scene: Scene, line: bytes) -> None:
    answer = scene.ask(line.replace(b"S", f"127.0.0.1:{scene.scheduler.port}".encode(), 1)
                       + b"\r\n\r\n")  # fmt: skip
    assert _status(answer) == b"400", answer
    assert scene.scheduler.received == []


PATHS = [
    "/api/v1/scheduler/../../admin",
    "/api/v1/scheduler/%2e%2e/%2e%2e/admin",
    "/api/v1/scheduler/.%2E/status",
    "/api/v1/scheduler/%2e/status",
    "/api/v1/scheduler%2fstatus",
    "/api/v1/scheduler/status%2F..%2Fx",
    "/api/v1/scheduler/./status",
    "/api/v1/scheduler//status",
    "/api/v1/scheduler/status?x=1",
    "/api/v1/scheduler/heartbeat_server",
    "/api/v1/scheduler/job_state/1",
    "/api/v1/scheduler/",
    "/",
    "/api/v1/distserver/run_job/1",
    "/api/v1/scheduler/server_certificate/127.0.0.1:1",
]


@pytest.mark.parametrize("path", PATHS)
def test_paths_off_sccaches_requests_never_reach_the_scheduler(scene: Scene, path: str) -> None:
    answer = scene.get(path)
    assert _status(answer) == b"403", answer
    post = scene.ask(f"POST {scene.url}{path} HTTP/1.1\r\nContent-Length: 0\r\n\r\n".encode())
    assert _status(post) == b"403"
    assert scene.scheduler.received == []


def test_another_virtual_host_or_address_is_refused(scene: Scene) -> None:
    port = scene.scheduler.port
    for target in (f"http://localhost:{port}", f"http://127.0.0.2:{port}",
                   f"http://127.0.0.1:{scene.other.port}", f"http://[::1]:{port}"):  # fmt: skip
        answer = scene.ask(f"GET {target}{STATUS} HTTP/1.1\r\n\r\n".encode())
        assert _status(answer) == b"403", (target, answer)
    assert scene.scheduler.received == []


def test_a_front_answering_200_to_everything_opens_nothing(scene: Scene) -> None:
    target = f"127.0.0.1:{scene.other.port}"
    assert _status(scene.get(f"{CERTIFICATE_PREFIX}{target}")) == b"403"
    assert _status(scene.alloc()) == b"200"  # forwarded; its answer names no server
    scene.answer = lambda _: http_answer(alloc_job_fail())
    assert _status(scene.alloc()) == b"200"
    scene.answer = lambda _: http_answer(target.encode())
    assert _status(scene.alloc()) == b"200"
    scene.answer = lambda _: http_answer(alloc_job_body(target), status=201)
    assert _status(scene.alloc()) == b"201"
    assert scene.proxy.route.servers == frozenset()
    assert _status(scene.connect(target)) == b"403"
    assert _status(scene.get(f"{CERTIFICATE_PREFIX}{target}")) == b"403"
    assert len(scene.scheduler.received) == 4  # the four alloc_job requests only


def test_no_tunnel_to_the_scheduler_even_when_it_names_itself(scene: Scene) -> None:
    own = f"127.0.0.1:{scene.scheduler.port}"
    assert _status(scene.connect(own, b"GET /secret HTTP/1.1\r\n\r\n")) == b"403"
    scene.answer = lambda _: http_answer(alloc_job_body(own))
    scene.alloc()
    scene.answer = lambda _: http_answer(alloc_job_body(f"0.0.0.0:{scene.other.port}"))
    scene.alloc()
    scene.answer = lambda _: http_answer(alloc_job_body(f"169.254.169.254:{scene.other.port}"))
    scene.alloc()
    assert scene.proxy.route.servers == frozenset()
    assert _status(scene.connect(own)) == b"403"
    assert _status(scene.connect(f"0.0.0.0:{scene.other.port}")) == b"403"
    assert len(scene.scheduler.received) == 3


def test_a_server_the_scheduler_allocated_is_reached_and_sees_only_the_tunnel(
    scene: Scene,
) -> None:
    server = Recorder(lambda _: b"server-bytes", raw=True)
    try:
        addr = f"127.0.0.1:{server.port}"
        assert _status(scene.connect(addr)) == b"403"  # not yet
        scene.answer = lambda _: http_answer(alloc_job_body(addr))
        assert scene.alloc() == http_answer(alloc_job_body(addr))
        assert scene.proxy.route.servers == {Endpoint("127.0.0.1", server.port)}
        scene.answer = lambda _: http_answer(b"certificate")
        assert _status(scene.get(f"{CERTIFICATE_PREFIX}{addr}")) == b"200"
        tunnel = scene.connect(addr, b"\x16\x03\x01client-hello")
        assert tunnel == b"HTTP/1.1 200 Connection established\r\n\r\nserver-bytes"
        assert server.received == [b"\x16\x03\x01client-hello"]  # byte for byte, no token
        assert scene.proxy.tunnels == {addr: 1}
        assert _status(scene.connect(f"127.0.0.1:{scene.other.port}")) == b"403"
    finally:
        server.close()


def test_bounds_and_a_scheduler_that_is_down(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(farm_proxy, "HEAD_TIMEOUT_S", 0.5)
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{unused.getsockname()[1]}"
    scene = Scene()
    scene.proxy = FarmProxy(down, TOKEN)
    scene.url = down
    try:
        with scene.proxy:
            assert _status(scene.get(STATUS)) == b"502"
            big = f"GET {down}{STATUS} HTTP/1.1\r\n".encode() + b"A: b\r\n" * 4000 + b"\r\n"
            assert _status(scene.ask(big)) == b"400"
            long_body = f"POST {down}{ALLOC_JOB} HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n"
            assert _status(scene.ask(long_body.encode())) == b"400"
            get_body = f"GET {down}{STATUS} HTTP/1.1\r\nContent-Length: 1\r\n\r\nx"
            assert _status(scene.ask(get_body.encode())) == b"400"
            start = time.monotonic()
            slow = scene.ask(b"GET http://x/ HTTP/1.1\r\n")  # a head that never ends
            assert _status(slow) == b"400" and time.monotonic() - start < 5
            assert scene.proxy.refused_count == 5
            assert all(TOKEN not in line for line in scene.proxy.refused)
    finally:
        scene.scheduler.close()
        scene.other.close()


def _connect_as(path: Path, uid: int, gid: int) -> str:
    """Whether user ``uid:gid`` (no other groups) can connect to the socket at ``path``: a
    forked child drops to it and tries (only system calls between fork and exit)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        code = 2
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            with socket.socket(socket.AF_UNIX) as sock:
                sock.connect(str(path))
            code = 0
        except PermissionError:
            code = 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return {0: "connected", 1: "refused"}.get(os.waitstatus_to_exitcode(status), "failed")


def test_the_socket_is_the_build_users_alone(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        with FarmProxy("http://127.0.0.1:1", TOKEN, owner=(os.getuid(), os.getgid())) as proxy:
            assert stat.S_IMODE(proxy.folder.stat().st_mode) == 0o700
            assert stat.S_IMODE(proxy.path.stat().st_mode) == 0o600
        pytest.skip("another user's socket needs root to make (its check ran as this user)")
    parent = Path(tempfile.mkdtemp(prefix="route-owner-", dir="/tmp"))  # others may pass /tmp
    parent.chmod(0o755)
    build_user, stranger = (1000, 1000), (64123, 64123)
    try:
        with FarmProxy("http://127.0.0.1:1", TOKEN, parent=parent, owner=build_user) as proxy:
            _check_owned(proxy, build_user, stranger)
        assert not proxy.folder.exists()
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def _check_owned(proxy: FarmProxy, build_user: tuple[int, int], stranger: tuple[int, int]
                 ) -> None:  # fmt: skip
    folder, sock = proxy.folder.stat(), proxy.path.stat()
    assert (folder.st_uid, stat.S_IMODE(folder.st_mode)) == (0, 0o711)
    assert (sock.st_uid, sock.st_gid, stat.S_IMODE(sock.st_mode)) == (*build_user, 0o600)
    assert _connect_as(proxy.path, *build_user) == "connected"
    assert _connect_as(proxy.path, *stranger) == "refused"
    assert _connect_as(proxy.path, stranger[0], build_user[1]) == "refused"  # same group
    assert _connect_as(proxy.path, 0, 0) == "connected"  # root can, as everywhere
