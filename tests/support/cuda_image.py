"""A local stand-in for a base image that already holds a CUDA toolkit (``nvidia/cuda:*-devel``).

No registry is reachable on the CI machines, so NVIDIA's and PyTorch's images cannot be pulled.
``build_cuda_in_image`` makes ``archwheel-test/cuda-in-image:<random>`` from archwheel's own
Debian base (``tests/support/data/cuda-in-image/Dockerfile``): the pinned CUDA 13.0 wheels that
archwheel's PyPI toolchain uses (downloaded once into the cache with the host's pip settings) are
unpacked on the host into ``/usr/local/cuda-13.0`` with the ``CUDA_HOME`` fixes,
``/usr/local/cuda`` points at it, and ``CUDA_VERSION`` is set in the environment, as in
NVIDIA's images.

The engine's layer cache makes a rebuild from the same wheels and base nearly free, so a test
session pays for the image once per machine.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from pathlib import Path

from archwheel.effects.pipconfig import PipSettings
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild.images.builder_image import download_toolchain
from archwheel.wheelbuild.recipes.recipe import pypi_toolchains
from archwheel.wheelbuild.recipes.recipe_model import ToolchainSpec

DOCKERFILE_DIR = Path(__file__).resolve().parent / "data" / "cuda-in-image"
REPOSITORY = "archwheel-test/cuda-in-image"
CUDA = CudaVersion(13, 0)
_NVCC_WHEEL = re.compile(r"^nvidia_cuda_nvcc-(\d+\.\d+\.\d+)")


def toolkit_wheels(cache: Path) -> list[Path]:
    """The pinned CUDA 13.0 toolchain wheels, downloaded once into ``cache``."""
    known = pypi_toolchains()[CUDA.major]
    dest = cache / f"cuda-in-image-wheels-{CUDA}"
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) < len(known["packages"]):
        dest.mkdir(parents=True, exist_ok=True)
        toolchain = ToolchainSpec(
            CUDA,
            "unused",
            "pypi",
            pypi_packages=tuple(f"{p}=={CUDA}.*" for p in known["packages"]),
        )
        download_toolchain(toolchain, "3.11", dest, PipSettings.from_host(), sink=None)
        wheels = sorted(dest.glob("*.whl"))
    return wheels


def unpack_toolkit(wheels: list[Path], target: Path, prefix: str) -> str:
    """Unpack the files under ``prefix`` (``nvidia/cu13/``) of every wheel into ``target``.

    Keeps the executable bits the wheels record; returns nvcc's version (from its wheel name).
    """
    nvcc_version = ""
    for wheel in wheels:
        m = _NVCC_WHEEL.match(wheel.name)
        if m:
            nvcc_version = m.group(1)
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                if info.is_dir() or not info.filename.startswith(prefix):
                    continue
                relative = Path(info.filename[len(prefix) :])
                assert not relative.is_absolute() and ".." not in relative.parts, info.filename
                dest = target / relative
                dest.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as src, dest.open("wb") as out:
                    shutil.copyfileobj(src, out)
                mode = (info.external_attr >> 16) & 0o777
                dest.chmod(0o755 if mode & 0o111 else 0o644)
    assert nvcc_version, f"no nvidia_cuda_nvcc wheel among {[w.name for w in wheels]}"
    return nvcc_version


def build_cuda_in_image(tag: str, base_image: str, cache: Path, work: Path) -> str:
    """Build the stand-in image as ``tag`` on ``base_image``; returns nvcc's full version."""
    context = work / "context"
    shutil.copytree(DOCKERFILE_DIR, context)
    known = pypi_toolchains()[CUDA.major]
    nvcc_version = unpack_toolkit(
        toolkit_wheels(cache), context / f"cuda-{CUDA}", str(known["prefix"]).rstrip("/") + "/"
    )
    proc = subprocess.run(
        ["docker", "build", "--network", "host", "--force-rm", "--tag", tag,
         "--build-arg", f"BASE_IMAGE={base_image}",
         "--build-arg", f"CUDA_FULL_VERSION={nvcc_version}", str(context)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    shutil.rmtree(context, ignore_errors=True)
    return nvcc_version
