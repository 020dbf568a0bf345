"""The shipped extension recipes built once per test session on a real Docker engine.

``extension_builds`` builds each recipe of ``RECIPES`` at most once, for one arch (``9.0``),
against torch 2.14.1 (CUDA 13.0), on first request: torch-scatter 2.1.2 from its sdist
(setuptools + CUDAExtension, about 9 min on the 2-core machine) and archwheel's libtorch example
(CMake ``find_package(Torch)``, about 1 min once the torch image exists). Every test that needs
such a wheel (tests/integration/docker/test_build_torch_extensions.py, the can-load cases in
tests/integration/docker/test_extension_can_load.py) reads the same one. Every container carries
a label unique to the session, so the tests can prove that none was left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from archwheel.binary.scan.inputs import scan_path
from archwheel.facts.arch import CodeKind

CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]
ARCH = "9.0"
RECIPES = ("torch-scatter-2.1.2", "libtorch-ops")


@dataclass(frozen=True)
class Built:
    recipe: str
    returncode: int
    stderr: str
    document: dict[str, object]
    wheel: Path
    provenance: dict[str, object]
    seconds: float


class Session:
    """One label, one compiler-cache volume and one output folder; each recipe built once."""

    def __init__(self, env: dict[str, str], label: str, volume: str, out: Path) -> None:
        self.env = env
        self.label = label
        self.ccache_volume = volume
        self.out = out
        self._built: dict[str, Built] = {}

    def build(self, recipe: str) -> Built:
        if recipe not in self._built:
            mark = time.monotonic()
            proc = run_cli(
                self.env, "build", "--recipe", recipe, "--arch", ARCH, "--out", str(self.out),
                "--ccache-volume", self.ccache_volume, "--format", "json",
            )  # fmt: skip
            seconds = time.monotonic() - mark
            document = json.loads(proc.stdout) if proc.returncode == 0 else {}
            wheel = Path(str(document.get("wheel", self.out / "missing.whl")))
            provenance = (
                json.loads(Path(str(document["provenance"])).read_text()) if document else {}
            )
            self._built[recipe] = Built(
                recipe, proc.returncode, proc.stderr, document, wheel, provenance, seconds
            )
        return self._built[recipe]


def ok(session: Session, recipe: str) -> Built:
    result = session.build(recipe)
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def run_cli(
    session_env: dict[str, str], *args: str, timeout: float = 3600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], env=session_env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="session")
def extension_builds(
    docker_engine: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Session]:
    label = f"archwheel.test={uuid.uuid4().hex}"
    volume = f"archwheel-test-ccache-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", "ARCHWHEEL_RUN_LABEL": label}
    made = run_cli(env, "base-image")
    assert made.returncode == 0, made.stderr[-2000:]
    out = tmp_path_factory.mktemp("torch-extensions") / "dist"
    yield Session(env, label, volume, out)
    subprocess.run(["docker", "volume", "rm", "--force", volume], capture_output=True, check=False)


def device_images(wheel: Path) -> dict[str, set[str]]:
    """Every library with device code -> its SASS and PTX images (an independent scan)."""
    inventory = scan_path(wheel)
    assert inventory.complete, [p.one_line() for p in inventory.problems]
    found: dict[str, set[str]] = {}
    for library in inventory.libraries:
        images = {
            e.target.name(e.kind)
            for e in library.entries
            if e.kind in (CodeKind.SASS, CodeKind.PTX)
        }
        if images:
            found[str(library.path)] = images
    return found
