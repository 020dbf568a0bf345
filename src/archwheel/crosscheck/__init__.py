"""The crosscheck use case: NVIDIA's cuobjdump (installed on demand into the cache) as an oracle,
compared with archwheel's own scan.

Its public names are ``__all__``, bound on first use (``archwheel._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archwheel._lazy import lazy_exports

if TYPE_CHECKING:
    from archwheel.crosscheck.run import CrossCheckRequest, CrossCheckResult, run_cross_check

__all__, __getattr__, __dir__ = lazy_exports(__name__)
