"""The compile farm wired into a build, without containers: the request's options checked when
the plan is made, the plan's farm row and start-step variables, the runner probing the
scheduler before compiling (a wrong token, an unreachable farm, ``--dist-required``), the farm
route started beside the build and mounted into the compile phase only, the container's client
configuration, provenance's ``farm`` record, and the token nowhere in what a container is
given (its ``run`` flags, each step's command and variables), the log or the provenance.

The scheduler is a stand-in on 127.0.0.1 (``SchedulerStandIn``): a real HTTP server answering
the two requests archwheel's probe makes (status; a job request, 401 for a wrong token, as
sccache-dist's scheduler does). The build in containers is replaced as in
test_runner_stages.py; a real farm and a real build are in tests/integration/farm.
"""

from __future__ import annotations

import io
import json
import stat
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import MappingProxyType

import pytest

from archwheel.effects.engine import ContainerEngine, ContainerSpec
from archwheel.effects.engine_settings import EngineSettings
from archwheel.effects.farm_proxy import PLACEHOLDER_TOKEN
from archwheel.effects.settings import Settings
from archwheel.errors import UsageError
from archwheel.exit_codes import ExitCode, exit_code_for
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild import BuildOutput, BuildPlan, BuildRequest, build_wheel
from archwheel.wheelbuild import runner as runner_module
from archwheel.wheelbuild.compile.dist_farm import (
    CLIENT_CONFIG,
    FARM_MOUNT,
    DistFarm,
    FarmUnavailable,
)
from archwheel.wheelbuild.images.builder_image import BuilderImage, Toolchain
from archwheel.wheelbuild.run.farm_build import (
    farm_record,
    without_farm,
    write_container_config,
)
from archwheel.wheelbuild.run.stages import Timings
from archwheel.wheelbuild.run.workfolder import Built, WorkFolder
from archwheel.wheelbuild.runner import BuildRunner
from archwheel.wheelbuild.wheel.gate import GateVerdict
from archwheel.wheelbuild.wheel.repair import spec_for_recipe
from tests.support.index_wheels import make_dist
from tests.support.redis_server import free_port

TOOLCHAIN = Toolchain(
    nvcc="13.0.88", cuda=CudaVersion.parse("13.0"), gcc="12.2.0", python="3.11.2", pip="24.0",
    sccache="0.16.0", glibc="2.36", os="debian 12", cuda_home="/usr/local/cuda", source="pypi",
    raw=MappingProxyType({}),
)  # fmt: skip


class FakeEngine:
    """The engine's two questions of a run, answered; no container is made through it."""

    def version(self) -> str:
        return "27.0"

    def repo_digests(self, reference: str) -> list[str]:
        return []


SECRET = "farm-SECRET-token-1234"
STATS = {
    "stats": {
        "compilations": 9,
        "dist_compiles": {"10.0.0.1:10501": 3, "10.0.0.2:10501": 4},
        "dist_errors": 1,
    }
}


# sccache-dist 0.16.0's answer to a job request with a good token and no body
REFUSED_EMPTY_JOB = b'{"description":"the request didn\'t have a binary content type","cause":null}'


class SchedulerStandIn:
    """The scheduler's two probe answers on 127.0.0.1, as sccache-dist 0.16.0 gives them: its
    status (``servers`` build servers) and a job request, 401 unless it carries ``token``, else
    400 (the empty request) with the scheduler's error body."""

    def __init__(self, token: str, servers: int = 2) -> None:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status = {"num_servers": stand_in.servers, "num_cpus": 8, "in_progress": 0}
                body = json.dumps(status).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                stand_in.seen_auth.append(self.headers.get("Authorization", ""))
                ok = self.headers.get("Authorization") == f"Bearer {stand_in.token}"
                body = REFUSED_EMPTY_JOB if ok else b"Fixed token mismatch"
                self.send_response(400 if ok else 401)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.token = token
        self.servers = servers
        self.seen_auth: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> SchedulerStandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scheduler() -> Iterator[SchedulerStandIn]:
    with SchedulerStandIn(SECRET) as stand_in:
        yield stand_in


