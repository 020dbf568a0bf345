"""Compressed fatbins for every extension build, as the official torch wheels have them.

nvcc stores device code uncompressed unless told (``-Xfatbin -compress-all``, nvcc >= 12.4);
PyTorch's own pipeline passes ``-Xfatbin -compress-all`` and, on 13.x, ``-compress-mode=size``
(ZSTD: every entry of the official wheels is, cuda-facts.md section 5). An extension recipe
gets the same through ``NVCC_APPEND_FLAGS``, which nvcc itself reads whatever build system
calls it, unless a variable of the recipe already chooses (``-compress-all``,
``-no-compress``, ``-compress-mode``) or ``[build] compress_fatbins = false``. The driver
decompresses a module once, when it loads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from archwheel.facts.versions import CudaVersion

FIRST_COMPRESSING = CudaVersion(12, 4)  # -Xfatbin -compress-all compresses cubins
FIRST_SIZE_MODE = CudaVersion(13, 0)  # the official pipeline adds -compress-mode=size from 13.x
_CHOSEN_BY_RECIPE = ("compress-all", "no-compress", "compress-mode")


@dataclass(frozen=True)
class FatbinCompression:
    """The fatbin compression flags chosen for an extension build, and the plan's reason."""

    flags: str  # appended to NVCC_APPEND_FLAGS ("" when archwheel adds none)
    why: str  # the plan's row

    def describe(self) -> str:
        """The plan's row: the flags and why, or only why when archwheel adds none."""
        return f"{self.flags}: {self.why}" if self.flags else self.why


def choose_compression(
    cuda: CudaVersion, recipe_env: Mapping[str, str], *, enabled: bool
) -> FatbinCompression:
    """The flags an extension build's nvcc gets for compressed fatbins, and why."""
    if not enabled:
        return FatbinCompression("", "as nvcc leaves them ([build] compress_fatbins = false)")
    for name, value in sorted(recipe_env.items()):
        if any(word in value for word in _CHOSEN_BY_RECIPE):
            return FatbinCompression("", f"the recipe's own choice ({name})")
    if cuda < FIRST_COMPRESSING:
        return FatbinCompression("", f"uncompressed: CUDA {cuda} predates -compress-all (12.4)")
    flags = "-Xfatbin -compress-all"
    if cuda >= FIRST_SIZE_MODE:
        flags += " -compress-mode=size"
    return FatbinCompression(flags, "compressed as the official torch wheels' fatbins")
