"""Smoke's container backend (``ContainerEnvironment``) without an engine: each step's ``run`` as
the one engine wrapper builds it (GPU request, network, labels, mounts, the host's constraint
files), kept containers, the TEST-ONLY switch, and wheel paths a mount cannot carry. With real
engines: tests/integration/docker/test_smoke_env_container.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from archwheel.effects.engine import ContainerEngine, EngineSettings
from archwheel.effects.pipconfig import PipSettings
from archwheel.effects.settings import Settings
from archwheel.errors import UsageError
from archwheel.smoke.environments import (
    CONTAINER_WORKDIR,
    SMOKE_LABEL,
    ContainerEnvironment,
)
from tests.support.wheels import make_wheel

# -- how each step's container is asked for (no engine needed) -----------------------------------


def _offline_environment(
    tmp_path: Path, name: str, environ: dict[str, str] | None = None, **kw: bool
) -> ContainerEnvironment:
    """An environment whose engine program is /bin/true: argv only, nothing runs."""
    settings = EngineSettings.create(
        name,
        Settings.from_environ(environ or {}),
        program="/bin/true",
        config_dir=tmp_path,
        environ=environ or {},
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
    settings = EngineSettings.create("docker", Settings(), program="/bin/true", environ={})
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
