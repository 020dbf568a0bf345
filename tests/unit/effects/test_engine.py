"""The container engine wrapper without an engine: settings, command lines, command echo, signals
(real containers, docker and podman: tests/integration/docker/test_engine.py).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from archwheel.effects.engine import (
    ContainerEngine,
    ContainerSpec,
    EngineSettings,
    Mount,
    sigterm_as_exit,
)
from archwheel.effects.engine_settings import PODMAN_CONF_TEXT, parse_version
from archwheel.effects.owner import current_owner
from archwheel.effects.process import find_program, quote_command, run_program
from archwheel.effects.settings import Settings
from archwheel.errors import ToolError, UsageError

# -- settings and helpers (no engine needed) -----------------------------------------------------


def test_quote_command_is_shell_quoting() -> None:
    assert quote_command(["docker", "run", "--env", "A=b c", "x;y"]) == (
        "+ docker run --env 'A=b c' 'x;y'"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [("20.10.24+dfsg1", (20, 10, 24)), ("4.3.1", (4, 3, 1)), ("28.2.2", (28, 2, 2)), ("x", ())],
)
def test_parse_version(text: str, expected: tuple[int, ...]) -> None:
    assert parse_version(text) == expected


def test_missing_program_is_a_tool_error_naming_it() -> None:
    with pytest.raises(ToolError, match="couldn't find no-such-engine-xyz in PATH"):
        find_program("no-such-engine-xyz")


def test_run_program_failure_says_what_failed(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=r"exit 3.*boom"):
        run_program(["sh", "-c", "echo boom >&2; exit 3"], echo=None)


def test_docker_settings_force_the_legacy_builder() -> None:
    settings = EngineSettings.create("docker", Settings(), environ={})
    assert settings.command("ps") == ["docker", "ps"]
    assert settings.env["DOCKER_BUILDKIT"] == "0"
    assert not settings.keep_containers


def test_podman_settings_write_a_containers_conf(tmp_path: Path) -> None:
    settings = EngineSettings.create(
        "podman",
        Settings.from_environ({"ARCHWHEEL_PODMAN_RUNTIME": "runc"}),
        config_dir=tmp_path,
        environ={},
    )
    conf = Path(settings.env["CONTAINERS_CONF"])
    assert conf.read_text() == PODMAN_CONF_TEXT
    assert "default_ulimits = []" in conf.read_text()
    assert settings.command("ps") == ["podman", "--runtime", "runc", "ps"]


def test_podman_settings_respect_a_users_containers_conf(tmp_path: Path) -> None:
    settings = EngineSettings.create(
        "podman",
        Settings.from_environ({"ARCHWHEEL_PODMAN_RUNTIME": ""}),
        config_dir=tmp_path,
        environ={"CONTAINERS_CONF": "/etc/mine.conf"},
    )
    assert "CONTAINERS_CONF" not in settings.env
    assert settings.global_args == ()
    assert not (tmp_path / "podman-containers.conf").exists()


def test_keep_containers_comes_from_the_environment() -> None:
    assert EngineSettings.create(
        "docker", Settings.from_environ({"ARCHWHEEL_KEEP_CONTAINERS": "1"})
    ).keep_containers
    assert not EngineSettings.create(
        "docker", Settings.from_environ({"ARCHWHEEL_KEEP_CONTAINERS": "0"})
    ).keep_containers


def test_unknown_engine_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown container engine 'dockr'"):
        EngineSettings.create("dockr", Settings())


def test_engine_that_is_not_installed_says_so() -> None:
    settings = EngineSettings("docker", "no-such-docker-binary")
    with pytest.raises(ToolError, match="couldn't find no-such-docker-binary in PATH"):
        ContainerEngine(settings, echo=None).version()


def test_mount_flags() -> None:
    assert Mount("/a b", "/src", read_only=True).flag() == [
        "--mount",
        "type=bind,source=/a b,target=/src,readonly",
    ]
    assert Mount("archwheel-ccache", "/ccache", volume=True).flag()[1].startswith("type=volume")
    with pytest.raises(UsageError, match="paths with ','"):
        Mount("/x,y", "/src").flag()


def test_gpu_request_is_engine_specific() -> None:
    assert EngineSettings.create("docker", Settings(), environ={}).gpu_args("all") == [
        "--gpus",
        "all",
    ]
    podman = EngineSettings("podman", "podman", global_args=("--runtime", "runc"))
    # podman 4 has no --gpus: it asks for the CDI device NVIDIA's toolkit describes.
    assert podman.gpu_args("all") == ["--device", "nvidia.com/gpu=all"]


def test_run_command_is_a_foreground_run_with_the_specs_flags(tmp_path: Path) -> None:
    settings = EngineSettings("podman", "/bin/true", global_args=("--runtime", "runc"))
    engine = ContainerEngine(settings, echo=None)
    spec = ContainerSpec(
        image="img:1",
        network="none",
        user="1000:1000",
        workdir="/w",
        mounts=(Mount(str(tmp_path), "/w"),),
        env={"B": "2", "A": "1"},
        labels={"org.example": "x"},
        gpus="all",
    )
    argv = engine.run_command(spec, ["python3", "-c", "pass"], name="archwheel-t")
    assert argv == [
        "/bin/true", "--runtime", "runc", "run", "--rm", "--name", "archwheel-t",
        "--label", "archwheel", "--label", f"archwheel.owner={current_owner().token()}",
        "--label", "org.example=x", "--network", "none",
        "--user", "1000:1000", "--workdir", "/w",
        "--mount", f"type=bind,source={tmp_path},target=/w", "--env", "A=1", "--env", "B=2",
        "--device", "nvidia.com/gpu=all", "img:1", "python3", "-c", "pass",
    ]  # fmt: skip


def test_run_command_keeps_the_container_when_asked() -> None:
    settings = EngineSettings.create(
        "docker",
        Settings.from_environ({"ARCHWHEEL_KEEP_CONTAINERS": "1"}),
        program="/bin/true",
    )
    argv = ContainerEngine(settings, echo=None).run_command(
        ContainerSpec(image="img:1"), ["true"], name="archwheel-t"
    )
    assert "--rm" not in argv
    assert "--gpus" not in argv  # no GPU unless the spec asks


def _terminate_self() -> None:
    with sigterm_as_exit():
        os.kill(os.getpid(), 15)
        time.sleep(5)  # the handler raises before this ends


def test_sigterm_becomes_system_exit() -> None:
    with pytest.raises(SystemExit) as info:
        _terminate_self()
    assert info.value.code == 143


@pytest.mark.parametrize("image", ["--privileged", "-v/:/host", "", "img name", "img;rm"])
def test_an_image_that_would_be_read_as_a_flag_is_refused(image: str) -> None:
    """The flags of `run` end at the image: an "image" starting with '-' would be one more flag
    (--privileged, a bind mount of /)."""
    engine = ContainerEngine(EngineSettings("docker", "/bin/true"), echo=None)
    with pytest.raises(UsageError, match="is not an image reference"):
        engine.run_command(ContainerSpec(image=image), ["true"], name="archwheel-t")


@pytest.mark.parametrize("source", ["/etc", "../x", ".", "", "a"])
def test_a_volume_that_would_be_a_bind_mount_is_refused(source: str) -> None:
    with pytest.raises(UsageError, match="is not a volume name"):
        Mount(source, "/cache", volume=True).flag()
    assert Mount("archwheel-ccache", "/cache", volume=True).flag() == [
        "--mount", "type=volume,source=archwheel-ccache,target=/cache"
    ]  # fmt: skip


def test_image_references_of_every_form_are_accepted() -> None:
    engine = ContainerEngine(EngineSettings("docker", "/bin/true"), echo=None)
    for image in ("archwheel/debian:bookworm", "registry.local:5000/team/img:1.2",
                  "img@sha256:" + "a" * 64, "archwheel/builder:433b06ed8d2fd8aa"):  # fmt: skip
        argv = engine.run_command(ContainerSpec(image=image), ["true"], name="archwheel-t")
        assert argv[-2] == image