def _token_file(tmp_path: Path, token: str = SECRET) -> Path:
    path = tmp_path / "farm-token"
    path.write_text(token + "\n")
    return path


def _plan(tmp_path: Path, url: str, token_file: Path | None, **request: object) -> BuildPlan:
    fields = {
        "recipe": "example",
        "out": tmp_path / "out",
        "plan_only": True,
        "dist_scheduler": url,
        "dist_token_file": token_file,
        **request,
    }
    return build_wheel(BuildRequest(**fields)).plan  # type: ignore[arg-type]


class FarmWork:
    """The build in containers, replaced: what the runner gave it (the plan, the farm route's
    folder and whether its socket was there while building), and sccache's statistics."""

    def __init__(self) -> None:
        self.plans: list[BuildPlan] = []
        self.folders: list[Path | None] = []
        self.socket_there: list[bool] = []

    def build_once(
        self,
        plan: BuildPlan,
        builder: BuilderImage,
        staging: Path,
        *_: object,
        farm_folder: Path | None = None,
    ) -> Built:
        self.plans.append(plan)
        self.folders.append(farm_folder)
        self.socket_there.append(
            farm_folder is not None and stat.S_ISSOCK((farm_folder / "farm.sock").stat().st_mode)
        )
        wheel = make_dist(staging, "demo", "1.0")
        return Built(wheel, MappingProxyType({"compile": 1.0}), MappingProxyType(STATS))


def _runner(plan: BuildPlan, tmp_path: Path) -> tuple[BuildRunner, FarmWork, io.StringIO]:
    log = io.StringIO()
    runner = BuildRunner(
        plan,
        FakeEngine(),  # type: ignore[arg-type]
        BuildOutput(log),
        repair=spec_for_recipe(plan.recipe),
        docker_dir=tmp_path,
        work_root=tmp_path,
        gate=lambda wheel, arch: GateVerdict(
            ok=True, summary="ok", report={"inputs": [{"source": str(wheel), "libraries": []}]}
        ),
    )
    images = runner_module._Images(
        "sha256:base", BuilderImage("builder:1", "sha256:builder", "base", "sha256:base", False),
        TOOLCHAIN,
    )  # fmt: skip
    runner._images = lambda timings: images  # type: ignore[method-assign]
    work = FarmWork()
    runner.work = work  # type: ignore[assignment]
    return runner, work, log


# -- the request and the plan ---------------------------------------------------------------


def test_the_plan_reads_the_token_file_and_names_the_farm_without_the_token(
    tmp_path: Path,
) -> None:
    plan = _plan(tmp_path, "http://127.0.0.1:10600/", _token_file(tmp_path))
    assert plan.farm == DistFarm("http://127.0.0.1:10600", SECRET, required=False)
    rows = dict(plan.summary_rows())
    assert (
        "http://127.0.0.1:10600" in rows["compile farm"] and "local build" in rows["compile farm"]
    )
    assert SECRET not in repr(plan) and SECRET not in str(plan.summary_rows())
    start = next(s for p in plan.phases for s in p.steps if s.name == "cache-start")
    assert start.env["ARCHWHEEL_FARM_SOCKET"] == f"{FARM_MOUNT}/farm.sock"
    assert start.env["SCCACHE_CONF"] == CLIENT_CONFIG
    assert "SCCACHE_CONF" not in plan.build_env  # the daemon reads it; nothing else needs it
    required = _plan(tmp_path, "http://127.0.0.1:10600", _token_file(tmp_path), dist_required=True)
    assert "refused" in dict(required.summary_rows())["compile farm"]


def test_without_a_farm_the_plan_has_no_farm_row_or_variables(tmp_path: Path) -> None:
    plan = _plan(tmp_path, None, None, jobs=2)  # type: ignore[arg-type]
    assert plan.farm is None and "compile farm" not in dict(plan.summary_rows())
    steps = [s for p in plan.phases for s in p.steps]
    assert not any("ARCHWHEEL_FARM_SOCKET" in s.env or "SCCACHE_CONF" in s.env for s in steps)
    farmed = _plan(tmp_path, "http://127.0.0.1:10600", _token_file(tmp_path), jobs=2)
    assert without_farm(farmed) == plan


