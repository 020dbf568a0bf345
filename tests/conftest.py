"""Shared test fixtures: real wheels, real tools, and the strict mode CI uses.

Tests that need an external component (nvcc, docker, cuobjdump, the real torch wheel) get it
through these fixtures. Where the component is missing, the test is skipped with the reason;
with ``ARCHWHEEL_STRICT=1`` (set by ``.ci/run``) a missing component fails the test instead,
because in CI every non-GPU test must run. GPU tests are always skipped without a GPU.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pytest

from archwheel.binary.cuobjdump import CuobjdumpInventory
from archwheel.crosscheck.cuobjdump import Cuobjdump, find_cuobjdump
from tests.nvcc_fixtures import NvccCorpus, build_corpus

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("ARCHWHEEL_CACHE", ROOT / ".cache"))
STRICT = os.environ.get("ARCHWHEEL_STRICT") == "1"

TORCH_SPEC = "torch==2.14.1"

# Fixtures shared by several test modules, kept in their own files.
pytest_plugins = ["tests.venvs"]
TORCHVISION_SPEC = "torchvision==0.29.1"


def require(condition: bool, reason: str) -> None:
    """Skip (or, in strict mode, fail) when an external component is missing."""
    if condition:
        return
    if STRICT:
        pytest.fail(f"required component missing in strict mode: {reason}")
    pytest.skip(reason)


def fetch_wheel(spec: str) -> Path:
    """`pip download --no-deps` a real wheel once into the cache and return its path."""
    dest = CACHE / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    name, _, version = spec.partition("==")
    pattern = f"{name.replace('-', '_')}-{version}*.whl"
    found = sorted(dest.glob(pattern))
    if not found:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "-d", str(dest), spec],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        found = sorted(dest.glob(pattern))
        require(bool(found), f"could not pip download {spec}: {proc.stderr.strip()[-300:]}")
    return found[-1]


@pytest.fixture(scope="session")
def torch_wheel() -> Path:
    """The real torch 2.14.1 CUDA 13.0 wheel (about 555 MB)."""
    return fetch_wheel(TORCH_SPEC)


@pytest.fixture(scope="session")
def torchvision_wheel() -> Path:
    """The real torchvision 0.29.1 CUDA wheel."""
    return fetch_wheel(TORCHVISION_SPEC)


def find_nvcc() -> Path | None:
    """nvcc 13 from PATH, CUDA_HOME, /usr/local/cuda, or the PyPI toolchain in this venv."""
    candidates: list[Path] = []
    if os.environ.get("CUDA_HOME"):
        candidates.append(Path(os.environ["CUDA_HOME"]) / "bin" / "nvcc")
    on_path = shutil.which("nvcc")
    if on_path:
        candidates.append(Path(on_path))
    candidates.append(Path("/usr/local/cuda/bin/nvcc"))
    for site in map(Path, sys.path):
        candidates.append(site / "nvidia" / "cu13" / "bin" / "nvcc")
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    return None


@pytest.fixture(scope="session")
def nvcc() -> Path:
    path = find_nvcc()
    require(path is not None, "nvcc 13 not found (install it or the nvidia-cuda-nvcc wheels)")
    assert path is not None
    return path


def docker_available() -> bool:
    engine = shutil.which("docker")
    if not engine:
        return False
    proc = subprocess.run([engine, "info"], capture_output=True, check=False, timeout=60)
    return proc.returncode == 0


@pytest.fixture(scope="session")
def docker_engine() -> str:
    """The docker CLI, with a daemon answering `docker info`."""
    require(docker_available(), "no running Docker engine (`docker info` fails)")
    path = shutil.which("docker")
    assert path is not None
    return path


def gpu_present() -> bool:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    proc = subprocess.run([smi, "-L"], capture_output=True, check=False, timeout=60)
    return proc.returncode == 0 and b"GPU" in proc.stdout


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if gpu_present():
        return
    skip_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU and driver (none on this machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


CliRun = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli_run(capsys: pytest.CaptureFixture[str]) -> CliRun:
    """Run ``archwheel.interfaces.cli.main`` in-process; returns (code, stdout, stderr)."""
    from archwheel.interfaces.cli import main

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


# -- the cuobjdump oracle and the nvcc fixture corpus (tests/nvcc_fixtures.py) --------------------


class SessionCuobjdump(Cuobjdump):
    """The real cuobjdump, with ``inventory`` memoized by file content for the session.

    cuobjdump needs about 17 s and 5.5 GB of RAM on torch's libtorch_cuda.so: several tests
    look at that library, and this runs it once.
    """

    _seen: ClassVar[dict[str, CuobjdumpInventory]] = {}

    def inventory(self, path: Path) -> CuobjdumpInventory:
        digest = hashlib.sha256()
        with path.open("rb") as f:
            while block := f.read(1 << 22):
                digest.update(block)
        key = digest.hexdigest()
        if key not in self._seen:
            self._seen[key] = super().inventory(path)
        return dataclasses.replace(self._seen[key], path=path)


@pytest.fixture(scope="session")
def cuobjdump() -> Cuobjdump:
    """NVIDIA's cuobjdump (PATH, CUDA_HOME or the nvidia-cuda-cuobjdump wheel), memoized."""
    path = find_cuobjdump()
    require(path is not None, "cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    assert path is not None
    return SessionCuobjdump(path)


@pytest.fixture(scope="session")
def nvcc_corpus(nvcc: Path) -> NvccCorpus:
    """The nvcc 13 fixture corpus (tests/nvcc_fixtures.py), compiled once per cache key."""
    return build_corpus(nvcc, CACHE / "nvcc-fixtures")
