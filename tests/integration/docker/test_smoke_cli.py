"""``archwheel smoke`` with the docker backend against a real engine without a GPU runtime."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from archwheel.effects.engine import EngineSettings
from archwheel.effects.settings import Settings
from tests.support.cli import CliRun
from tests.support.components import require
from tests.support.containers_support import containers_created, containers_with_label
from tests.support.schemas import validate_smoke
from tests.support.wheels import make_wheel

# --------------------------------------------------------------------------------------------
# the docker backend (docker or podman) on an engine without a GPU runtime: the real path


def _engine_cli(name: str, tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """The engine's command line and environment, as archwheel runs it (engine.py)."""
    settings = EngineSettings.create(
        name, Settings.from_environ(os.environ), config_dir=tmp_path / "engine-conf"
    )
    return settings.command(), {**os.environ, **settings.env}


@pytest.fixture(params=["docker", "podman"])
def engine_and_empty_image(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, str]]:
    """An engine and an image with no files at all, made locally with `import` (no registry)."""
    if request.param == "docker":
        request.getfixturevalue("docker_engine")
    else:
        require(shutil.which("podman") is not None, "podman is not installed")
    cli, env = _engine_cli(request.param, tmp_path)
    tag = f"archwheel-test/empty:{uuid.uuid4().hex[:8]}"
    rootfs = tmp_path / "rootfs"
    rootfs.mkdir()
    tar = subprocess.run(["tar", "-C", str(rootfs), "-c", "."], capture_output=True, check=True)
    subprocess.run([*cli, "import", "-", tag], input=tar.stdout, env=env, check=True,
                   capture_output=True)  # fmt: skip
    try:
        yield request.param, tag
    finally:
        subprocess.run([*cli, "image", "rm", "--force", tag], env=env, capture_output=True,
                       check=False)  # fmt: skip


def _has_gpu_runtime(engine: str, tmp_path: Path) -> bool:
    cli, env = _engine_cli(engine, tmp_path)
    info = subprocess.run([*cli, "info"], env=env, capture_output=True, text=True, check=False)
    return "nvidia" in info.stdout.lower()


@pytest.mark.docker
def test_the_engine_without_gpu_runtime_says_no_cuda_device(
    cli_run: CliRun,
    tmp_path: Path,
    engine_and_empty_image: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine, image = engine_and_empty_image
    if _has_gpu_runtime(engine, tmp_path):
        pytest.skip(f"this {engine} has the NVIDIA runtime: the no-GPU answer cannot be checked")
    label = f"archwheel.test={uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("ARCHWHEEL_RUN_LABEL", label)
    wheel = make_wheel(tmp_path, "tiny")
    since = time.time()
    code, out, err = cli_run(
        "smoke", str(wheel), "--backend", "docker", "--engine", engine, "--image", image,
        "--format", "json",
    )  # fmt: skip
    assert code == 20, err
    document = json.loads(out)
    validate_smoke(document)
    assert document["verdict"] == "no-device"
    assert document["environment"] == f"{engine} image {image} (GPUs: all)"
    assert document["message"].startswith("no CUDA device: the container engine could not run")
    refusal = {
        # docker without the NVIDIA Container Toolkit; podman without a CDI specification
        "docker": 'could not select device driver "" with capabilities: [[gpu]]',
        "podman": "unresolvable CDI devices nvidia.com/gpu=all",
    }
    assert refusal[engine] in document["message"]
    assert [s["name"] for s in document["stages"]] == ["engine", "gpu-attach"]
    cli, _ = _engine_cli(engine, tmp_path)
    if engine == "docker":
        # The GPU request was a real container (its creation is in the engine's event log)...
        assert len(containers_created(cli, label, since)) == 1
    # ... and none is left.
    assert containers_with_label(cli, label) == []
