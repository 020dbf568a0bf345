"""The compile farm in real Docker builds beyond the example: a third-party torch extension, a
build server killed mid-build, and a farm that is down or refuses the token.

- torchsort 0.1.9 (recipes/torchsort-0.1.9.toml, arch 9.0, against torch 2.14.1: the torch
  image and the session label of tests/support/extension_builds.py) built with ``--no-cache``
  through archwheel's farm route to the session's real farm (tests.support.farm) is byte for
  byte the wheel a local ``--no-cache`` build makes;
- the same build with one build server killed (its whole process group) as soon as the
  scheduler hands it the build's first job still passes, with the same bytes, one warning line,
  and provenance counting the failed jobs (compiled locally); the server is started again after;
- a scheduler that cannot be reached: one warning line and a local build (the example recipe);
  with ``--dist-required`` exit 4 before any compile; a token the scheduler refuses: one line
  and exit 2 before any compile (docs/exit-codes.md).

The torchsort builds and the local build beside a dead scheduler are whole builds of minutes on
the 2-core machine: marker ``heavy`` (``nox -s heavy``). The two refusals stop before compiling.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.extension_builds import CLI, Session
from tests.support.farm import Farm
from tests.support.redis_server import free_port

RECIPE = "torchsort-0.1.9"
ARCH = "9.0"

pytestmark = [pytest.mark.farm, pytest.mark.docker, pytest.mark.nvcc, pytest.mark.slow]


@dataclass(frozen=True)
class Run:
    """One ``archwheel build``: its exit, what it printed, its JSON answer and its time."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def document(self) -> dict[str, object]:
        assert self.returncode == 0, self.stderr[-4000:]
        answer: dict[str, object] = json.loads(self.stdout)
        return answer

    @property
    def wheel(self) -> Path:
        return Path(str(self.document["wheel"]))

    @property
    def provenance(self) -> dict[str, object]:
        record: dict[str, object] = json.loads(Path(str(self.document["provenance"])).read_text())
        return record

    @property
    def farm(self) -> dict[str, object]:
        farm = self.provenance["farm"]
        assert isinstance(farm, dict), farm
        return farm

    def lines(self, text: str) -> list[str]:
        """The lines of standard error holding ``text``."""
        return [line for line in self.stderr.splitlines() if text in line]


def _argv(recipe: str, out: Path, *extra: str) -> list[str]:
    return [*CLI, "build", "--recipe", recipe, "--arch", ARCH, "--out", str(out),
            "--format", "json", *extra]  # fmt: skip


def _run(env: dict[str, str], argv: list[str], timeout: float = 3000) -> Run:
    mark = time.monotonic()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)  # fmt: skip
    return Run(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - mark)


def _token(folder: Path, token: str) -> Path:
    path = folder / "farm-token"
    path.write_text(token + "\n")
    return path


def _farm_args(farm: Farm, folder: Path) -> list[str]:
    token = _token(folder, farm.client_token)
    return ["--dist-scheduler", farm.scheduler_url, "--dist-token-file", str(token),
            "--dist-required"]  # fmt: skip


def _differing(a: Path, b: Path) -> list[str]:
    """The members of two wheels whose bytes differ (all of them: a member of one only too)."""
    with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
        names = set(za.namelist()) | set(zb.namelist())
        return sorted(
            n
            for n in names
            if n not in za.namelist() or n not in zb.namelist() or za.read(n) != zb.read(n)
        )


