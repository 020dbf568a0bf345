"""A compile farm that is down or refuses the token, in real Docker builds (the example recipe,
arch 9.0, the session label of tests/support/extension_builds.py, the session's real farm of
tests.support.farm for the token):

- a scheduler that cannot be reached: one warning line and a local build (a whole build, about
  30 s on the 2-core machine with a warm compiler cache: marker ``heavy``);
- the same with ``--dist-required``: one line and exit 4 before any compile (about 2 s);
- a token the scheduler refuses: one line and exit 2 before any compile (about 2 s), the token
  in no output (docs/exit-codes.md).
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.extension_builds import CLI, Session
from tests.support.farm import Farm
from tests.support.redis_server import free_port

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
