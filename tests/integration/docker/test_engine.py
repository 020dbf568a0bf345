"""The container engine wrapper with real containers (docker, podman); settings and command echo
without an engine are in tests/unit/effects/test_engine.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from archwheel.effects.engine import (
    ContainerEngine,
    ContainerSpec,
    EngineSettings,
    Mount,
)
from archwheel.effects.engine_settings import parse_version
from archwheel.effects.settings import Settings
from archwheel.errors import BuildError
from tests.support.components import require
from tests.support.containers_support import containers_with_label, import_tiny_image, tiny_rootfs

# -- real containers -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_rootfs(tmp_path_factory.mktemp("rootfs") / "tiny.tar")


@pytest.fixture(scope="module")
def docker_image(docker_engine: str, tiny_tarball: Path) -> Iterator[str]:
    tag = import_tiny_image(["docker"], tiny_tarball)
    yield tag
    subprocess.run(["docker", "image", "rm", "--force", tag], capture_output=True, check=False)


@pytest.fixture
def run_label() -> str:
    return f"archwheel.test={os.urandom(6).hex()}"


def _engine(name: str, label: str, tmp_path: Path, **environ: str) -> ContainerEngine:
    settings = EngineSettings.create(
        name,
        Settings.from_environ({"ARCHWHEEL_RUN_LABEL": label, **environ}),
        config_dir=tmp_path,
        environ={"ARCHWHEEL_RUN_LABEL": label, **environ},
    )
    return ContainerEngine(settings, echo=None)


@pytest.mark.docker
def test_docker_version_answers(docker_engine: str, tmp_path: Path, run_label: str) -> None:
    version = _engine("docker", run_label, tmp_path).version()
    assert parse_version(version) >= (20, 10)


@pytest.mark.docker
def test_container_runs_steps_and_is_removed(
    docker_image: str, tmp_path: Path, run_label: str
) -> None:
    engine = _engine("docker", run_label, tmp_path)
    lines: list[str] = []
    spec = ContainerSpec(image=docker_image, network="none", user="1000:1000")
    with engine.container(spec) as container:
        assert container.name.startswith("archwheel-")
        assert containers_with_label(["docker"], run_label) == [container.name]
        container.call(["sh", "-c", "echo one; id -u; echo two >&2"], sink=lines.append)
        assert container.output(["cat", "/etc/passwd"]).startswith("root:")
    # stdout and stderr travel separately through the engine: both arrive, order aside.
    assert sorted(lines) == ["1000", "one", "two"]
    assert containers_with_label(["docker"], run_label) == []


@pytest.mark.docker
def test_failing_step_raises_and_removes_the_container(
    docker_image: str, tmp_path: Path, run_label: str
) -> None:
    engine = _engine("docker", run_label, tmp_path)
    with (
        pytest.raises(
            BuildError, match=r"step 'fail' failed in container archwheel-\w+ \(exit 7\)"
        ),
        engine.container(ContainerSpec(image=docker_image)) as container,
    ):
        container.call(["sh", "-c", "echo last words; exit 7"], what="step 'fail'")
    assert containers_with_label(["docker"], run_label) == []


@pytest.mark.docker
def test_interrupt_inside_removes_the_container(
    docker_image: str, tmp_path: Path, run_label: str
) -> None:
    engine = _engine("docker", run_label, tmp_path)
    seen: list[str] = []

    def interrupted_build() -> None:
        with engine.container(ContainerSpec(image=docker_image)):
            seen.extend(containers_with_label(["docker"], run_label))
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted_build()
    assert len(seen) == 1
    assert containers_with_label(["docker"], run_label) == []


@pytest.mark.docker
def test_killed_container_is_reported_as_killed(
    docker_image: str, tmp_path: Path, run_label: str
) -> None:
    engine = _engine("docker", run_label, tmp_path)
    with engine.container(ContainerSpec(image=docker_image)) as container:
        killer = threading.Timer(2.0, subprocess.run, (["docker", "kill", container.name],))
        killer.start()
        try:
            with pytest.raises(
                BuildError,
                match=r"container archwheel-\w+ was stopped from outside while sleep 60 ran "
                r"\(exit 137\): `docker kill`/`stop`",
            ):
                container.call(["sleep", "60"])
        finally:
            killer.cancel()
    assert containers_with_label(["docker"], run_label) == []


@pytest.mark.docker
def test_a_process_killed_inside_a_running_container_reads_as_the_oom_killer(
    docker_image: str, tmp_path: Path, run_label: str
) -> None:
    """What the kernel's OOM killer does: one process gets SIGKILL, the container lives on."""
    engine = _engine("docker", run_label, tmp_path)
    with engine.container(ContainerSpec(image=docker_image)) as container:
        with pytest.raises(BuildError, match=r"\(exit 137, SIGKILL\) while the container ran on"):
            container.call(["sh", "-c", "kill -9 $$"], what="step 'compile'")
        assert container.is_running()
    assert containers_with_label(["docker"], run_label) == []


@pytest.mark.docker
def test_keep_containers_keeps_it_for_debugging(
    docker_image: str, tmp_path: Path, run_label: str
) -> None:
    engine = _engine("docker", run_label, tmp_path, ARCHWHEEL_KEEP_CONTAINERS="1")
    with engine.container(ContainerSpec(image=docker_image)) as container:
        name = container.name
    try:
        assert containers_with_label(["docker"], run_label) == [name]
    finally:
        subprocess.run(["docker", "rm", "--force", name], capture_output=True, check=False)


