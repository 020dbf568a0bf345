"""The compile container's route to a farm, on the host without Docker: sccache's daemon with
``HTTP_PROXY``/``HTTPS_PROXY`` naming the in-container forwarder (the same script the compile
container runs, here on the host) to archwheel's ``FarmProxy`` on a Unix socket, and the real
farm of the session (tests.support.farm). The compile's jobs run on the build servers through
the proxy, with the token added on the host (the client's configuration holds a placeholder);
a request anywhere else is refused and never reaches the address asked for."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from archwheel.effects.farm_proxy import PLACEHOLDER_TOKEN, FarmProxy, container_scheduler_url
from archwheel.effects.farm_route import parse_authority
from archwheel.wheelbuild.compile.dist_farm import DistFarm, probe_scheduler, write_client_config
from archwheel.wheelbuild.compile.farm_record import farm_jobs
from archwheel.wheelbuild.compile.sccache_launcher import FORWARDER_SCRIPT, farm_route_script
from tests.support.components import find_nvcc, require, sccache
from tests.support.farm import Farm, kernel_sources, sccache_client
from tests.support.listener import Listener
from tests.support.tls_front import tls_front

pytestmark = [pytest.mark.farm]


@pytest.fixture
def proxy(compile_farm: Farm) -> Iterator[FarmProxy]:
    """archwheel's proxy to the session's farm, holding the client token."""
    with FarmProxy(compile_farm.scheduler_url, compile_farm.client_token) as running:
        yield running


@contextlib.contextmanager
def _forwarder(proxy: FarmProxy, folder: Path) -> Iterator[int]:
    """The in-container forwarder (``FORWARDER_SCRIPT``) to ``proxy``, run on the host: its
    loopback port."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "forward.py"
    script.write_text(FORWARDER_SCRIPT)
    port_file = folder / "forward.port"
    proc = subprocess.Popen([sys.executable, str(script), str(proxy.path), str(port_file)])
    try:
        end = time.monotonic() + 10
        while not (port_file.is_file() and port_file.read_text()) and time.monotonic() < end:
            time.sleep(0.05)
        assert port_file.is_file(), "the forwarder did not start"
        yield int(port_file.read_text())
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture
def forwarded(proxy: FarmProxy, tmp_path: Path) -> Iterator[int]:
    """The loopback port of the in-container forwarder to the proxy's socket, run here on the
    host as the compile container runs it."""
    with _forwarder(proxy, tmp_path) as port:
        yield port


