"""The public names of a package, bound on first use (PEP 562), so that importing it stays cheap.

Each floor's ``__init__.py`` (and the package's own) lists its public names in ``__all__`` and
says which submodule defines each; ``import archwheel.binary.elf`` then imports ``elf`` alone,
not the rest of ``binary`` (the command line's start and the scan's worker processes are
measured). The package keeps an ``if TYPE_CHECKING:`` block importing the same names, so that
mypy sees their types::

    __all__ = ["scan_path"]
    _WHERE = {"scan_path": "scan.inputs"}
    __getattr__, __dir__ = lazy_exports(__name__, _WHERE)
    if TYPE_CHECKING:
        from archwheel.binary.scan.inputs import scan_path

A value ``"module:attr"`` binds the public name to another name of that module (where the
public name would shadow a submodule of the package). This module imports no floor.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_exports(
    package: str, where: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``: a name of ``where`` is looked
    up in its submodule on first use (then kept on the package), any other is an
    ``AttributeError`` as for any module."""
    table = dict(where)

    def __getattr__(name: str) -> object:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, _, attr = target.partition(":")
        value = getattr(importlib.import_module(f"{package}.{module_name}"), attr or name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__
