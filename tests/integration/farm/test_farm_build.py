"""``archwheel build --dist-scheduler`` end to end: the example recipe built in Docker with
``--no-cache``, its compile jobs sent through archwheel's farm route to the session's real farm
(tests.support.farm: a scheduler and two build servers on 127.0.0.1).

Shown: the build passes its audit gate with exactly the requested archs; the scheduler assigned
jobs to both build servers and the provenance counts jobs on both; the token is in no output,
log or provenance; and the wheel is byte-identical to a local ``--no-cache`` build of the same
request (the jobs run the container's own toolchain, which sccache packages and sends; a host
compiler other than the container's, as in a host-side farm test, was seen to add one ``nop``).
"""

from __future__ import annotations

import json
import os
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

CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]
ARCH = "8.0;9.0"

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


def _build(env: dict[str, str], out: Path, *args: str) -> Built:
    label = f"archwheel.test={uuid.uuid4().hex}"
    proc = subprocess.run(
        [*CLI, "build", "--recipe", "example", "--arch", ARCH, "--no-cache", "--out", str(out),
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
