"""CUDA compilers from PyPI beside the host's, for tests that check a toolkit's facts against the
toolkit itself.

CI has only the host's nvcc 13.0 (``/usr/local/cuda``, or .ci/run's PyPI 13.0 set). Another
13.x release comes from NVIDIA's PyPI wheels: ``nvidia-cuda-nvcc``, ``-runtime``, ``-crt``,
``nvidia-nvvm`` and ``nvidia-cuda-cccl`` of the same minor give a complete nvcc under
``site-packages/nvidia/cu13/bin`` (docs: shared reference cuda-facts.md, section 8). They are
installed once into ``<cache>/venvs/cuda-X.Y`` (13.2: 110 MB of wheels, 305 MB installed; 5 to
10 s from a local index or pip's cache) and reused while every one of them is of that minor.
"""

from __future__ import annotations

import fcntl
import shutil
from pathlib import Path

import pytest

from tests.support.components import require
from tests.support.paths import CACHE
from tests.support.venvs import installed_version, make_venv, pip_install, venv_python

# What nvcc needs to run (cicc, crt headers, cudart headers and static libraries, cccl).
NVCC_WHEELS = (
    "nvidia-cuda-nvcc",
    "nvidia-cuda-runtime",
    "nvidia-cuda-crt",
    "nvidia-nvvm",
    "nvidia-cuda-cccl",
)


def pypi_nvcc(cuda: str) -> Path:
    """The nvcc of CUDA ``cuda`` ("13.2") from NVIDIA's PyPI wheels, in a cached venv.

    A missing wheel skips the test, or fails it in strict mode (``require``)."""
    major = cuda.partition(".")[0]
    root = CACHE / "venvs" / f"cuda-{cuda}"
    python = venv_python(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    with (root.parent / f"cuda-{cuda}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another pytest run may be installing it
        if not _complete(python, cuda) or _nvcc_in(root, major) is None:
            shutil.rmtree(root, ignore_errors=True)
            make_venv(root)
            try:
                pip_install(python, *(f"{name}=={cuda}.*" for name in NVCC_WHEELS))
            except RuntimeError as exc:
                require(False, f"no CUDA {cuda} compiler from the package index: {exc}")
    nvcc = _nvcc_in(root, major)
    require(nvcc is not None, f"the CUDA {cuda} wheels installed no nvcc under {root}")
    assert nvcc is not None
    return nvcc


def _complete(python: Path, cuda: str) -> bool:
    return all(
        (installed_version(python, name) or "").startswith(f"{cuda}.") for name in NVCC_WHEELS
    )


def _nvcc_in(root: Path, major: str) -> Path | None:
    found = sorted(root.glob(f"lib/python3*/site-packages/nvidia/cu{major}/bin/nvcc"))
    return found[-1] if found else None


@pytest.fixture(scope="session")
def nvcc_13_2() -> Path:
    """nvcc 13.2 from the PyPI wheels (installed once into the cache)."""
    return pypi_nvcc("13.2")
