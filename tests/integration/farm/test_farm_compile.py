"""sccache nvcc against a real sccache-dist farm (tests.support.farm: a scheduler and two build
servers on 127.0.0.1), with the client configuration archwheel writes (wheelbuild.compile.dist_farm):
jobs run on both servers; archwheel's probe sees the farm, refuses a wrong token and warns for a
scheduler it cannot reach, where sccache compiles locally; a build server killed mid-compile
leaves every compile succeeding (its jobs run locally) and says so in sccache's log."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from archwheel.errors import UsageError
from archwheel.wheelbuild.compile.dist_farm import (
    DistFarm,
    check_farm,
    probe_scheduler,
    write_client_config,
)
from archwheel.wheelbuild.compile.farm_record import farm_jobs
from tests.support.components import find_nvcc, require, sccache
from tests.support.farm import Farm, SccacheClient, kernel_sources, sccache_client
from tests.support.redis_server import free_port

pytestmark = [pytest.mark.farm, pytest.mark.nvcc]

FALLBACK = "Could not perform distributed compile, falling back to local"


@pytest.fixture(scope="module")
def tools() -> tuple[Path, Path]:
    nvcc = find_nvcc()
    require(nvcc is not None, "nvcc is not installed")
    assert nvcc is not None
    return sccache(), nvcc


def _config(folder: Path, farm: DistFarm) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_client_config(folder / "sccache-dist.toml", farm, str(folder / "toolchains"))


@pytest.fixture
def farm_client(
    compile_farm: Farm, tools: tuple[Path, Path], tmp_path: Path
) -> Iterator[SccacheClient]:
    """A local sccache daemon sending jobs to the session's farm."""
    config = _config(tmp_path, DistFarm(compile_farm.scheduler_url, compile_farm.client_token))
    with sccache_client(tmp_path / "client", *tools, config) as client:
        yield client


def test_probe_sees_both_servers_and_accepts_the_token(compile_farm: Farm) -> None:
    farm = DistFarm(compile_farm.scheduler_url, compile_farm.client_token)
    status = probe_scheduler(farm, 5)
    assert status.reached and status.servers == 2 and status.token_accepted is True
    lines: list[str] = []
    assert check_farm(farm, lines.append) == status and lines == []


def test_jobs_run_on_both_servers(
    compile_farm: Farm, farm_client: SccacheClient, tmp_path: Path
) -> None:
    since = compile_farm.last_job()
    sources = kernel_sources(tmp_path / "src", 4)
    objects = farm_client.compile(sources, tmp_path / "out")
    assert all(obj.stat().st_size > 0 for obj in objects)
    per_server = compile_farm.jobs_per_server(since)
    addrs = {server.addr for server in compile_farm.servers}
    assert set(per_server) == addrs, per_server
    assert all(per_server[addr] > 0 for addr in addrs)
    jobs = farm_jobs(farm_client.stats())
    # sccache's own count per server agrees with what the scheduler handed out: each job
    # assigned ran there, or failed there and ran locally (counted in dist_errors).
    assert set(jobs.per_server) <= addrs and sum(jobs.per_server.values()) > 0
    for addr, count in jobs.per_server.items():
        assert count <= per_server[addr]
    assert sum(jobs.per_server.values()) + jobs.errors == sum(per_server.values())
    print(f"jobs per server (scheduler): {dict(per_server)}; sccache: {jobs}")


def _section(obj: Path, name: str) -> bytes:
    objcopy = shutil.which("objcopy")
    require(objcopy is not None, "objcopy (binutils) is not installed")
    assert objcopy is not None
    out = obj.with_suffix("." + name.strip("."))
    subprocess.run([objcopy, "-O", "binary", f"--only-section={name}", str(obj), str(out)],
                   check=True)  # fmt: skip
    return out.read_bytes()


