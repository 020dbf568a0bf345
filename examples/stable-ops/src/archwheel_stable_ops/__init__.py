"""archwheel's stable-ABI example: ``axpy(x, y, alpha) = alpha * x + y`` as the torch operator
``torch.ops.archwheel_stable_ops.axpy``, with a CPU and a CUDA kernel.

The library is built only against torch's stable ABI (``torch/csrc/stable``) with
``TORCH_TARGET_VERSION`` 2.12, so one build loads with every torch from 2.12 on that keeps
that ABI (checked by ``archwheel can-load --torch`` and, after the build, by the recipe's
``[torch] loads_with``). It is not a Python extension module: torch loads it and registers its
operators (``torch.ops.load_library``).
"""

from __future__ import annotations

from pathlib import Path

import torch

__all__ = ["axpy", "library_path"]


def library_path() -> Path:
    """The operator library inside this package (``_C.abi3.so``)."""
    found = sorted(Path(__file__).parent.glob("_C*.so"))
    if len(found) != 1:
        raise ImportError(f"archwheel_stable_ops: expected one _C*.so, found {found}")
    return found[0]


torch.ops.load_library(str(library_path()))


def axpy(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """``alpha * x + y`` (float32 or float64, contiguous, on the CPU or one GPU)."""
    return torch.ops.archwheel_stable_ops.axpy.default(x, y, float(alpha))
