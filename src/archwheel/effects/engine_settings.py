"""What differs between docker and podman (``EngineSettings``), resolved once, as a frozen value.

Podman on hosts that refuse its default rlimits needs a ``containers.conf`` with
``default_ulimits = []`` (via ``CONTAINERS_CONF``) and, where crun refuses the cgroup layout,
``--runtime runc``; docker needs neither. ``engine.ContainerEngine`` runs the commands these
settings describe.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from archwheel.effects.files import write_text_atomic
from archwheel.effects.settings import Settings
from archwheel.errors import UsageError

EngineName = Literal["docker", "podman"]
ENGINES: tuple[EngineName, ...] = ("docker", "podman")
PODMAN_CONF_TEXT = "[containers]\ndefault_ulimits = []\n"


@dataclass(frozen=True)
class EngineSettings:
    """Everything that differs between docker and podman, resolved once."""

    name: EngineName
    program: str
    global_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    keep_containers: bool = False
    run_label: str | None = None

    @classmethod
    def create(
        cls,
        name: str,
        settings: Settings,
        *,
        program: str | None = None,
        config_dir: Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> EngineSettings:
        """Settings for ``docker`` or ``podman`` (``program`` overrides the executable), with
        archwheel's ``settings`` (keep containers, run label, podman's runtime; podman's
        configuration goes into ``config_dir``, default the cache folder). ``environ`` is
        read for podman's own ``CONTAINERS_CONF`` only."""
        environ = os.environ if environ is None else environ
        if name not in ENGINES:
            raise UsageError(f"unknown container engine {name!r}", hint="use docker or podman")
        keep = settings.keep_containers
        label = settings.run_label
        if name == "docker":
            # The legacy builder: BuildKit (buildx) is often absent, and it needs entitlements
            # for --network host. DOCKER_BUILDKIT=0 makes the choice explicit.
            return cls(
                "docker",
                program or "docker",
                env=MappingProxyType({"DOCKER_BUILDKIT": "0"}),
                keep_containers=keep,
                run_label=label,
            )
        env: dict[str, str] = {}
        if not environ.get("CONTAINERS_CONF"):
            conf_dir = config_dir or settings.cache
            env["CONTAINERS_CONF"] = str(write_podman_conf(conf_dir))
        runtime = settings.podman_runtime
        if runtime is None:
            runtime = "runc" if shutil.which("runc") else ""
        global_args = ("--runtime", runtime) if runtime else ()
        return cls(
            "podman",
            program or "podman",
            global_args=global_args,
            env=MappingProxyType(env),
            keep_containers=keep,
            run_label=label,
        )

    def command(self, *args: str) -> list[str]:
        """The engine's command line for ``args``: the program, its global flags, ``args``."""
        return [self.program, *self.global_args, *args]

    def gpu_args(self, request: str) -> list[str]:
        """``run`` flags that attach GPUs (``request``: ``all``, or a device index or UUID).

        Docker asks the NVIDIA Container Toolkit with ``--gpus``; podman (before 5.0 it has no
        ``--gpus``) asks for the CDI device ``nvidia.com/gpu=...``, which needs a CDI
        specification (``nvidia-ctk cdi generate``). Without them the container does not start.
        """
        if self.name == "podman":
            return ["--device", f"nvidia.com/gpu={request}"]
        return ["--gpus", request]


def write_podman_conf(directory: Path) -> Path:
    """A containers.conf that lets podman start containers where rlimits cannot be raised."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "podman-containers.conf"
    if not path.is_file() or path.read_text() != PODMAN_CONF_TEXT:
        write_text_atomic(path, PODMAN_CONF_TEXT)
    return path


def parse_version(text: str) -> tuple[int, ...]:
    """``20.10.24+dfsg1`` -> (20, 10, 24)."""
    parts: list[int] = []
    for piece in text.strip().split("."):
        digits = ""
        for ch in piece:
            if ch not in "0123456789":  # str.isdigit takes "²", which int() refuses
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
        if len(digits) != len(piece):
            break
    return tuple(parts)
