"""``archwheel build --dist-scheduler`` end to end: the example recipe built in Docker with
``--no-cache``, its compile jobs sent through archwheel's farm route to the session's real farm
(tests.support.farm: a scheduler and two build servers on 127.0.0.1).

Shown: the build passes its audit gate with exactly the requested archs; the scheduler assigned
jobs to both build servers and the provenance counts jobs on both; the token is in no output,
log or provenance; and the wheel is byte-identical to a local ``--no-cache`` build of the same
request (the jobs run the container's own toolchain, which sccache packages and sends). A
compile step in that container looking for a way out reaches nothing but what the route
allows.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from archwheel.binary.scan.inputs import scan_path
from archwheel.facts.arch import CodeKind
from tests.support.farm import Farm
from tests.support.listener import Listener

CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]
ARCH = "8.0;9.0"
ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "cuda-kernels"
RECIPES = ROOT / "recipes"

pytestmark = [pytest.mark.farm, pytest.mark.docker, pytest.mark.nvcc, pytest.mark.slow]


@dataclass(frozen=True)
class Built:
    """One build's outcome: its JSON answer, the wheel, its provenance, and all it printed."""

    result: dict[str, object]
    wheel: Path
    provenance: dict[str, object]
    output: str


@pytest.fixture(scope="module")
def env(docker_engine: str) -> dict[str, str]:
    environ = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    made = subprocess.run(
        [*CLI, "base-image"], env=environ, capture_output=True, text=True, check=False
    )
    assert made.returncode == 0, made.stderr[-2000:]
    return environ


def _build(env: dict[str, str], out: Path, *args: str, recipe: str = "example") -> Built:
    label = f"archwheel.test={uuid.uuid4().hex}"
    proc = subprocess.run(
        [*CLI, "build", "--recipe", recipe, "--arch", ARCH, "--no-cache", "--out", str(out),
         "--format", "json", *args],
        env={**env, "ARCHWHEEL_RUN_LABEL": label}, capture_output=True, text=True,
        timeout=3000, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout)
    logs = "".join(p.read_text(errors="replace") for p in (out / "logs").glob("*"))
    provenance = json.loads(Path(result["provenance"]).read_text())
    return Built(result, Path(result["wheel"]), provenance, proc.stdout + proc.stderr + logs)


def _sass(wheel: Path) -> set[str]:
    """The SASS and PTX the wheel's device code holds (as the build tests read it)."""
    inventory = scan_path(wheel)
    assert inventory.complete, [p.one_line() for p in inventory.problems]
    return {
        entry.target.name(entry.kind)
        for library in inventory.libraries
        for entry in library.entries
        if entry.kind in (CodeKind.SASS, CodeKind.PTX)
    }


def _device_entries(wheel: Path) -> list[tuple[str, int, int]]:
    """Each fatbin entry's target and sizes, stored and uncompressed: device code that differs
    by a byte of size shows here."""
    inventory = scan_path(wheel)
    return sorted(
        (entry.target.name(entry.kind), entry.stored_bytes, entry.uncompressed_bytes)
        for library in inventory.libraries
        for entry in library.entries
    )


@pytest.fixture(scope="module")
def farm_build(
    env: dict[str, str], compile_farm: Farm, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Built, dict[str, int]]:
    folder = tmp_path_factory.mktemp("farm-build")
    token = folder / "farm-token"
    token.write_text(compile_farm.client_token + "\n")
    since = compile_farm.last_job()
    built = _build(
        env, folder / "dist", "--dist-scheduler", compile_farm.scheduler_url,
        "--dist-token-file", str(token), "--dist-required",
    )  # fmt: skip
    return built, dict(compile_farm.jobs_per_server(since))


def test_a_farm_build_sends_jobs_to_both_servers_and_audits(
    farm_build: tuple[Built, dict[str, int]], compile_farm: Farm
) -> None:
    built, assigned = farm_build
    servers = {s.addr for s in compile_farm.servers}
    assert set(assigned) == servers and all(n > 0 for n in assigned.values()), assigned
    farm = built.provenance["farm"]
    assert isinstance(farm, dict) and farm["used"] is True, farm
    jobs = farm["jobs"]
    assert set(jobs["servers"]) == servers and all(n > 0 for n in jobs["servers"].values())
    assert farm["route"]["refused"] == 0, farm["route"]
    assert _sass(built.wheel) == {"sm_80", "sm_90"}, _sass(built.wheel)
    assert compile_farm.client_token not in built.output
    assert compile_farm.client_token not in json.dumps(built.provenance)
    print(f"farm jobs: scheduler {assigned}; provenance {jobs}")


def test_a_farm_build_against_a_local_build(
    farm_build: tuple[Built, dict[str, int]], env: dict[str, str], tmp_path: Path
) -> None:
    """The same request built locally: the same device code, and the same wheel, byte for byte
    (the members that differ are printed and named in the failure)."""
    built, _ = farm_build
    local = _build(env, tmp_path / "dist")
    assert local.provenance["farm"] is None
    with zipfile.ZipFile(built.wheel) as a, zipfile.ZipFile(local.wheel) as b:
        names = sorted(a.namelist())
        assert names == sorted(b.namelist())
        differing = [n for n in names if a.read(n) != b.read(n)]
    identical = built.wheel.read_bytes() == local.wheel.read_bytes()
    print(f"farm wheel identical to the local one: {identical}; differing members: {differing}")
    assert _device_entries(built.wheel) == _device_entries(local.wheel)
    # The compile jobs run the container's own toolchain, packaged by sccache, on the servers
    assert identical, differing


