"""Binary inspection: ELF, fatbin containers, ar archives and wheels, read-only and streamed.

Its public names are ``__all__``, bound on first use (``archwheel._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archwheel._lazy import lazy_exports

__all__ = [
    "FatbinContainer",
    "FatbinEntry",
    "InputInventory",
    "LibraryInventory",
    "ProgressCallback",
    "WheelMetadata",
    "read_wheel_metadata",
    "scan_installed",
    "scan_path",
]

_WHERE = {
    "FatbinContainer": "model",
    "FatbinEntry": "model",
    "InputInventory": "model",
    "LibraryInventory": "model",
    "ProgressCallback": "scan.inputs",
    "WheelMetadata": "wheelmeta",
    "read_wheel_metadata": "wheelmeta",
    "scan_installed": "scan.inputs",
    "scan_path": "scan.inputs",
}

if TYPE_CHECKING:
    from archwheel.binary.model import (
        FatbinContainer,
        FatbinEntry,
        InputInventory,
        LibraryInventory,
    )
    from archwheel.binary.scan.inputs import ProgressCallback, scan_installed, scan_path
    from archwheel.binary.wheelmeta import WheelMetadata, read_wheel_metadata
else:
    __getattr__, __dir__ = lazy_exports(__name__, _WHERE)
