"""Verdicts: audits against a requested arch list, compatibility with GPUs and drivers.

Its public names are ``__all__``, bound on first use (``archwheel._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archwheel._lazy import lazy_exports

if TYPE_CHECKING:
    from archwheel.verdicts.audit import (
        AuditReport,
        audit_document,
        overall_exit_code,
    )
    from archwheel.verdicts.audit import (
        audit as audit_inventory,
    )
    from archwheel.verdicts.compat.gpus import Gpu, resolve_gpus
    from archwheel.verdicts.compat.report import CanRunReport
    from archwheel.verdicts.diff import DiffReport
    from archwheel.verdicts.load import LoadReport, LoadVerdict
    from archwheel.verdicts.manifest import VerifyReport
    from archwheel.verdicts.recommend import ArchForms, GpuCatalog, Recommendation
    from archwheel.verdicts.smoke import KERNEL_STEPS

__all__, __getattr__, __dir__ = lazy_exports(__name__)