def _ask(port: int, request: bytes) -> bytes:
    """Send ``request`` to the forwarder's port, read the answer to its end."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


@pytest.mark.nvcc
def test_a_compile_reaches_the_farm_only_through_the_proxy(
    compile_farm: Farm, proxy: FarmProxy, forwarded: int, tmp_path: Path
) -> None:
    nvcc = find_nvcc()
    require(nvcc is not None, "nvcc is not installed")
    assert nvcc is not None
    url = container_scheduler_url(compile_farm.scheduler_url)
    config = write_client_config(
        tmp_path / "sccache-dist.toml",
        DistFarm(url, PLACEHOLDER_TOKEN),  # the client never holds the token
        str(tmp_path / "toolchains"),
    )
    assert compile_farm.client_token not in config.read_text()
    via = f"http://127.0.0.1:{forwarded}"
    env = {"HTTP_PROXY": via, "HTTPS_PROXY": via, "NO_PROXY": "", "no_proxy": ""}
    since = compile_farm.last_job()
    with sccache_client(tmp_path / "client", sccache(), nvcc, config, env) as client:
        objects = client.compile(kernel_sources(tmp_path / "src", 1), tmp_path / "out")
        jobs = farm_jobs(client.stats())
    assert objects[0].stat().st_size > 0
    assigned = compile_farm.jobs_per_server(since)
    # Every job the scheduler handed out ran on its server (none fell back to local), and the
    # only connections to servers went through the proxy, to servers the scheduler vouched for.
    assert sum(assigned.values()) >= 5 and jobs.errors == 0, (assigned, jobs)
    assert sum(jobs.per_server.values()) == sum(assigned.values()), (assigned, jobs)
    servers = {parse_authority(addr) for addr in assigned}
    assert servers <= proxy.route.servers
    assert {str(s) for s in servers} <= set(proxy.tunnels), proxy.tunnels
    assert proxy.scheduler_requests >= sum(assigned.values())
    assert proxy.refused_count == 0, proxy.refused
    print(f"jobs per server: {dict(assigned)}; tunnels: {proxy.tunnels}")


def test_every_other_address_is_refused_and_never_reached(
    compile_farm: Farm, proxy: FarmProxy, forwarded: int
) -> None:
    other = Listener()
    try:
        target = f"127.0.0.1:{other.port}"
        scheduler = container_scheduler_url(compile_farm.scheduler_url)
        asks = [
            f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n",
            f"GET http://{target}/ HTTP/1.1\r\nHost: {target}\r\n\r\n",
            f"POST http://{target}/api/v1/scheduler/alloc_job HTTP/1.1\r\n"
            "Content-Length: 0\r\n\r\n",
            # A build server the scheduler has not vouched for (through this proxy) yet.
            f"CONNECT {compile_farm.servers[0].addr} HTTP/1.1\r\n\r\n",
            # The scheduler, off its API.
            f"GET {scheduler}/etc/passwd HTTP/1.1\r\n\r\n",
        ]
        for ask in asks:
            answer = _ask(forwarded, ask.encode())
            assert answer.startswith(b"HTTP/1.1 403 "), (ask, answer[:200])
            assert answer.count(b"\n", answer.index(b"\r\n\r\n") + 4) == 1  # one line
        # The certificate of the other address: the scheduler allocated no job to it, so the
        # request never reaches the scheduler, and a CONNECT to it is still refused.
        cert = f"GET {scheduler}/api/v1/scheduler/server_certificate/{target} HTTP/1.1\r\n\r\n"
        assert _ask(forwarded, cert.encode()).startswith(b"HTTP/1.1 403 ")
        assert parse_authority(target) not in proxy.route.servers
        connect = f"CONNECT {target} HTTP/1.1\r\n\r\n".encode()
        assert _ask(forwarded, connect).startswith(b"HTTP/1.1 403 ")
        # The scheduler itself through a tunnel: its API goes as plain requests only.
        own = f"CONNECT {scheduler.removeprefix('http://')} HTTP/1.1\r\n\r\n".encode()
        assert _ask(forwarded, own).startswith(b"HTTP/1.1 403 ")
        time.sleep(0.5)
        assert other.accepted == 0
        assert proxy.refused_count == len(asks) + 3 and proxy.scheduler_requests == 0
        assert all(compile_farm.client_token not in line for line in proxy.refused)
    finally:
        other.close()


def test_the_scheduler_gets_the_hosts_token_not_the_containers(
    compile_farm: Farm, proxy: FarmProxy, forwarded: int
) -> None:
    """``alloc_job`` with the container's placeholder is let through with the host's token:
    the scheduler checks the token first (401 for a wrong one), then refuses the empty body
    (400), so no job is made. Without the proxy the placeholder is refused (401)."""
    path = "/api/v1/scheduler/alloc_job"
    ask = (
        f"POST {container_scheduler_url(compile_farm.scheduler_url)}{path} HTTP/1.1\r\n"
        f"Authorization: Bearer {PLACEHOLDER_TOKEN}\r\nContent-Length: 0\r\n\r\n"
    ).encode()
    assert _ask(forwarded, ask).split(b" ")[1] == b"400"
    host = compile_farm.scheduler_url.removeprefix("http://")
    direct = ask.replace(f"http://{host}".encode(), b"", 1)
    sched = parse_authority(host)
    with socket.create_connection((sched.host, sched.port), timeout=10) as sock:
        sock.sendall(direct.replace(b"HTTP/1.1\r\n", f"HTTP/1.1\r\nHost: {host}\r\n".encode(), 1))
        assert sock.recv(4096).split(b" ")[1] == b"401"


def test_the_start_steps_farm_lines_route_the_daemon_through_the_proxy(
    compile_farm: Farm, proxy: FarmProxy, tmp_path: Path
) -> None:
    """``farm_route_script`` (the compile phase's start step, here run by ``sh`` on the host
    with the socket's path as the container would have it mounted) starts the forwarder and
    exports the proxy variables; through them the scheduler answers, another address does not."""
    forwarder = tmp_path / "forward.py"
    forwarder.write_text(FORWARDER_SCRIPT)
    script = farm_route_script(sys.executable, str(forwarder)) + (
        'echo "via=$HTTP_PROXY $HTTPS_PROXY $https_proxy no=[$NO_PROXY$no_proxy$ALL_PROXY]"\n'
    )
    shown = subprocess.run(
        ["sh", "-c", script], env={"ARCHWHEEL_FARM_SOCKET": str(proxy.path), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    pid = int(Path(f"{forwarder}.farm-port.pid").read_text())
    try:
        assert "compile farm: through archwheel's route" in shown.stdout, shown
        via = shown.stdout.split("via=", 1)[1].split()[0]
        assert shown.stdout.count(via) == 3 and "no=[]" in shown.stdout, shown.stdout
        port = int(via.rsplit(":", 1)[1])
        status = f"GET {container_scheduler_url(compile_farm.scheduler_url)}"
        answer = _ask(
            port,
            f"{status}/api/v1/scheduler/status HTTP/1.1\r\nAccept: application/json\r\n\r\n".encode(),
        )
        assert answer.startswith(b"HTTP/1.1 200") and b"num_servers" in answer
        assert _ask(port, b"CONNECT 127.0.0.1:9 HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 403")
    finally:
        os.kill(pid, signal.SIGKILL)


def test_without_the_socket_the_start_step_exports_nothing(tmp_path: Path) -> None:
    shown = subprocess.run(
        ["sh", "-c", farm_route_script(sys.executable, str(tmp_path / "f.py")) + "env"],
        env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    assert "PROXY" not in shown.stdout.upper() and "compile farm" not in shown.stdout


@pytest.mark.nvcc
def test_an_https_scheduler_through_the_route(
    compile_farm: Farm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scheduler behind TLS (as docs/building-at-scale.md advises; an authority of the
    test's own, trusted through ``SSL_CERT_FILE``): archwheel's probe reads it over https, and
    a compile through the route runs every job on the farm while the container's sccache
    speaks plain HTTP to the proxy, which speaks TLS to the scheduler and adds the token. With
    the authority not trusted the probe and the proxy each say so in one line and nothing is
    sent (the compile falls back to local)."""
    nvcc = find_nvcc()
    require(nvcc is not None, "nvcc is not installed")
    assert nvcc is not None
    plain = parse_authority(compile_farm.scheduler_url.removeprefix("http://"))
    with tls_front(plain.port, tmp_path / "tls") as front:
        monkeypatch.setenv("SSL_CERT_FILE", str(front.ca_file))
        status = probe_scheduler(DistFarm(front.url, compile_farm.client_token), 10)
        assert status.reached and status.servers == 2 and status.token_accepted, status
        url = container_scheduler_url(front.url)
        assert url == front.url.replace("https://", "http://")
        config = write_client_config(
            tmp_path / "sccache-dist.toml", DistFarm(url, PLACEHOLDER_TOKEN),
            str(tmp_path / "toolchains"),
        )  # fmt: skip
        since = compile_farm.last_job()
        with (
            FarmProxy(front.url, compile_farm.client_token) as proxy,
            _forwarder(proxy, tmp_path / "fwd") as port,
        ):
            via = f"http://127.0.0.1:{port}"
            env = {"HTTP_PROXY": via, "HTTPS_PROXY": via, "NO_PROXY": "", "no_proxy": ""}
            with sccache_client(tmp_path / "client", sccache(), nvcc, config, env) as client:
                objects = client.compile(kernel_sources(tmp_path / "src", 1), tmp_path / "out")
                jobs = farm_jobs(client.stats())
        assigned = compile_farm.jobs_per_server(since)
        print(f"https: jobs {dict(assigned)}; sccache {jobs}; TLS handshakes {front.handshakes}")
        assert objects[0].stat().st_size > 0
        assert sum(assigned.values()) >= 5 and jobs.errors == 0, (assigned, jobs)
        assert jobs.distributed == sum(assigned.values()), (assigned, jobs)
        assert proxy.refused_count == 0, proxy.refused
        assert front.handshakes >= proxy.scheduler_requests >= sum(assigned.values())

        # The same scheduler, its authority not trusted.
        monkeypatch.delenv("SSL_CERT_FILE")
        status = probe_scheduler(DistFarm(front.url, compile_farm.client_token), 10)
        assert not status.reached and "certificate verify failed" in status.why, status
        assert "\n" not in status.why and compile_farm.client_token not in status.why
        with (
            FarmProxy(front.url, compile_farm.client_token) as proxy,
            _forwarder(proxy, tmp_path / "fwd2") as port,
        ):
            ask = f"GET {url}/api/v1/scheduler/status HTTP/1.1\r\n\r\n".encode()
            answer = _ask(port, ask)
        assert answer.startswith(b"HTTP/1.1 502 "), answer[:300]
        assert b"certificate verify failed" in answer, answer[:300]
        assert compile_farm.client_token.encode() not in answer
