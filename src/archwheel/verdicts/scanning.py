"""The audit scanner as the verdicts see it: one place that reaches ``archwheel.binary.scan``.

The scanner is looked up when first used, so that every verdict command reports a clear error
(instead of an import traceback) in a build where the scanner is missing or broken.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from archwheel.binary.model import InputInventory
from archwheel.errors import ToolError


def _scanner(name: str) -> Callable[..., Any]:
    try:
        module = importlib.import_module("archwheel.binary.scan")
    except ImportError as exc:
        raise ToolError(
            f"the binary scanner (archwheel.binary.scan) cannot be loaded: {exc}",
            hint="reinstall archwheel",
        ) from None
    function: Callable[..., Any] | None = getattr(module, name, None)
    if not callable(function):
        raise ToolError(f"archwheel.binary.scan has no {name}()", hint="reinstall archwheel")
    return function


def scan_path(path: Path) -> InputInventory:
    """Audit a wheel, a file or a directory (``archwheel.binary.scan.scan_path``)."""
    inventory: InputInventory = _scanner("scan_path")(path)
    return inventory


def scan_installed(distribution: str, python: str | None = None) -> InputInventory:
    """Audit an installed distribution (``archwheel.binary.scan.scan_installed``)."""
    inventory: InputInventory = _scanner("scan_installed")(distribution, python)
    return inventory
