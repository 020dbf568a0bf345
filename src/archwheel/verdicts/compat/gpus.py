"""The GPUs a verdict is for: catalog names (``--gpu "RTX 5090"``) or compute capabilities."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from archwheel.errors import UsageError
from archwheel.facts.catalog import CudaFacts
from archwheel.facts.versions import ComputeCapability


@dataclass(frozen=True)
class Gpu:
    """A GPU to judge against: a catalog name or a bare compute capability."""

    cc: ComputeCapability
    name: str = ""  # "RTX 5090"; empty when given as --cc

    @property
    def label(self) -> str:
        """How reports name the GPU: ``H100 (9.0)``, or ``cc 9.0`` for a bare compute capability."""
        return f"{self.name} ({self.cc})" if self.name else f"cc {self.cc}"

    def to_json_dict(self) -> dict[str, Any]:
        """The GPU as the JSON documents write it: its name (None for a bare ``--cc``) and compute
        capability."""
        return {"name": self.name or None, "compute_capability": str(self.cc)}


def resolve_gpus(
    names: Sequence[str] = (), ccs: Sequence[str] = (), *, facts: CudaFacts
) -> tuple[Gpu, ...]:
    """GPUs from ``--gpu`` names and ``--cc`` values (each may be a comma list), in order."""
    gpus: list[Gpu] = []
    for text in names:
        for item in _split_list(text):
            model = facts.find_gpu(item)
            gpus.append(Gpu(model.cc, model.name))
    for text in ccs:
        for item in _split_list(text):
            cc = ComputeCapability.parse(item)
            if not facts.is_known(cc):
                known = ", ".join(str(c) for c in sorted(facts.capabilities))
                raise UsageError(f"unknown compute capability {item!r}", hint=f"known: {known}")
            gpus.append(Gpu(cc))
    unique = tuple(dict.fromkeys(gpus))
    if not unique:
        raise UsageError(
            "no GPU given", hint='use --gpu "RTX 5090" or --cc 12.0 (comma lists work)'
        )
    return unique


def _split_list(text: str) -> list[str]:
    items = [part.strip() for part in text.split(",")]
    if any(not item for item in items):
        raise UsageError(f"empty item in {text!r}", hint="separate items with single commas")
    return items