@pytest.mark.parametrize(
    ("url", "token_file", "required", "message"),
    [
        ("http://127.0.0.1:1", None, False, "--dist-scheduler without --dist-token-file"),
        (None, "token", False, "--dist-token-file without --dist-scheduler"),
        (None, None, True, "--dist-required needs a farm"),
        ("ftp://farm", "token", False, r"not an http\(s\) URL"),
        ("http://127.0.0.1:1", "absent", False, "no such file"),
    ],
)
def test_a_farm_written_wrong_stops_the_plan_with_exit_2(
    tmp_path: Path, url: str | None, token_file: str | None, required: bool, message: str
) -> None:
    if token_file == "token":
        _token_file(tmp_path)
        token_file = "farm-token"
    path = tmp_path / token_file if token_file else None
    with pytest.raises(UsageError, match=message) as caught:
        _plan(tmp_path, url, path, dist_required=required)  # type: ignore[arg-type]
    assert exit_code_for(caught.value) == ExitCode.USAGE


def test_the_container_config_holds_the_placeholder_never_the_token(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "https://farm.example:8443", _token_file(tmp_path))
    path = write_container_config(plan, tmp_path)
    assert path == tmp_path / CLIENT_CONFIG.removeprefix("/build/")
    text = path.read_text()
    assert SECRET not in text and PLACEHOLDER_TOKEN in text
    assert 'scheduler_url = "http://farm.example:8443"' in text  # the route speaks TLS onwards
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


# -- the runner -----------------------------------------------------------------------------


def test_a_farm_build_runs_beside_the_route_and_records_its_jobs(
    tmp_path: Path, scheduler: SchedulerStandIn
) -> None:
    plan = _plan(tmp_path, scheduler.url, _token_file(tmp_path))
    runner, work, log = _runner(plan, tmp_path)
    result = runner.run()
    assert len(work.plans) == 1 and work.plans[0] is plan and work.socket_there == [True]
    folder = work.folders[0]
    assert folder is not None and not folder.exists()  # stopped and removed after the build
    assert scheduler.seen_auth == [f"Bearer {SECRET}"]  # the probe, from the host
    text = result.provenance.read_text()
    farm = json.loads(text)["farm"]
    assert farm["scheduler"] == scheduler.url and farm["used"] is True
    assert farm["servers_at_start"] == 2
    assert farm["jobs"] == {
        "servers": {"10.0.0.1:10501": 3, "10.0.0.2:10501": 4},
        "local": 2,
        "errors": 1,
    }
    assert farm["route"]["refused"] == 0
    assert "1 job(s) failed on the farm" in log.getvalue()
    assert SECRET not in text and SECRET not in log.getvalue()


def test_a_wrong_token_stops_the_build_before_compiling_with_exit_2(
    tmp_path: Path, scheduler: SchedulerStandIn
) -> None:
    plan = _plan(tmp_path, scheduler.url, _token_file(tmp_path, "not-the-token"))
    runner, work, _ = _runner(plan, tmp_path)
    with pytest.raises(UsageError, match="refused the token") as caught:
        runner.run()
    assert exit_code_for(caught.value) == ExitCode.USAGE and work.plans == []
    assert "not-the-token" not in str(caught.value)


def test_an_unreachable_farm_is_one_warning_and_a_local_build(tmp_path: Path) -> None:
    plan = _plan(tmp_path, f"http://127.0.0.1:{free_port()}", _token_file(tmp_path))
    runner, work, log = _runner(plan, tmp_path)
    result = runner.run()
    assert work.plans == [without_farm(plan)] and work.folders == [None]
    warnings = [line for line in log.getvalue().splitlines() if "compiling locally" in line]
    assert len(warnings) == 1 and "cannot be reached" in warnings[0]
    farm = json.loads(result.provenance.read_text())["farm"]
    assert farm["used"] is False and "cannot be reached" in farm["why"]
    assert "jobs" in farm  # sccache's counts, as they are (locally: no server would be named)