def test_a_farm_compile_is_the_local_sccache_compile_byte_for_byte(
    compile_farm: Farm, farm_client: SccacheClient, tools: tuple[Path, Path], tmp_path: Path
) -> None:
    """Every job of each nvcc call ran on the farm (cudafe++, cicc and ptxas per arch, the host
    g++), and each object is byte for byte a local sccache compile's: device code and host code.
    The host code holds only because archwheel's client configuration sets
    ``rewrite_includes_only`` (the server gets the includes pasted in and expands macros
    itself); with fully preprocessed source the server's g++ put one ``nop`` more in nvcc's
    ``____nv_dummy_param_ref`` (sccache 0.16.0, nvcc 13.0, g++ 12)."""
    sources = kernel_sources(tmp_path / "src", 2)
    since = compile_farm.last_job()
    remote = farm_client.compile(sources, tmp_path / "farm")
    jobs = farm_jobs(farm_client.stats())
    print(f"scheduler: {dict(compile_farm.jobs_per_server(since))}; sccache: {jobs}")
    # 6 jobs a file: cudafe++, cicc and ptxas for each of 2 archs, the host g++.
    assert jobs.errors == 0 and jobs.distributed == 6 * len(sources), jobs
    with sccache_client(tmp_path / "local", *tools, None) as local:
        here = local.compile(sources, tmp_path / "here")
        assert farm_jobs(local.stats()).per_server == {}
    for a, b in zip(remote, here, strict=True):
        fatbin = _section(a, ".nv_fatbin")
        assert len(fatbin) > 1000 and fatbin == _section(b, ".nv_fatbin"), a.name
        assert a.read_bytes() == b.read_bytes(), f"{a.name}: the host code differs"


def test_unreachable_scheduler_warns_once_and_compiles_locally(
    tools: tuple[Path, Path], tmp_path: Path
) -> None:
    farm = DistFarm(f"http://127.0.0.1:{free_port()}", "any-token")
    lines: list[str] = []
    status = check_farm(farm, lines.append, timeout_s=5)
    assert not status.reached
    assert len(lines) == 1 and "cannot be reached" in lines[0] and "compiling locally" in lines[0]
    sources = kernel_sources(tmp_path / "src", 1)
    with sccache_client(tmp_path / "down", *tools, _config(tmp_path / "cfg", farm)) as down:
        objects = down.compile(sources, tmp_path / "out")
        jobs = farm_jobs(down.stats())
    assert objects[0].stat().st_size > 0 and jobs.per_server == {}
    assert jobs.local > 0


def test_wrong_token_is_refused_with_one_line(compile_farm: Farm) -> None:
    farm = DistFarm(compile_farm.scheduler_url, "not-" + compile_farm.client_token)
    assert probe_scheduler(farm, 5).token_accepted is False
    with pytest.raises(UsageError) as caught:
        check_farm(farm, print)
    assert str(caught.value) == (
        f"compile farm {compile_farm.scheduler_url} refused the token of --dist-token-file"
    )
    assert compile_farm.client_token not in str(caught.value) + str(caught.value.hint)


def test_server_killed_mid_compile_leaves_the_compile_succeeding(
    compile_farm: Farm, farm_client: SccacheClient, tmp_path: Path
) -> None:
    since = compile_farm.last_job()
    victim = compile_farm.servers[1]
    killed = threading.Event()

    def kill_when_it_has_a_job() -> None:
        end = time.monotonic() + 120
        while time.monotonic() < end:
            if compile_farm.jobs_per_server(since)[victim.addr] > 0:
                compile_farm.kill_server(victim)
                killed.set()
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=kill_when_it_has_a_job)
    watcher.start()
    try:
        objects = farm_client.compile(kernel_sources(tmp_path / "src", 4), tmp_path / "out")
    finally:
        watcher.join()
        if victim.proc is None:
            compile_farm.start_server(victim)
            compile_farm.wait_servers(2)
    assert killed.is_set(), "no job went to the second server"
    assert all(obj.stat().st_size > 0 for obj in objects)
    jobs = farm_jobs(farm_client.stats())
    assert jobs.errors > 0 and FALLBACK in farm_client.log.read_text(errors="replace")
    print(f"after the kill: {jobs}")
