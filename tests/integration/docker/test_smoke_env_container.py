"""Smoke's container backend (``ContainerEnvironment``) with real engines, on a machine without a GPU.

What CI can prove here (each step's ``run`` as the one engine wrapper builds it, without an
engine: tests/unit/smoke/test_smoke_env_container.py): the install path creates the venv in a real
container from a real image and installs a real wheel through the host's pip passthrough; the
probe then runs in its own container and says "no CUDA device" (exit 20); a hung step's
container is ended by name; and no container is left behind. The GPU request itself cannot be
satisfied here, so the install tests set the TEST-ONLY switch ``no_gpu_request_for_tests``; the
real path (GPUs requested, refused by the engine) is tested through the CLI in
tests/integration/docker/test_smoke_cli.py.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from archwheel.effects.engine import ContainerEngine, EngineSettings
from archwheel.effects.settings import Settings
from archwheel.effects.watchdog import Watchdog
from archwheel.smoke.environments import ContainerEnvironment
from archwheel.smoke.runner import run_smoke
from archwheel.verdicts.smoke import SmokeReport
from archwheel.wheelbuild.images.baseimage import ensure_base_image
from tests.support.components import fetch_wheel, require
from tests.support.containers_support import containers_created, containers_with_label, tiny_rootfs
from tests.support.schemas import validate_smoke
from tests.support.wheels import make_wheel

# A real torch wheel small enough for a CI test (192 MB, its requirements are pure Python):
# the CPU build says "no CUDA device" like a CUDA build on a machine without a GPU does.
TORCH_CPU_SPEC = "torch==2.13.0+cpu"
SMOKE_PYTHON_DOCKERFILE = """\
FROM {base}
RUN apt-get update \\
 && apt-get install -y --no-install-recommends python3 python3-venv \\
 && rm -rf /var/lib/apt/lists/*
"""
# An "interpreter" that never returns: the install step hangs in a real container.
HANGING_PYTHON = b"#!/bin/sh\nexec sleep 600\n"


def _engine(name: str, label: str, config_dir: Path) -> ContainerEngine:
    settings = EngineSettings.create(
        name,
        Settings.from_environ({"ARCHWHEEL_RUN_LABEL": label}),
        config_dir=config_dir,
        environ={"ARCHWHEEL_RUN_LABEL": label},
    )
    return ContainerEngine(settings, echo=None)


def _cli(engine: ContainerEngine) -> list[str]:
    return engine.settings.command()


def _require_podman() -> None:
    require(shutil.which("podman") is not None, "podman is not installed (apt-get install podman)")


@pytest.fixture
def run_label() -> str:
    return f"archwheel.test={uuid.uuid4().hex[:12]}"


# -- real containers ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def python_image(docker_engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``archwheel-test/smoke-python:<random>``: the local Debian base image plus python3-venv.

    The base image is ``archwheel/debian:bookworm`` (``.ci/setup-engine.sh`` or
    ``archwheel base-image`` makes it; made here when missing). About 20 s with the host network.
    """
    settings = Settings.from_environ(os.environ)
    engine = ContainerEngine(EngineSettings.create("docker", settings), echo=None)
    base = ensure_base_image(engine, mirror=settings.debian_mirror)
    context = tmp_path_factory.mktemp("smoke-python")
    (context / "Dockerfile").write_text(SMOKE_PYTHON_DOCKERFILE.format(base=base.tag))
    tag = f"archwheel-test/smoke-python:{uuid.uuid4().hex[:10]}"
    engine.build_image(context, tag, network="host")
    try:
        yield tag
    finally:
        engine.remove_image(tag)


@pytest.fixture(scope="module")
def podman_python_image(
    python_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The same image in podman's own store (``docker save | podman load``, a few seconds)."""
    _require_podman()
    engine = _engine("podman", "unused", tmp_path_factory.mktemp("podman-conf"))
    env = {**os.environ, **engine.settings.env}
    saved = subprocess.Popen(["docker", "save", python_image], stdout=subprocess.PIPE)
    subprocess.run(
        [*_cli(engine), "load"], stdin=saved.stdout, env=env, check=True, capture_output=True
    )
    assert saved.wait() == 0
    try:
        yield python_image
    finally:
        subprocess.run(
            [*_cli(engine), "image", "rm", "--force", python_image],
            env=env, capture_output=True, check=False,
        )  # fmt: skip


@pytest.fixture(scope="module")
def torch_cpu_wheel() -> Path:
    return fetch_wheel(TORCH_CPU_SPEC)


def _smoke(env: ContainerEnvironment) -> SmokeReport:
    report = run_smoke(env, [str(w) for w in env.wheels], watchdog=Watchdog())
    validate_smoke(report.to_json_dict())
    return report


@pytest.mark.docker
@pytest.mark.slow
def test_a_real_torch_wheel_installs_in_a_container_and_says_no_cuda_device(
    python_image: str, torch_cpu_wheel: Path, tmp_path: Path, run_label: str
) -> None:
    engine = _engine("docker", run_label, tmp_path)
    since = time.time()
    env = ContainerEnvironment(
        wheels=(torch_cpu_wheel,),
        image=python_image,
        engine=engine,
        no_gpu_request_for_tests=True,
    )
    report = _smoke(env)
    data = report.to_json_dict()
    assert (data["verdict"], data["exit_code"]) == ("no-device", 20), data["message"]
    assert data["message"] == "no CUDA device: AssertionError: Torch not compiled with CUDA enabled"
    assert [(s["name"], s["ok"]) for s in data["stages"]] == [
        ("engine", True), ("install", True), ("probe", True)
    ]  # fmt: skip
    assert data["stages"][0]["log_tail"][0].startswith("docker ")
    # The payload ran with the torch pip installed in the container's venv (the host has none).
    assert data["software"]["torch"] == "2.13.0+cpu"
    assert data["software"]["python"].startswith("3.")
    # Every step was a container, and none is left.
    prefix = f"archwheel-smoke-{env.run_id}-"
    assert sorted(containers_created(["docker"], run_label, since)) == [
        prefix + "install", prefix + "probe"
    ]  # fmt: skip
    assert containers_with_label(["docker"], run_label) == []
    assert env.root is not None
    assert not env.root.exists()


@pytest.mark.docker
@pytest.mark.parametrize("engine_name", ["docker", "podman"])
def test_a_small_wheel_installs_and_the_probe_finds_no_torch(
    request: pytest.FixtureRequest, engine_name: str, tmp_path: Path, run_label: str
) -> None:
    image = request.getfixturevalue(
        "python_image" if engine_name == "docker" else "podman_python_image"
    )
    engine = _engine(engine_name, run_label, tmp_path)
    env = ContainerEnvironment(
        wheels=(make_wheel(tmp_path, "tiny_ext"),),
        image=image,
        engine=engine,
        no_gpu_request_for_tests=True,
    )
    data = _smoke(env).to_json_dict()
    assert (data["verdict"], data["exit_code"]) == ("torch-broken", 1), data["message"]
    assert data["message"].startswith("torch does not import: ModuleNotFoundError")
    assert data["stages"][0]["log_tail"][0].startswith(f"{engine_name} ")
    assert "Successfully installed tiny-ext-1.0" in " ".join(data["stages"][1]["log_tail"])
    assert containers_with_label(_cli(engine), run_label) == []


@pytest.fixture(scope="module")
def hanging_tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny root file system whose ``python3`` sleeps for ten minutes."""
    tarball = tiny_rootfs(tmp_path_factory.mktemp("hang") / "hang.tar")
    with tarfile.open(tarball, "a") as tar:
        info = tarfile.TarInfo("bin/python3")
        info.size = len(HANGING_PYTHON)
        info.mode = 0o755
        tar.addfile(info, io.BytesIO(HANGING_PYTHON))
    return tarball


@pytest.mark.docker
@pytest.mark.parametrize("engine_name", ["docker", "podman"])
def test_a_hung_step_is_killed_with_its_container(
    request: pytest.FixtureRequest,
    hanging_tarball: Path,
    engine_name: str,
    tmp_path: Path,
    run_label: str,
) -> None:
    if engine_name == "podman":
        _require_podman()
    else:
        request.getfixturevalue("docker_engine")
    engine = _engine(engine_name, run_label, tmp_path)
    tag = f"archwheel-test/hang:{uuid.uuid4().hex[:10]}"
    engine.import_rootfs(hanging_tarball, tag)
    try:
        env = ContainerEnvironment(
            wheels=(make_wheel(tmp_path, "tiny"),),
            image=tag,
            engine=engine,
            install_timeout=5,
            no_gpu_request_for_tests=True,
        )
        data = _smoke(env).to_json_dict()
        assert (data["verdict"], data["exit_code"]) == ("environment-failed", 4)
        assert data["message"].startswith(
            "installing the wheels in the container failed (install) did not finish within 5 s"
        ), data["message"]
        # The client was killed and the container ended by name: nothing is left running.
        assert containers_with_label(_cli(engine), run_label) == []
    finally:
        engine.remove_image(tag)
