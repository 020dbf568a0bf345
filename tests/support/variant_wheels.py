"""Wheels of one version, one per arch, published with ``archwheel publish --variants``, and the
real uv (its wheel-variants preview, the NVIDIA provider's detection forced) installing them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

from tests.support.index_wheels import _clean_env, fresh_venv, make_dist, uv_binary

TAGS: Final[dict[str, str]] = {
    "python_tag": f"cp{sys.version_info.major}{sys.version_info.minor}",
    "abi_tag": f"cp{sys.version_info.major}{sys.version_info.minor}",
    "platform_tag": "linux_x86_64",
}
ARCHS = {80: "8.0", 90: "9.0", 120: "12.0"}


def arch_wheels(root: Path, library: Callable[..., bytes]) -> tuple[dict[int, Path], Path]:
    """One wheel ``vext 1.0`` per SM of ``ARCHS`` (library ``_k<sm>.so``) and a default one
    with all three (``_kall.so``); ``library(*sms)`` makes the device code."""

    def wheel(folder: str, libraries: dict[str, bytes]) -> Path:
        return make_dist(root / folder, "vext", "1.0", python_tag=TAGS["python_tag"],
                         abi_tag=TAGS["abi_tag"], platform_tag=TAGS["platform_tag"],
                         libraries=libraries)  # fmt: skip

    per_arch = {sm: wheel(f"sm{sm}", {f"_k{sm}.so": library(sm)}) for sm in ARCHS}
    default = wheel("all", {"_kall.so": library(*ARCHS)})
    return per_arch, default


def uv_variant_install(
    venv: Path, install_from: list[str], sm: str, driver: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``uv pip install --preview-features wheel-variants`` of ``vext`` into a fresh venv with
    the GPU and driver forced; the libraries of the installed package (none: nothing)."""
    python = fresh_venv(venv)
    env = _clean_env()
    env["NV_VARIANT_PROVIDER_FORCE_SM_ARCH"] = sm
    env["NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION"] = driver
    proc = subprocess.run(
        [uv_binary(), "pip", "install", "--no-cache", "--preview-features", "wheel-variants",
         "--python", str(python), *install_from, "vext"],
        capture_output=True, text=True, check=False, timeout=300, env=env,
    )  # fmt: skip
    return proc, installed_libraries(venv)


def installed_libraries(venv: Path) -> list[str]:
    return sorted(p.name for p in venv.glob("lib/python3*/site-packages/vext/*.so"))
