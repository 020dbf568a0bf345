"""CUDA facts: the versioned data file, the arch model and the compatibility rules.

Its public names are ``__all__``, bound on first use (``archwheel._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archwheel._lazy import lazy_exports

if TYPE_CHECKING:
    from archwheel.facts.arch import ArchList, CodeKind, Target
    from archwheel.facts.catalog import CudaFacts, load_facts
    from archwheel.facts.versions import ComputeCapability, CudaVersion, DriverVersion

__all__, __getattr__, __dir__ = lazy_exports(__name__)
