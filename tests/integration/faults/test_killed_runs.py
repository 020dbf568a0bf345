"""Runs killed in the middle of real work: what a SIGKILL leaves, and who removes it.

Real engines (docker, podman) and real processes: a child Python process opens a container the
way a build does and starts a long step in it; the test kills the child with SIGKILL and watches
the engine. The dead man's switch (``effects.held``) must end the container without any later
run; a container whose maker died that stayed anyway (ARCHWHEEL_KEEP_CONTAINERS) is removed by
the next engine that starts a container, with a line saying so, and by ``archwheel clean``;
nothing a live run or something else made is touched.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from archwheel.effects.engine import ContainerEngine, ContainerSpec, EngineSettings
from archwheel.effects.settings import Settings
from tests.support.cli import CliRun
from tests.support.components import require
from tests.support.containers_support import tiny_rootfs

pytestmark = [pytest.mark.faults, pytest.mark.docker]

ROOT = Path(__file__).resolve().parents[3]

HOLDER = textwrap.dedent(
    """
    import sys
    from archwheel.effects.engine import ContainerEngine, ContainerSpec, EngineSettings
    from archwheel.effects.settings import Settings

    engine_name, image, label, keep = sys.argv[1:5]
    environ = {"ARCHWHEEL_RUN_LABEL": label, "ARCHWHEEL_KEEP_CONTAINERS": keep}
    settings = EngineSettings.create(engine_name, Settings.from_environ(environ), environ={})
    engine = ContainerEngine(settings, echo=None)
    with engine.container(ContainerSpec(image=image, network="none")) as container:
        print(container.name, flush=True)
        if keep == "1":
            sys.exit(0)  # the container stays: a kept container of a run that has ended
        container.call(["sleep", "600"])
    """
)


def _cli(name: str) -> list[str]:
    return EngineSettings.create(name, Settings(), environ={}).command()


def _env(name: str) -> dict[str, str]:
    return {**os.environ, **EngineSettings.create(name, Settings(), environ={}).env}


def _names(name: str, label: str) -> list[str]:
    proc = subprocess.run(
        [*_cli(name), "ps", "-a", "--filter", f"label={label}", "--format", "{{.Names}}"],
        env=_env(name), capture_output=True, text=True, check=True,
    )  # fmt: skip
    return proc.stdout.split()


def _wait_until(condition: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.25)
    return False


@pytest.fixture(scope="module")
def tiny_tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_rootfs(tmp_path_factory.mktemp("rootfs") / "tiny.tar")


@pytest.fixture(scope="module", params=["docker", "podman"])
def engine_image(request: pytest.FixtureRequest, tiny_tarball: Path) -> Iterator[tuple[str, str]]:
    name = str(request.param)
    if name == "docker":
        request.getfixturevalue("docker_engine")
    else:
        require(shutil.which("podman") is not None, "podman is not installed")
    env = _env(name)
    tag = f"localhost/archwheel-test/tiny:{os.urandom(5).hex()}"
    with tiny_tarball.open("rb") as handle:
        subprocess.run([*_cli(name), "import", "-", tag], stdin=handle, env=env, check=True,
                       capture_output=True)  # fmt: skip
    yield name, tag
    subprocess.run([*_cli(name), "image", "rm", "--force", tag], env=env, capture_output=True,
                   check=False)  # fmt: skip


def _holder(engine: str, image: str, label: str, keep: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, engine, image, label, keep],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def test_a_sigkilled_run_leaves_no_container_compiling_on(engine_image: tuple[str, str]) -> None:
    engine, image = engine_image
    label = f"archwheel.test={os.urandom(6).hex()}"
    child = _holder(engine, image, label, "0")
    assert child.stdout is not None
    name = child.stdout.readline().strip()
    assert name.startswith("archwheel-")
    assert _wait_until(lambda: _names(engine, label) == [name], 30)
    # the long step runs inside it
    assert _wait_until(lambda: b"sleep 600" in subprocess.run(
        ["ps", "-eo", "args"], capture_output=True, check=True).stdout, 30)  # fmt: skip
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert _wait_until(lambda: _names(engine, label) == [], 30), _names(engine, label)


def test_a_kept_container_of_an_ended_run_is_removed_by_the_next_run_with_a_line(
    engine_image: tuple[str, str], tmp_path: Path
) -> None:
    engine_name, image = engine_image
    label = f"archwheel.test={os.urandom(6).hex()}"
    child = _holder(engine_name, image, label, "1")
    out, _ = child.communicate(timeout=120)
    left = out.strip()
    assert child.returncode == 0
    assert _names(engine_name, label) == [left]  # kept, its maker gone
    # one this process keeps (alive) and one archwheel did not make (no owner label)
    alive_settings = EngineSettings.create(
        engine_name,
        Settings.from_environ({"ARCHWHEEL_RUN_LABEL": label, "ARCHWHEEL_KEEP_CONTAINERS": "1"}),
        environ={},
    )
    alive = ContainerEngine(alive_settings, echo=None)
    alive._swept = True  # it must not sweep before the test has looked
    foreign = f"not-archwheel-{os.urandom(4).hex()}"
    subprocess.run([*_cli(engine_name), "run", "--detach", "--name", foreign, "--label", "archwheel",
                    "--label", label, "--entrypoint", "sleep", image, "600"], env=_env(engine_name),
                   check=True, capture_output=True)  # fmt: skip
    try:
        with alive.container(ContainerSpec(image=image, network="none")) as kept:
            lines: list[str] = []
            settings = EngineSettings.create(
                engine_name, Settings.from_environ({"ARCHWHEEL_RUN_LABEL": label}), environ={}
            )
            ContainerEngine(settings, echo=lines.append).sweep_once()
            assert [line for line in lines if left in line] == [
                line for line in lines if "removed container" in line
            ]
            assert len(lines) == 1 and "left by a run that ended" in lines[0]
            assert sorted(_names(engine_name, label)) == sorted([kept.name, foreign])
    finally:
        for name in _names(engine_name, label):
            subprocess.run([*_cli(engine_name), "rm", "--force", name], env=_env(engine_name),
                           capture_output=True, check=False)  # fmt: skip


def test_clean_lists_then_removes_only_what_dead_runs_left(
    engine_image: tuple[str, str], cli_run: CliRun, tmp_path: Path
) -> None:
    engine_name, image = engine_image
    label = f"archwheel.test={os.urandom(6).hex()}"
    child = _holder(engine_name, image, label, "1")
    out, _ = child.communicate(timeout=120)
    left = out.strip()
    # a work folder of a killed run, one of a live run, one without an owner record
    killer = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\nfrom pathlib import Path\n"
         "from archwheel.effects.owner import owned_tempdir\n"
         "p = owned_tempdir('archwheel-work-', Path(sys.argv[1]))\n"
         "(p / 'half.o').write_bytes(b'x' * 1000)\nprint(p, flush=True)\ntime.sleep(600)\n",
         str(tmp_path)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert killer.stdout is not None
    dead_folder = Path(killer.stdout.readline().strip())
    killer.send_signal(signal.SIGKILL)
    killer.wait()
    from archwheel.effects.owner import owned_tempdir

    live_folder = owned_tempdir("archwheel-work-", tmp_path)
    plain = tmp_path / "archwheel-work-plain"
    plain.mkdir()
    try:
        code, out, err = cli_run("clean", "--engine", engine_name, "--temp", str(tmp_path),
                                 "--dry-run")  # fmt: skip
        assert code == 0, err
        assert f"would remove container {left}" in out
        assert f"would remove folder {dead_folder}" in out
        assert str(live_folder) not in out and str(plain) not in out
        assert _names(engine_name, label) == [left] and dead_folder.exists()
        code, out, err = cli_run("clean", "--engine", engine_name, "--temp", str(tmp_path))
        assert code == 0, err
        assert f"removed container {left}" in out
        assert f"removed folder {dead_folder}" in out
        assert _names(engine_name, label) == []
        assert not dead_folder.exists()
        assert not dead_folder.with_name(dead_folder.name + ".owner").exists()
        assert live_folder.is_dir() and plain.is_dir()
        code, out, err = cli_run("clean", "--engine", engine_name, "--temp", str(tmp_path))
        said = [line for line in out.splitlines() if not line.startswith("note: ")]
        assert code == 0 and said[0].startswith("nothing to clean"), out  # notes: other volumes
    finally:
        for name in _names(engine_name, label):
            subprocess.run([*_cli(engine_name), "rm", "--force", name], env=_env(engine_name),
                           capture_output=True, check=False)  # fmt: skip
