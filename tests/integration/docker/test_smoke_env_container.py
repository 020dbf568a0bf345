"""Smoke's container backend (``ContainerEnvironment``) with real engines, on a machine without a GPU.

What CI can prove here: each step's ``run`` is built by the one engine wrapper (GPU request,
network, labels, mounts, podman's settings); the install path creates the venv in a real
container from a real image and installs a real wheel through the host's pip passthrough; the
probe then runs in its own container and says "no CUDA device" (exit 20); a hung step's
container is ended by name; and no container is left behind. The GPU request itself cannot be
satisfied here, so the install tests set the TEST-ONLY switch ``no_gpu_request_for_tests``; the
real path (GPUs requested, refused by the engine) is tested through the CLI in
``test_smoke_cli.py``.
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

from archwheel.build.baseimage import ensure_base_image
from archwheel.effects.engine import ContainerEngine, EngineSettings
from archwheel.effects.pipconfig import PipSettings
from archwheel.effects.watchdog import Watchdog
from archwheel.errors import UsageError
from archwheel.smoke.environments import (
    CONTAINER_WORKDIR,
    SMOKE_LABEL,
    ContainerEnvironment,
)
from archwheel.smoke.runner import run_smoke
from archwheel.verdicts.smoke import SmokeReport
from tests.conftest import fetch_wheel, require
from tests.containers_support import containers_created, containers_with_label, tiny_rootfs
from tests.test_smoke import validate
from tests.test_smoke_cli import make_wheel

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
        name, config_dir=config_dir, environ={"ARCHWHEEL_RUN_LABEL": label}
    )
    return ContainerEngine(settings, echo=None)


def _cli(engine: ContainerEngine) -> list[str]:
    return engine.settings.command()


def _require_podman() -> None:
    require(shutil.which("podman") is not None, "podman is not installed (apt-get install podman)")


@pytest.fixture
def run_label() -> str:
    return f"archwheel.test={uuid.uuid4().hex[:12]}"


# -- how each step's container is asked for (no engine needed) -----------------------------------


def _offline_environment(
    tmp_path: Path, name: str, environ: dict[str, str] | None = None, **kw: bool
) -> ContainerEnvironment:
    """An environment whose engine program is /bin/true: argv only, nothing runs."""
    settings = EngineSettings.create(
        name, program="/bin/true", config_dir=tmp_path, environ=environ or {}
    )
    wheel = make_wheel(tmp_path, "tiny")
    env = ContainerEnvironment(
        wheels=(wheel,),
        image="img:1",
        engine=ContainerEngine(settings, echo=None),
        no_gpu_request_for_tests=kw.get("no_gpu", False),
    )
    env.root = tmp_path / "root"
    return env


@pytest.mark.parametrize(
    ("engine", "gpu_flags"),
    [("docker", ["--gpus", "all"]), ("podman", ["--device", "nvidia.com/gpu=all"])],
)
def test_each_step_is_its_own_named_container_with_the_gpus_and_no_network(
    tmp_path: Path, engine: str, gpu_flags: list[str]
) -> None:
    env = _offline_environment(tmp_path, engine, environ={"ARCHWHEEL_PODMAN_RUNTIME": "runc"})
    command = env.command(
        "probe",
        ["probe", "--result", "{result}"],
        timeout=30,
        env={"CUDA_DISABLE_PTX_JIT": "1"},
        unset_env=("CUDA_FORCE_PTX_JIT",),
    )
    argv = list(command.argv)
    name = f"archwheel-smoke-{env.run_id}-probe"
    assert argv[0] == "/bin/true"
    assert argv[1 : argv.index("run")] == (["--runtime", "runc"] if engine == "podman" else [])
    assert argv[argv.index("run") + 1 : argv.index("run") + 4] == ["--rm", "--name", name]
    joined = " ".join(argv)
    assert " ".join(gpu_flags) in joined
    assert "--network none" in joined
    assert f"--label {SMOKE_LABEL}={env.run_id}" in joined
    assert f"--user {os.getuid()}:{os.getgid()}" in joined
    assert "--env CUDA_DISABLE_PTX_JIT=1" in joined
    assert argv[argv.index("img:1") :] == [
        "img:1", f"{CONTAINER_WORKDIR}/venv/bin/python", "-I",
        f"{CONTAINER_WORKDIR}/smoke_payload.py", "probe",
        "--result", f"{CONTAINER_WORKDIR}/result-probe.json",
    ]  # fmt: skip
    # The watchdog reads the result at the host side of the bind mount, and the engine's
    # own environment (podman's containers.conf) goes to the client, not into the container.
    assert command.result_file == tmp_path / "root" / "result-probe.json"
    assert dict(command.env) == dict(env.engine.settings.env)
    assert command.on_hang is not None


def test_the_test_only_switch_drops_the_gpu_request_and_says_so(tmp_path: Path) -> None:
    env = _offline_environment(tmp_path, "docker", no_gpu=True)
    argv = env.command("probe", ["probe"], timeout=30, env={}, unset_env=()).argv
    assert "--gpus" not in argv
    assert env.description == "docker image img:1 (no GPU requested: test mode)"
    assert _offline_environment(tmp_path, "docker").description == (
        "docker image img:1 (GPUs: all)"
    )


def test_kept_containers_are_not_run_with_rm(tmp_path: Path) -> None:
    env = _offline_environment(tmp_path, "docker", environ={"ARCHWHEEL_KEEP_CONTAINERS": "1"})
    assert "--rm" not in env.command("probe", ["probe"], timeout=30, env={}, unset_env=()).argv


def test_a_wheel_path_a_mount_cannot_carry_is_a_usage_error(tmp_path: Path) -> None:
    folder = tmp_path / "a,b"
    folder.mkdir()
    wheel = make_wheel(folder, "tiny")
    settings = EngineSettings.create("docker", program="/bin/true", environ={})
    with pytest.raises(UsageError, match="paths with ',' or '=' are not supported"):
        ContainerEnvironment(
            wheels=(wheel,), image="img:1", engine=ContainerEngine(settings, echo=None)
        )


def test_the_hosts_constraint_files_are_passed_to_smoke(tmp_path: Path) -> None:
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("torch<=2.14.1\n")
    settings = PipSettings.from_config_lines(
        [f"global.constraint='{constraints} {tmp_path / 'absent.txt'}'"]
    )
    assert settings.constraints == (constraints, tmp_path / "absent.txt")
    assert settings.override(index_url="https://x/simple").constraints == settings.constraints
    mounts = settings.constraint_mounts()
    assert [(m.source, m.target, m.read_only) for m in mounts] == [
        (str(constraints), "/etc/archwheel/constraints/0.txt", True)
    ]
    assert settings.constraint_env() == {"PIP_CONSTRAINT": "/etc/archwheel/constraints/0.txt"}
    # Builds do not pass them (docs/builds.md): they are not in the build's mounts and env.
    assert "PIP_CONSTRAINT" not in settings.container_env()
    assert settings.mounts() == ()


# -- real containers ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def python_image(docker_engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``archwheel-test/smoke-python:<random>``: the local Debian base image plus python3-venv.

    The base image is ``archwheel/debian:bookworm`` (``.ci/setup-engine.sh`` or
    ``archwheel base-image`` makes it; made here when missing). About 20 s with the host network.
    """
    engine = ContainerEngine(EngineSettings.create("docker"), echo=None)
    base = ensure_base_image(engine)
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
    validate(report.to_json_dict())
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
