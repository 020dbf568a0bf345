"""Shared test fixtures and hooks: real wheels, real tools, and the strict mode CI uses.

Tests that need an external component (nvcc, docker, cuobjdump, the real torch wheel) get it
through these fixtures; ``tests.support.components`` says what a missing one does (skip, or fail
with ``ARCHWHEEL_STRICT=1``). GPU tests are always skipped without a GPU. Fixtures that live in
helper modules are loaded as plugins below. Helpers are imported from ``tests.support``, never
from here.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from archwheel.crosscheck.cuobjdump import Cuobjdump, find_cuobjdump
from archwheel.effects.settings import Settings
from tests.support.cli import CliRun
from tests.support.components import (
    TORCH_SPEC,
    TORCHVISION_SPEC,
    SessionCuobjdump,
    docker_available,
    fetch_wheel,
    find_nvcc,
    gpu_present,
    require,
)
from tests.support.nvcc_fixtures import NvccCorpus, build_corpus
from tests.support.paths import CACHE

# Fixtures shared by several test modules, kept in the helper modules that use them.
pytest_plugins = [
    "tests.support.disk",  # first: tests.support.venvs imports it
    "tests.support.venvs",
    "tests.support.cuda_toolchains",
    "tests.support.scanner",
    "tests.support.cuobjdump_support",
    "tests.support.doctor_fakes",
    "tests.support.can_load_fakes",
    "tests.support.extension_builds",
    "tests.support.farm",
]


@pytest.fixture(scope="session")
def torch_wheel() -> Path:
    """The real torch 2.14.1 CUDA 13.0 wheel (about 555 MB)."""
    return fetch_wheel(TORCH_SPEC)


@pytest.fixture(scope="session")
def torchvision_wheel() -> Path:
    """The real torchvision 0.29.1 CUDA wheel."""
    return fetch_wheel(TORCHVISION_SPEC)


@pytest.fixture(scope="session")
def nvcc() -> Path:
    path = find_nvcc()
    require(path is not None, "nvcc 13 not found (install it or the nvidia-cuda-nvcc wheels)")
    assert path is not None
    return path


@pytest.fixture(scope="session")
def docker_engine() -> str:
    """The docker CLI, with a daemon answering `docker info`."""
    require(docker_available(), "no running Docker engine (`docker info` fails)")
    path = shutil.which("docker")
    assert path is not None
    return path


def pytest_configure(config: pytest.Config) -> None:
    # A shell without job control starts background jobs with SIGINT ignored, and Python then
    # installs no KeyboardInterrupt handler (nor do the archwheel processes the tests start).
    # The tests of Ctrl-C need it delivered as a terminal delivers it, wherever pytest runs.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if gpu_present():
        return
    skip_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU and driver (none on this machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture
def cli_run(capsys: pytest.CaptureFixture[str]) -> CliRun:
    """Run ``archwheel.interfaces.cli.main`` in-process; returns (code, stdout, stderr)."""
    from archwheel.interfaces.cli import main

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


# -- the cuobjdump oracle and the nvcc fixture corpus (tests/support/nvcc_fixtures.py) ------------


@pytest.fixture(scope="session")
def cuobjdump() -> Cuobjdump:
    """NVIDIA's cuobjdump (PATH, CUDA_HOME or the nvidia-cuda-cuobjdump wheel), memoized."""
    path = find_cuobjdump(Settings.from_environ(os.environ))
    require(path is not None, "cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    assert path is not None
    return SessionCuobjdump(path)


@pytest.fixture(scope="session")
def nvcc_corpus(nvcc: Path) -> NvccCorpus:
    """The nvcc 13 fixture corpus (tests/support/nvcc_fixtures.py), compiled once per cache key."""
    return build_corpus(nvcc, CACHE / "nvcc-fixtures")