# What the compile step of the probing project runs before it compiles: every way out it can
# find, the route's own forwarder port included. One line, ``ARCHWHEEL-PROBE <json>``.
PROBE = r"""
def _archwheel_probe():
    import glob, json, socket
    seen = {}

    def connect(name, host, port):
        try:
            socket.create_connection((host, port), timeout=3).close()
            seen[name] = "connected"
        except OSError as exc:
            seen[name] = f"{type(exc).__name__}: {exc}"

    def through_route(name, request):
        ports = glob.glob("/build/.archwheel/*.farm-port")
        if not ports:
            seen[name] = "no route"
            return
        with open(ports[0]) as f:
            port = int(f.read())
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(request)
                seen[name] = sock.recv(200).decode("latin-1").split("\r\n")[0]
        except OSError as exc:
            seen[name] = f"{type(exc).__name__}: {exc}"

    connect("loopback", "127.0.0.1", LISTENER_PORT)
    connect("host", HOST_IP, LISTENER_PORT)
    through_route("connect", b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % LISTENER_PORT)
    through_route("connect_host", b"CONNECT %s:%d HTTP/1.1\r\n\r\n" % (HOST_IP.encode(), LISTENER_PORT))
    through_route("get", b"GET http://127.0.0.1:%d/ HTTP/1.1\r\nHost: x\r\n\r\n" % LISTENER_PORT)
    through_route("scheduler_off_api", b"GET SCHEDULER/ HTTP/1.1\r\nHost: x\r\n\r\n")
    print("ARCHWHEEL-PROBE " + json.dumps(seen), flush=True)
"""


def _host_ip() -> str:
    """This machine's address on its default route (no packet is sent), else its name's."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("192.0.2.1", 9))
            return str(sock.getsockname()[0])
        except OSError:
            return socket.gethostbyname(socket.gethostname())


def _probing_project(folder: Path, port: int, host_ip: str, scheduler: str) -> Path:
    """A copy of the example whose build step runs ``PROBE`` first; its recipe file."""
    project = folder / "cuda-kernels"
    shutil.copytree(EXAMPLE, project)
    backend = project / "backend" / "archwheel_example_backend.py"
    probe = PROBE.replace("LISTENER_PORT", str(port)).replace("HOST_IP", repr(host_ip))
    probe = probe.replace("SCHEDULER", scheduler)
    text = backend.read_text().replace(
        "    library = _compile_and_link()\n",
        "    _archwheel_probe()\n    library = _compile_and_link()\n",
    )
    backend.write_text(text + probe)
    recipe = (RECIPES / "example.toml").read_text()
    recipe = recipe.replace('name = "example"', 'name = "farm-probe"')
    recipe = recipe.replace('path = "../examples/cuda-kernels"', f"path = {str(project)!r}")
    path = folder / "farm-probe.toml"
    path.write_text(recipe)
    return path


def test_a_compile_step_in_the_container_reaches_nothing_but_the_farm(
    env: dict[str, str], compile_farm: Farm, tmp_path: Path
) -> None:
    """The compile step of a farm build tries every way out it can find: a listener of this
    machine at loopback and at its own address, and the farm route's forwarder port (which it
    finds in the work folder) with ``CONNECT`` and a plain request to that listener and a
    request to the scheduler off its API. Direct connections fail (``--network none``), the
    route answers each with 403, the listener never sees a connection, and the build's jobs
    still ran on the farm."""
    listener = Listener("0.0.0.0")  # every address: the host IP too
    host_ip = _host_ip()
    scheduler = compile_farm.scheduler_url.replace("https://", "http://")
    try:
        recipe = _probing_project(tmp_path, listener.port, host_ip, scheduler)
        token = tmp_path / "farm-token"
        token.write_text(compile_farm.client_token + "\n")
        built = _build(
            env, tmp_path / "dist", "--dist-scheduler", compile_farm.scheduler_url,
            "--dist-token-file", str(token), "--dist-required", recipe=str(recipe),
        )  # fmt: skip
    finally:
        listener.close()
    marker = "ARCHWHEEL-PROBE "
    lines = [ln for ln in built.output.splitlines() if ln.lstrip().startswith(marker)]
    assert lines, built.output[-3000:]
    # The build log holds the whole line (the progress display may cut it to the terminal).
    seen = json.loads(max(lines, key=len).split(marker, 1)[1])
    print(f"host address {host_ip}; the compile step saw: {seen}")
    assert listener.accepted == 0, seen
    assert seen["loopback"].startswith("ConnectionRefusedError"), seen
    assert seen["host"] != "connected", seen
    for name in ("connect", "connect_host", "get", "scheduler_off_api"):
        assert seen[name].startswith("HTTP/1.1 403"), (name, seen)
    farm = built.provenance["farm"]
    assert isinstance(farm, dict) and farm["used"] is True, farm
    assert farm["route"]["refused"] >= 4, farm["route"]
    assert sum(farm["jobs"]["servers"].values()) > 0, farm["jobs"]
