"""Virtual environments for tests that inspect installed packages (doctor, verify --env) or
confirm a can-load verdict by a real import.

``torch_venv`` holds the real torch 2.14.1 CUDA wheel with its nvidia-* dependencies (about a
minute once; cached under ``.cache/venvs``); the other torches (2.13.0 with CUDA 13.0,
2.13.0+cpu, 2.9.1 with CUDA 12.8) likewise. Each is installed from the wheel ``fetch_wheel``
keeps in the cache, so each torch wheel is downloaded once; their ``nvidia-*`` dependencies come
from the configured index. 2.13.0 and 2.14.1 pin the same ``cuda-toolkit[...]==13.0.3``: the
2.13.0 venv starts as a hard-linked copy of 2.14.1's, so those wheels are on the disk once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.components import fetch_wheel, require
from tests.support.disk import prune_after_module
from tests.support.paths import CACHE

BARE_VENV = CACHE / "venvs" / "bare"
TORCH_CPU_VENV = CACHE / "venvs" / "torch-2.13.0-cpu"
TORCH_CU12_VENV = CACHE / "venvs" / "torch-2.9.1"
# torch 2.9.1 from the index is built with CUDA 12.8 (Requires-Dist nvidia-cuda-runtime-cu12)
TORCH_CU12_SPEC = "torch==2.9.1"


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def installed_version(python: Path, distribution: str) -> str | None:
    if not python.exists():
        return None
    proc = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({distribution!r}))"],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def make_venv(path: Path) -> Path:
    """A venv without pip (fast); install into it with `pip_install`."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return venv_python(path)


def pip_install(python: Path, *args: str, offline: bool = False) -> None:
    """Install into another environment with this interpreter's pip (`pip --python`)."""
    env = dict(os.environ)
    if offline:
        env["PIP_CONFIG_FILE"] = os.devnull
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
        env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(args)} failed: {proc.stderr.strip()[-500:]}")


@pytest.fixture(scope="session")
def torch_venv() -> Path:
    """A venv with the real torch 2.14.1 CUDA wheel and its nvidia-* deps (pip, about 1 min)."""
    return torch_venv_for("2.14.1")


def torch_environment(
    folder: Path, spec: str, version: str, *, start_from: Callable[[], Path] | None = None
) -> Path:
    """A venv at ``folder`` with the torch wheel ``spec`` (``fetch_wheel``) and its
    dependencies; reused while its torch is ``version``.

    ``start_from``: gives a cached venv whose CUDA libraries this torch shares (the same
    ``cuda-toolkit[...]`` pins), asked for only when the venv is made. The new venv starts as a
    hard-linked copy of it and pip replaces only what differs (torch itself), so the 3.5 GB of
    nvidia-* wheels are on the disk once. pip removes a replaced file by unlinking it and writes
    new files, never into old ones, so the source venv is left as it was."""
    python = venv_python(folder)
    if installed_version(python, "torch") != version:
        start = start_from() if start_from is not None else None
        folder.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(folder, ignore_errors=True)
        if start is not None and _same_disk(start, folder.parent):
            subprocess.run(["cp", "-a", "--link", str(start), str(folder)], check=True)
        else:
            make_venv(folder)
        try:
            pip_install(python, str(fetch_wheel(spec)))
        except RuntimeError as exc:
            require(False, str(exc))
    return python


@pytest.fixture(scope="session")
def torch_2130_venv() -> Path:
    """The real torch 2.13.0 CUDA 13.0 wheel with its nvidia-* deps (those of 2.14.1)."""
    return torch_venv_for("2.13.0")


@pytest.fixture(scope="session")
def torch_cpu_venv() -> Path:
    """The real torch 2.13.0+cpu wheel (no libc10_cuda.so, no libtorch_cuda.so)."""
    return torch_environment(TORCH_CPU_VENV, "torch==2.13.0+cpu", "2.13.0+cpu")


@pytest.fixture(scope="module")
def torch_cu12_venv() -> Iterator[Path]:
    """The real torch 2.9.1 (CUDA 12.8, libcudart.so.12) with its nvidia-*-cu12 deps (7.4 GB:
    removed after each module that uses it when pruning, tests/support/disk.py)."""
    yield torch_environment(TORCH_CU12_VENV, TORCH_CU12_SPEC, "2.9.1")
    prune_after_module(TORCH_CU12_VENV)


@pytest.fixture(scope="session")
def bare_venv() -> Path:
    """A venv without torch."""
    python = venv_python(BARE_VENV)
    if not python.exists():
        BARE_VENV.parent.mkdir(parents=True, exist_ok=True)
        make_venv(BARE_VENV)
    return python


def torch_venv_for(version: str) -> Path:
    """A cached venv holding the real CUDA torch ``version`` (``fetch_wheel``: exactly that
    version, not a local ``X+cpu`` build) with its dependencies, about a minute once. Another
    torch than 2.14.1 starts from 2.14.1's venv (``torch_environment``)."""
    start = None if version == "2.14.1" else lambda: torch_venv_for("2.14.1").parent.parent
    return torch_environment(
        CACHE / "venvs" / f"torch-{version}", f"torch=={version}", version, start_from=start
    )


def _same_disk(a: Path, b: Path) -> bool:
    return a.stat().st_dev == b.stat().st_dev


def copy_torch_venv(version: str, path: Path) -> Path:
    """A fresh venv at ``path`` already holding the real torch ``version`` (and its CUDA
    libraries): a hard-linked copy of the cached one (seconds; a plain copy across file
    systems). Installing into it adds files and never writes into the cached venv's files."""
    source = torch_venv_for(version).parent.parent
    same_disk = _same_disk(source, path.parent)
    subprocess.run(["cp", "-a", *(["--link"] if same_disk else []), str(source), str(path)],
                   check=True)  # fmt: skip
    return venv_python(path)
