"""A real Redis server for the tests: Debian's ``redis-server`` on 127.0.0.1, a free port, a
temporary folder, no persistence; stopped at the end. Missing, the test skips (fails in strict
mode, where CI installs it: ``.ci/run``)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.components import require


@dataclass(frozen=True)
class RedisServer:
    port: int
    folder: Path
    password: str | None = None
    pid: int = 0  # the redis-server process (the fault tests kill it)

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}"

    def cli(self, *args: str) -> str:
        """Ask the server directly (RESP over a socket; redis-cli is not needed)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            parts = (("AUTH", self.password),) if self.password else ()
            answer = b""
            for command in (*parts, args):
                payload = b"*%d\r\n" % len(command) + b"".join(
                    b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in command
                )
                sock.sendall(payload)
                answer = sock.recv(1 << 20)
            return answer.decode(errors="replace")

    def dbsize(self) -> int:
        return int(self.cli("DBSIZE").strip().lstrip(":"))


def free_port() -> int:
    """A TCP port nothing listens on now (bound and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextmanager
def redis_server(password: str | None = None, port: int | None = None) -> Iterator[RedisServer]:
    program = shutil.which("redis-server")
    require(program is not None, "redis-server is not installed (apt-get install redis-server)")
    assert program is not None
    folder = Path(tempfile.mkdtemp(prefix="archwheel-redis-"))
    port = port or free_port()
    args = [
        program, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(folder),
        "--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "redis.log",
    ]  # fmt: skip
    if password:
        args += ["--requirepass", password]
    proc = subprocess.Popen(args, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        server = RedisServer(port, folder, password, proc.pid)
        for _ in range(100):
            try:
                if "PONG" in server.cli("PING"):
                    break
            except OSError:
                time.sleep(0.05)
        else:
            raise AssertionError(f"redis-server did not answer on port {port}")
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)