@pytest.mark.docker
def test_read_only_mount_cannot_be_written(
    docker_image: str, tmp_path: Path, run_label: str
) -> None:
    engine = _engine("docker", run_label, tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "file").write_text("data")
    spec = ContainerSpec(
        image=docker_image, mounts=(Mount(str(tmp_path / "src"), "/src", read_only=True),)
    )
    with engine.container(spec) as container:
        assert container.output(["cat", "/src/file"]) == "data"
        code, _ = container.call(["sh", "-c", "echo x > /src/new"], check=False)
    assert code != 0
    assert not (tmp_path / "src" / "new").exists()


@pytest.mark.docker
def test_network_none_has_only_loopback(docker_image: str, tmp_path: Path, run_label: str) -> None:
    engine = _engine("docker", run_label, tmp_path)
    with engine.container(ContainerSpec(image=docker_image, network="none")) as container:
        interfaces = container.output(["cat", "/proc/net/dev"])
    names = {line.split(":")[0].strip() for line in interfaces.splitlines() if ":" in line}
    assert names == {"lo"}


@pytest.mark.docker
def test_image_and_volume_lookups(docker_image: str, tmp_path: Path, run_label: str) -> None:
    engine = _engine("docker", run_label, tmp_path)
    image_id = engine.image_id(docker_image)
    assert image_id is not None
    assert image_id.startswith("sha256:")
    assert engine.image_id("archwheel-test/absent:nothing") is None
    volume = f"archwheel-test-{os.urandom(4).hex()}"
    try:
        assert not engine.volume_exists(volume)
        engine.ensure_volume(volume)
        engine.ensure_volume(volume)  # idempotent
        assert engine.volume_exists(volume)
    finally:
        engine.remove_volume(volume)
    assert not engine.volume_exists(volume)


@pytest.mark.docker
def test_failed_image_build_leaves_no_container(
    docker_image: str, tmp_path: Path, run_label: str
) -> None:
    """docker's legacy builder keeps the container of a failed step unless told otherwise."""
    engine = _engine("docker", run_label, tmp_path)
    context = tmp_path / "context"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {docker_image}\nRUN echo provisioning; exit 3\n")
    tag = f"archwheel-test/failed:{os.urandom(5).hex()}"
    lines: list[str] = []
    failed = rf"building image {tag} failed \(exit \d+\): .*non-zero code: 3"
    with pytest.raises(BuildError, match=failed):
        engine.build_image(context, tag, network="none", sink=lines.append)
    assert "provisioning" in lines
    assert engine.image_id(tag) is None
    left = subprocess.run(
        ["docker", "ps", "--all", "--quiet", "--filter", f"ancestor={docker_image}"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    if left:  # clean up before failing
        subprocess.run(["docker", "rm", "--force", *left], capture_output=True, check=False)
    assert left == []


def _start_foreground_run(
    engine: ContainerEngine, image: str, name: str
) -> subprocess.Popen[bytes]:
    argv = engine.run_command(ContainerSpec(image=image), ["sleep", "60"], name=name)
    client = subprocess.Popen(
        argv,
        env={**os.environ, **engine.settings.env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(600):
        if _is_running(engine, name):
            return client
        time.sleep(0.1)
    client.kill()
    raise AssertionError(f"{name} did not start")


def _is_running(engine: ContainerEngine, name: str) -> bool:
    result = engine.run("inspect", "--format", "{{.State.Running}}", name, check=False, quiet=True)
    return result.stdout.strip() == "true"


@pytest.mark.docker
def test_stop_container_ends_a_run_whose_client_was_killed(
    docker_image: str, tmp_path: Path, run_label: str
) -> None:
    engine = _engine("docker", run_label, tmp_path)
    name = f"archwheel-test-{os.urandom(5).hex()}"
    client = _start_foreground_run(engine, docker_image, name)
    # Killing the client (what a watchdog does to a hung step) leaves the container running.
    client.kill()
    client.wait()
    try:
        assert _is_running(engine, name)
    finally:
        engine.stop_container(name)
    assert containers_with_label(["docker"], run_label) == []


@pytest.mark.docker
def test_stop_container_only_kills_when_containers_are_kept(
    docker_image: str, tmp_path: Path, run_label: str
) -> None:
    engine = _engine("docker", run_label, tmp_path, ARCHWHEEL_KEEP_CONTAINERS="1")
    name = f"archwheel-test-{os.urandom(5).hex()}"
    client = _start_foreground_run(engine, docker_image, name)
    try:
        engine.stop_container(name)
        client.wait(timeout=60)
        assert containers_with_label(["docker"], run_label) == [name]
        assert not _is_running(engine, name)
    finally:
        client.kill()
        subprocess.run(["docker", "rm", "--force", name], capture_output=True, check=False)


@pytest.mark.docker
def test_podman_runs_a_real_container(tiny_tarball: Path, tmp_path: Path, run_label: str) -> None:
    require(shutil.which("podman") is not None, "podman is not installed (apt-get install podman)")
    engine = _engine("podman", run_label, tmp_path)
    engine.version()
    cli = engine.settings.command()
    env = {**os.environ, **engine.settings.env}
    tag = f"archwheel-test/tiny:{os.urandom(5).hex()}"
    with tiny_tarball.open("rb") as handle:
        subprocess.run(
            [*cli, "import", "-", tag], stdin=handle, env=env, check=True, capture_output=True
        )
    try:
        lines: list[str] = []
        with engine.container(ContainerSpec(image=tag, network="none", user="1000:1000")) as c:
            c.call(["sh", "-c", "echo hello from podman; id -u"], sink=lines.append)
            name = c.name
        assert lines == ["hello from podman", "1000"]
        left = subprocess.run(
            [*cli, "ps", "-a", "--filter", f"name={name}", "--format", "{{.Names}}"],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert left.stdout.strip() == ""
    finally:
        subprocess.run(
            [*cli, "image", "rm", "--force", tag], env=env, capture_output=True, check=False
        )
