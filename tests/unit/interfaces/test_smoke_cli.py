"""``archwheel smoke`` on the command line: usage errors, real venv installs of small real wheels,
and the docker backend against a real engine without a GPU runtime."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from archwheel.effects.engine import EngineSettings
from tests.conftest import CliRun, require
from tests.containers_support import containers_created, containers_with_label
from tests.test_smoke import validate


def make_wheel(folder: Path, name: str, requires: tuple[str, ...] = ()) -> Path:
    """A minimal, valid, pure-Python wheel (one module), written with zipfile."""
    version = "1.0"
    dist_info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": b"VALUE = 1\n",
        f"{dist_info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            + "".join(f"Requires-Dist: {r}\n" for r in requires)
        ).encode(),
        f"{dist_info}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: archwheel-tests\nRoot-Is-Purelib: true\n"
            b"Tag: py3-none-any\n"
        ),
    }
    record_lines = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record_lines.append(f"{path},sha256={digest},{len(data)}")
    record_lines.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(record_lines) + "\n").encode()
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return wheel


# --------------------------------------------------------------------------------------------
# usage errors: one line, exit 2, nothing run


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "no wheels given"),
        (("missing.whl",), "wheel not found: missing.whl"),
        (("--backend", "existing"), "--backend existing needs --python PATH"),
        (("--backend", "docker", "{wheel}"), "--backend docker needs --image IMAGE"),
        (("{wheel}", "--steps", "matmul_fp64"), "unknown smoke step matmul_fp64"),
        (("{wheel}", "--timeout", "0"), "--timeout must be a positive number"),
        (("{wheel}", "--snippet", "nope.py"), "smoke snippet not found: nope.py"),
        (("{wheel}", "--find-links", "no-such-dir"), "--find-links folder not found"),
    ],
)
def test_usage_errors(cli_run: CliRun, tmp_path: Path, argv: tuple[str, ...], message: str) -> None:
    wheel = make_wheel(tmp_path, "tiny")
    args = [a.replace("{wheel}", str(wheel)) for a in argv]
    code, _, err = cli_run("smoke", *args)
    assert code == 2
    assert message in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_file_that_is_not_a_wheel_is_refused(cli_run: CliRun, tmp_path: Path) -> None:
    not_wheel = tmp_path / "torch.tar.gz"
    not_wheel.write_bytes(b"x")
    code, _, err = cli_run("smoke", str(not_wheel))
    assert code == 2
    assert "not a wheel" in err


# --------------------------------------------------------------------------------------------
# real venvs, real pip, small real wheels


@pytest.mark.slow
def test_a_wheel_without_torch_installs_and_is_reported_as_torch_broken(
    cli_run: CliRun, tmp_path: Path
) -> None:
    wheel = make_wheel(tmp_path, "tiny_ext")
    code, out, err = cli_run("smoke", str(wheel), "--format", "json")
    assert code == 1, err
    document = json.loads(out)
    validate(document)
    assert document["verdict"] == "torch-broken"
    assert document["message"].startswith("torch does not import: ModuleNotFoundError")
    assert [s["name"] for s in document["stages"]] == ["create-venv", "install", "probe"]
    assert all(s["ok"] for s in document["stages"])


@pytest.mark.slow
def test_an_unresolvable_requirement_is_an_environment_failure_with_pip_s_words(
    cli_run: CliRun, tmp_path: Path
) -> None:
    empty_index = tmp_path / "empty-index"
    empty_index.mkdir()
    wheel = make_wheel(tmp_path, "needs_missing", requires=("archwheel-test-absent-dist==9.9",))
    code, out, err = cli_run(
        "smoke", str(wheel), "--index", empty_index.as_uri(), "--format", "json"
    )
    assert code == 4, err
    document = json.loads(out)
    validate(document)
    assert document["verdict"] == "environment-failed"
    assert document["message"].startswith("installing the wheels failed (install) exited with code")
    assert "archwheel-test-absent-dist" in document["message"]
    install = document["stages"][-1]
    assert install["name"] == "install"
    assert install["ok"] is False


# --------------------------------------------------------------------------------------------
# the docker backend (docker or podman) on an engine without a GPU runtime: the real path


def _engine_cli(name: str, tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """The engine's command line and environment, as archwheel runs it (engine.py)."""
    settings = EngineSettings.create(name, config_dir=tmp_path / "engine-conf")
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
    validate(document)
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


def test_an_engine_that_does_not_answer_is_an_environment_failure(
    cli_run: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A docker whose daemon is gone: the engine check says so before any container.
    require(shutil.which("docker") is not None, "the docker CLI is not installed")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    wheel = make_wheel(tmp_path, "tiny")
    code, out, err = cli_run(
        "smoke", str(wheel), "--backend", "docker", "--image", "any:1", "--format", "json"
    )
    assert code == 4, err
    document = json.loads(out)
    validate(document)
    assert document["verdict"] == "environment-failed"
    assert document["message"].startswith(
        "the container engine docker cannot be used (engine) docker is installed but does not "
        "answer"
    )
    assert [s["name"] for s in document["stages"]] == ["engine"]


@pytest.mark.slow
def test_sigterm_still_prints_the_report(tmp_path: Path) -> None:
    # An "interpreter" that hangs: the CLI is stuck in the environment check when a CI job's
    # timeout sends SIGTERM. The report must still come out, with its own exit code.
    hanging_python = tmp_path / "python"
    hanging_python.write_text("#!/bin/sh\nexec sleep 600\n")
    hanging_python.chmod(0o755)
    proc = subprocess.Popen(
        [sys.executable, "-m", "archwheel.interfaces.cli", "smoke", "--backend", "existing",
         "--python", str(hanging_python), "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    time.sleep(3)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    document = json.loads(out)
    validate(document)
    assert document["verdict"] == "interrupted"
    assert document["message"] == "interrupted after 0 steps"
    assert "Traceback" not in err
