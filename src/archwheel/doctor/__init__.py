"""The doctor use case: this host's GPUs, driver and installed torch, with a verdict per GPU.

Its public names are ``__all__``, bound on first use (``archwheel._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archwheel._lazy import lazy_exports

if TYPE_CHECKING:
    from archwheel.doctor.diagnose import DoctorReport, run_doctor

__all__, __getattr__, __dir__ = lazy_exports(__name__)