@pytest.fixture(scope="module")
def local_torchsort(extension_builds: Session, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """torchsort built here, without any cache and without a farm: the bytes to match."""
    out = tmp_path_factory.mktemp("torchsort-local") / "dist"
    run = _run(extension_builds.env, _argv(RECIPE, out, "--no-cache"))
    assert run.provenance["farm"] is None
    print(f"local --no-cache build: {run.seconds:.0f} s")
    return run


@pytest.mark.heavy
@pytest.mark.realwheel
def test_a_third_party_extension_through_the_farm_is_the_local_build_byte_for_byte(
    extension_builds: Session,
    local_torchsort: Run,
    compile_farm: Farm,
    tmp_path: Path,
) -> None:
    since = compile_farm.last_job()
    run = _run(
        extension_builds.env, _argv(RECIPE, tmp_path / "dist", "--no-cache",
                                    *_farm_args(compile_farm, tmp_path)),
    )  # fmt: skip
    assigned = dict(compile_farm.jobs_per_server(since))
    farm = run.farm
    jobs = farm["jobs"]
    assert isinstance(jobs, dict)
    print(f"farm build: {run.seconds:.0f} s; scheduler {assigned}; provenance {jobs}")
    assert farm["used"] is True and sum(assigned.values()) > 0, (farm, assigned)
    assert sum(jobs["servers"].values()) > 0 and jobs["errors"] == 0, jobs
    assert compile_farm.client_token not in run.stdout + run.stderr + json.dumps(farm)
    differing = _differing(run.wheel, local_torchsort.wheel)
    print(f"identical to the local build: {differing == []}; differing members: {differing}")
    assert run.wheel.read_bytes() == local_torchsort.wheel.read_bytes(), differing


@pytest.mark.heavy
@pytest.mark.realwheel
def test_a_build_server_killed_mid_build_leaves_the_same_wheel_and_one_warning(
    extension_builds: Session,
    local_torchsort: Run,
    compile_farm: Farm,
    tmp_path: Path,
) -> None:
    since = compile_farm.last_job()
    argv = _argv(RECIPE, tmp_path / "dist", "--no-cache", *_farm_args(compile_farm, tmp_path))
    killed: list[str] = []
    mark = time.monotonic()
    build = subprocess.Popen(argv, env=extension_builds.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip

    def kill_the_first_server_given_a_job() -> None:
        while build.poll() is None:
            given = [addr for job, addr in compile_farm.assignments() if job > since]
            if given:
                victim = next(s for s in compile_farm.servers if s.addr == given[0])
                compile_farm.kill_server(victim)
                killed.append(victim.addr)
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=kill_the_first_server_given_a_job)
    watcher.start()
    try:
        stdout, stderr = build.communicate(timeout=3000)
    finally:
        watcher.join()
        for server in compile_farm.servers:
            if server.proc is None:
                compile_farm.start_server(server)
        compile_farm.wait_servers(2)
    run = Run(build.returncode, stdout, stderr, time.monotonic() - mark)
    assert killed, "the build gave the farm no job"
    assigned = dict(compile_farm.jobs_per_server(since))
    farm = run.farm
    jobs = farm["jobs"]
    assert isinstance(jobs, dict)
    print(f"killed {killed[0]}; build {run.seconds:.0f} s; scheduler {assigned}; provenance {jobs}")
    assert farm["used"] is True
    assert jobs["errors"] > 0 and jobs["local"] >= jobs["errors"], jobs
    warned = run.lines("failed on the farm")
    assert len(warned) == 1 and warned[0].startswith("warning: compile farm: "), run.stderr[-3000:]
    assert f"{jobs['errors']} job(s) failed on the farm and were compiled locally" in warned[0]
    differing = _differing(run.wheel, local_torchsort.wheel)
    print(f"identical to the local build: {differing == []}; differing members: {differing}")
    assert run.wheel.read_bytes() == local_torchsort.wheel.read_bytes(), differing


def _down(tmp_path: Path) -> tuple[str, list[str]]:
    """A scheduler URL nothing listens at, and the farm arguments naming it."""
    url = f"http://127.0.0.1:{free_port()}"
    return url, ["--dist-scheduler", url, "--dist-token-file", str(_token(tmp_path, "any"))]


@pytest.mark.heavy
def test_an_unreachable_scheduler_is_one_warning_and_a_local_build(
    extension_builds: Session, tmp_path: Path
) -> None:
    url, args = _down(tmp_path)
    run = _run(extension_builds.env, _argv("example", tmp_path / "dist", *args))
    print(f"local build beside a dead scheduler: {run.seconds:.0f} s")
    assert run.returncode == 0, run.stderr[-4000:]
    (line,) = run.lines("cannot be reached")  # (the plan's row names the scheduler too)
    assert line.startswith(f"warning: compile farm {url} cannot be reached ("), line
    assert line.endswith(": compiling locally"), line
    farm = run.farm
    assert farm["used"] is False and "cannot be reached" in str(farm["why"]), farm
    jobs = farm.get("jobs")
    assert not isinstance(jobs, dict) or jobs["servers"] == {}, jobs
    assert run.wheel.is_file()


def _refused(run: Run, out: Path) -> str:
    """The one line a build stopped before compiling printed; nothing was built."""
    assert "Traceback" not in run.stderr
    (line,) = [x for x in run.stderr.splitlines() if x.startswith("archwheel: error:")]
    assert not list(out.rglob("*.whl")), list(out.rglob("*"))
    (log,) = (out / "logs").glob("*.log")  # its last line is the one the terminal showed
    assert log.read_text(errors="replace").splitlines()[-1] == line
    return line


def test_dist_required_refuses_an_unreachable_scheduler_with_exit_4(
    extension_builds: Session, tmp_path: Path
) -> None:
    url, args = _down(tmp_path)
    out = tmp_path / "dist"
    run = _run(extension_builds.env, _argv("example", out, *args, "--dist-required"))
    print(f"refused in {run.seconds:.1f} s")
    assert run.returncode == 4, run.stderr[-4000:]
    line = _refused(run, out)
    assert line.startswith(f"archwheel: error: compile farm {url} cannot be reached ("), line
    assert "--dist-required refuses to build without it" in line, line


def test_a_token_the_scheduler_refuses_is_one_line_and_exit_2(
    extension_builds: Session, compile_farm: Farm, tmp_path: Path
) -> None:
    wrong = _token(tmp_path, "not-" + compile_farm.client_token)
    out = tmp_path / "dist"
    run = _run(
        extension_builds.env,
        _argv("example", out, "--dist-scheduler", compile_farm.scheduler_url,
              "--dist-token-file", str(wrong)),
    )  # fmt: skip
    print(f"refused in {run.seconds:.1f} s")
    assert run.returncode == 2, run.stderr[-4000:]
    line = _refused(run, out)
    assert line.startswith(
        f"archwheel: error: compile farm {compile_farm.scheduler_url} refused the token of "
        "--dist-token-file"
    ), line
    assert compile_farm.client_token not in run.stdout + run.stderr
