"""``archwheel smoke`` on the command line: usage errors and real venv installs of small real wheels
(the docker backend against a real engine: tests/integration/docker/test_smoke_cli.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.cli import CliRun
from tests.support.components import require
from tests.support.schemas import validate_smoke
from tests.support.wheels import make_wheel

# --------------------------------------------------------------------------------------------
# usage errors: one line, exit 2, nothing run


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "no wheels given"),
        (("missing.whl",), "wheel not found: missing.whl"),
        (("--backend", "existing"), "--backend existing needs --interpreter PATH"),
        (("--backend", "docker", "{wheel}"), "--backend docker needs --image IMAGE"),
        (("{wheel}", "--steps", "matmul_fp64"), "unknown smoke step matmul_fp64"),
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
    cli_run: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARCHWHEEL_CACHE", str(tmp_path / "cache"))  # no kept base venv yet
    wheel = make_wheel(tmp_path, "tiny_ext")
    code, out, err = cli_run("smoke", str(wheel), "--format", "json")
    assert code == 1, err
    document = json.loads(out)
    validate_smoke(document)
    assert document["verdict"] == "torch-broken"
    assert document["message"].startswith("torch does not import: ModuleNotFoundError")
    assert [s["name"] for s in document["stages"]] == ["create-venv", "install", "probe"]
    assert all(s["ok"] for s in document["stages"])


@pytest.mark.slow
def test_an_unresolvable_requirement_is_an_environment_failure_with_pip_s_words(
    cli_run: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARCHWHEEL_CACHE", str(tmp_path / "cache"))
    empty_index = tmp_path / "empty-index"
    empty_index.mkdir()
    wheel = make_wheel(tmp_path, "needs_missing", requires=("archwheel-test-absent-dist==9.9",))
    code, out, err = cli_run(
        "smoke", str(wheel), "--index", empty_index.as_uri(), "--format", "json"
    )
    assert code == 4, err
    document = json.loads(out)
    validate_smoke(document)
    assert document["verdict"] == "environment-failed"
    # the requirements go into the kept base venv first: that is where pip says no
    assert document["message"].startswith(
        "installing the wheels' requirements failed (install-base) exited with code"
    )
    assert "archwheel-test-absent-dist" in document["message"]
    install = document["stages"][-1]
    assert install["name"] == "install-base"
    assert install["ok"] is False
    # no half base is left for a later run to trust
    bases = tmp_path / "cache" / "archwheel" / "smoke-venvs"
    assert not bases.exists() or not [p for p in bases.iterdir() if not p.name.endswith(".owner")]


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
    validate_smoke(document)
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
    validate_smoke(document)
    assert document["verdict"] == "interrupted"
    assert document["message"] == "interrupted after 0 steps"
    assert "Traceback" not in err


def test_output_is_written_whole_or_not_at_all(cli_run: CliRun, tmp_path: Path) -> None:
    # The report is written to a new file renamed over the old one: a reader
    # (or a hard link) never sees a half-written report, and a failed write leaves no part file.
    require(shutil.which("docker") is not None, "the docker CLI is not installed")
    wheel = make_wheel(tmp_path, "tiny")
    folder = tmp_path / "reports"
    folder.mkdir()
    target = folder / "smoke.json"
    target.write_text("previous\n")
    keep = tmp_path / "previous.json"
    os.link(target, keep)  # the old report's inode: rewritten in place, it would change too
    os.environ["DOCKER_HOST"] = f"unix://{tmp_path}/no-daemon.sock"
    try:
        args = ("--backend", "docker", "--image", "any:1")
        code, _, err = cli_run("smoke", str(wheel), *args, "--output", str(target))
        assert code == 4, err
        assert keep.read_text() == "previous\n"
        validate_smoke(json.loads(target.read_text()))
        assert sorted(p.name for p in folder.iterdir()) == ["smoke.json"]

        blocked = folder / "blocked.json"
        blocked.mkdir()  # a folder: refused before anything, as every command's -o
        code, _, err = cli_run("smoke", str(wheel), *args, "--output", str(blocked))
        assert code == 2, err
        assert f"{blocked}: is a folder" in err
        assert sorted(p.name for p in folder.iterdir()) == ["blocked.json", "smoke.json"]
        assert not any(blocked.iterdir())
    finally:
        del os.environ["DOCKER_HOST"]
