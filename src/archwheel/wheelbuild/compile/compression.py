"""Compressed fatbins for every extension build, as the official torch wheels have them.

nvcc stores device code uncompressed unless told (``-Xfatbin -compress-all``, nvcc >= 12.4);
PyTorch's own pipeline passes ``-Xfatbin -compress-all`` and, on 13.x, ``-compress-mode=size``
(ZSTD: every entry of the official wheels is, cuda-facts.md section 5). An extension recipe
gets the same through ``NVCC_APPEND_FLAGS``, which nvcc itself reads whatever build system
calls it, unless a variable of the recipe already chooses (``-compress-all``,
``-no-compress``, ``-compress-mode``) or ``[build] compress_fatbins`` says otherwise (false, or
one of nvcc's ``-compress-mode`` values; the measured trade-off is in docs/maintainers/
performance.md, "Fatbin compression"). The driver
decompresses a module once, when it loads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from archwheel.errors import RecipeError
from archwheel.facts.versions import CudaVersion

FIRST_COMPRESSING = CudaVersion(12, 4)  # -Xfatbin -compress-all compresses cubins
FIRST_SIZE_MODE = CudaVersion(13, 0)  # the official pipeline adds -compress-mode=size from 13.x
_CHOSEN_BY_RECIPE = ("compress-all", "no-compress", "compress-mode")
# nvcc's -compress-mode values (cuda-facts.md section 5; docs/maintainers/fixtures.md: with
# -compress-all, speed is LZ4 and default/balance/size ZSTD; none compresses nothing, PTX too).
MODES = ("size", "balance", "default", "speed", "none")
# What ``compress_fatbins = true`` means: the mode the measured table justifies
# (docs/maintainers/performance.md, "Fatbin compression").
DEFAULT_MODE = "size"


@dataclass(frozen=True)
class FatbinCompression:
    """The fatbin compression flags chosen for an extension build, and the plan's reason."""

    flags: str  # appended to NVCC_APPEND_FLAGS ("" when archwheel adds none)
    why: str  # the plan's row

    def describe(self) -> str:
        """The plan's row: the flags and why, or only why when archwheel adds none."""
        return f"{self.flags}: {self.why}" if self.flags else self.why


def choose_compression(
    cuda: CudaVersion, recipe_env: Mapping[str, str], *, enabled: bool | str
) -> FatbinCompression:
    """The flags an extension build's nvcc gets for compressed fatbins, and why.

    ``enabled`` is ``[build] compress_fatbins``: true (archwheel's mode), false (as nvcc
    leaves them: PTX compressed, cubins not) or one of ``MODES``."""
    if enabled is False:
        return FatbinCompression("", "as nvcc leaves them ([build] compress_fatbins = false)")
    for name, value in sorted(recipe_env.items()):
        if any(word in value for word in _CHOSEN_BY_RECIPE):
            return FatbinCompression("", f"the recipe's own choice ({name})")
    if cuda < FIRST_COMPRESSING:
        return FatbinCompression("", f"uncompressed: CUDA {cuda} predates -compress-all (12.4)")
    if enabled is True:
        if cuda < FIRST_SIZE_MODE:
            return FatbinCompression(
                "-Xfatbin -compress-all", "compressed as the official torch wheels' fatbins"
            )
        mode, why = DEFAULT_MODE, "compressed as the official torch wheels' fatbins"
    else:
        mode, why = enabled, f"[build] compress_fatbins = {enabled!r}"
        if cuda < FIRST_SIZE_MODE:
            raise RecipeError(
                f"[build] compress_fatbins = {enabled!r} needs nvcc's -compress-mode, which "
                f"archwheel uses from CUDA {FIRST_SIZE_MODE}; this build's CUDA is {cuda}",
                hint="true or false work with every CUDA from 12.4",
            )
    if mode == "none":
        return FatbinCompression("-compress-mode=none", why + ": nothing compressed, PTX too")
    return FatbinCompression(f"-Xfatbin -compress-all -compress-mode={mode}", why)
