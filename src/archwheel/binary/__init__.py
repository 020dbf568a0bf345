"""Binary inspection: ELF, fatbin containers, ar archives and wheels, read-only and streamed.

Its public names are ``__all__``, bound on first use (``archwheel._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archwheel._lazy import lazy_exports

if TYPE_CHECKING:
    from archwheel.binary.model import (
        FatbinContainer,
        FatbinEntry,
        InputInventory,
        LibraryInventory,
    )
    from archwheel.binary.scan.inputs import ProgressCallback, scan_installed, scan_path
    from archwheel.binary.wheelmeta import WheelMetadata, read_wheel_metadata

__all__, __getattr__, __dir__ = lazy_exports(__name__)
