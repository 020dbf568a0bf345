"""The host-side toolchain download asks for every manylinux tag the base image's glibc accepts.

NVIDIA's CUDA 13 component wheels are tagged manylinux_2_25/_2_27/_2_28: a download restricted
to manylinux2014 does not see them. Real downloads from the package index pip is
configured with (a small wheel: nvidia-cuda-cupti 13.0.85, manylinux_2_25, about 11 MB).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from archwheel.effects.pipconfig import PipSettings
from archwheel.errors import ToolError
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild.images.builder_image import DEFAULT_PLATFORMS, download_toolchain
from archwheel.wheelbuild.images.toolkit import manylinux_platforms
from archwheel.wheelbuild.recipes.recipe_model import ToolchainSpec

pytestmark = [pytest.mark.realwheel, pytest.mark.slow]

TOOLCHAIN = ToolchainSpec(
    CudaVersion(13, 0),
    "archwheel/debian:bookworm",
    "pypi",
    pypi_packages=("nvidia-cuda-cupti==13.0.85",),
    pypi_prefix="nvidia/cu13",
    cudart_soname="libcudart.so.13",
)


def test_bookworm_tags_find_a_manylinux_2_25_wheel(tmp_path: Path) -> None:
    download_toolchain(
        TOOLCHAIN, "3.11", tmp_path, PipSettings.from_host(), None,
        platforms=manylinux_platforms((2, 36)),
    )  # fmt: skip
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name.startswith("nvidia_cuda_cupti-13.0.85-")
    assert "manylinux_2_25" in wheel.name


def test_manylinux2014_alone_does_not(tmp_path: Path) -> None:
    assert DEFAULT_PLATFORMS == ("manylinux2014_x86_64",)
    with pytest.raises(ToolError, match="could not download"):
        download_toolchain(
            TOOLCHAIN, "3.11", tmp_path, PipSettings.from_host(), None,
            platforms=DEFAULT_PLATFORMS,
        )  # fmt: skip