def test_dist_required_refuses_an_unreachable_farm_with_exit_4(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    plan = _plan(tmp_path, url, _token_file(tmp_path), dist_required=True)
    runner, work, _ = _runner(plan, tmp_path)
    with pytest.raises(FarmUnavailable, match="--dist-required") as caught:
        runner.run()
    assert exit_code_for(caught.value) == ExitCode.TOOL and work.plans == []


def test_a_farm_without_servers_is_a_local_build(tmp_path: Path) -> None:
    with SchedulerStandIn(SECRET, servers=0) as empty:
        plan = _plan(tmp_path, empty.url, _token_file(tmp_path))
        runner, work, log = _runner(plan, tmp_path)
        runner.run()
    assert work.plans == [without_farm(plan)] and "has no build server" in log.getvalue()


def test_farm_record_without_a_farm_is_none() -> None:
    assert farm_record(None, STATS, None) is None


# -- what the containers are given ----------------------------------------------------------


class RecordingContainer:
    """A container that runs nothing: each exec's argv as ``docker exec`` would get it."""

    def __init__(self, calls: list[list[str]]) -> None:
        self.calls = calls

    def __enter__(self) -> RecordingContainer:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def call(self, command: list[str], *, env: dict[str, str], **_: object) -> None:
        self.calls.append(["exec", *(f"--env={k}={v}" for k, v in env.items()), *command])

    def output(self, command: list[str], **_: object) -> str:
        self.calls.append(["exec", *command])
        return json.dumps(STATS)


class RecordingEngine:
    """Docker's ``run`` flags for each container the work folder asks for (the real engine's
    ``spec_args``), and each exec; nothing runs."""

    def __init__(self) -> None:
        self.real = ContainerEngine(
            EngineSettings.create("docker", Settings(), program="docker", environ={}), echo=None
        )
        self.specs: list[ContainerSpec] = []
        self.argv: list[list[str]] = []

    def container(self, spec: ContainerSpec) -> RecordingContainer:
        self.specs.append(spec)
        self.argv.append(["run", *self.real.spec_args(spec, "archwheel-test"), spec.image])
        return RecordingContainer(self.argv)


def test_the_token_is_in_no_docker_argv_and_the_route_is_mounted_for_compiling_only(
    tmp_path: Path,
) -> None:
    plan = _plan(tmp_path, "http://127.0.0.1:10600", _token_file(tmp_path))
    engine = RecordingEngine()
    work = WorkFolder(engine, BuildOutput(io.StringIO()), work_root=tmp_path)  # type: ignore[arg-type]
    route = tmp_path / "route"
    route.mkdir()
    builder = BuilderImage("builder:1", "sha256:builder", "base", "sha256:base", False)
    folder = tmp_path / "work"
    folder.mkdir()
    stats, _ = work._run_phases(
        plan, builder, folder, TOOLCHAIN, relay=None, farm=route, timings=Timings()
    )
    assert stats == STATS  # the farm's counts are read, with or without the cache
    everything = "\0".join("\0".join(argv) for argv in engine.argv)
    assert SECRET not in everything
    farm_mounts = [
        (spec, m) for spec in engine.specs for m in spec.mounts if m.target == FARM_MOUNT
    ]
    assert len(farm_mounts) == 1 and farm_mounts[0][1].source == str(route)
    assert farm_mounts[0][0].network == "none"  # the compile container: no network but the route
    assert f"--env=SCCACHE_CONF={CLIENT_CONFIG}" in everything


def test_the_reproducibility_build_compiles_locally_without_the_route(
    tmp_path: Path, scheduler: SchedulerStandIn
) -> None:
    plan = _plan(tmp_path, scheduler.url, _token_file(tmp_path), check_reproducible=True)
    runner, work, _ = _runner(plan, tmp_path)
    runner.run()
    assert len(work.plans) == 2 and work.plans[0].farm is not None
    assert work.plans[1].farm is None and work.folders[1] is None
    start = next(s for p in work.plans[1].phases for s in p.steps if s.name == "cache-start")
    assert "ARCHWHEEL_FARM_SOCKET" not in start.env and "SCCACHE_CONF" not in start.env
