"""archwheel's libtorch example: ``axpy(x, y, alpha)`` as a torch operator (CPU and CUDA)."""

from __future__ import annotations

from pathlib import Path

import torch

__version__ = "0.1.0"

torch.ops.load_library(str(Path(__file__).with_name("_ops.so")))


def axpy(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """``alpha * x + y`` computed by the extension's own kernel for the tensors' device."""
    return torch.ops.archwheel.axpy(x, y, alpha)
