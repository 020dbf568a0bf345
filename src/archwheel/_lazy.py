"""The public names of a package, bound on first use (PEP 562), so that importing it stays cheap.

Each floor's ``__init__.py`` (and the package's own) writes each public name once, as an import
of archwheel's: the names it binds on first use inside ``if TYPE_CHECKING:``, any it binds at
once (the package's exceptions, ``__version__``) as plain imports::

    from typing import TYPE_CHECKING

    from archwheel._lazy import lazy_exports

    if TYPE_CHECKING:
        from archwheel.binary.scan.inputs import scan_path

    __all__, __getattr__, __dir__ = lazy_exports(__name__)

Type checkers and editors read these imports as they are (mypy takes the floor packages'
imports for re-exports: pyproject.toml); at run time ``lazy_exports`` reads the same lines from
the package's source, so ``import archwheel.binary.elf`` imports ``elf`` alone, not the rest of
``binary`` (the command line's start and the scan's worker processes are measured,
docs/maintainers/performance.md). ``from M import a as b`` makes ``b`` the public name of
``M.a`` (where ``a`` would be shadowed by a submodule). An install without sources (``.pyc``
only) gives the same names from the ``__init__``'s bytecode (``compiled_names``; tested on a
``compileall -b`` copy). This module imports no floor.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from types import ModuleType

# ``from archwheel.x.y import a, b as c`` (one line, or a parenthesised list over several).
_IMPORT = re.compile(
    r"^([ \t]*)from[ \t]+(archwheel[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M
)
_TYPE_CHECKING = re.compile(r"^if TYPE_CHECKING:[ \t]*$", re.M)


def public_names(source: str) -> dict[str, tuple[str, str, bool]]:
    """Each public name of a package's ``__init__`` ``source`` -> (module, attribute, lazy):
    every name imported from an archwheel module (but ``archwheel._lazy``), lazy when the
    import is inside the ``if TYPE_CHECKING:`` block (indented after it)."""
    block = _TYPE_CHECKING.search(source)
    names: dict[str, tuple[str, str, bool]] = {}
    for match in _IMPORT.finditer(source):
        indent, module, listed = match.groups()
        if module == "archwheel._lazy":
            continue
        lazy = block is not None and match.start() > block.start() and bool(indent)
        for item in re.sub(r"#[^\n]*", "", listed).strip("()").split(","):
            attr, _, alias = item.strip().partition(" as ")
            if attr:
                names[(alias or attr).strip()] = (module, attr.strip(), lazy)
    return names


def compiled_names(module: ModuleType) -> dict[str, tuple[str, str, bool]]:
    """``public_names`` of a package whose ``__init__`` has no source (a ``.pyc``-only
    install), from its bytecode: each ``from archwheel.M import a as b`` is an ``IMPORT_NAME``
    of ``archwheel.M``, an ``IMPORT_FROM`` of ``a`` and a ``STORE_NAME`` of ``b``. The imports
    under ``if TYPE_CHECKING:`` are compiled too, never run: a name not bound by the time the
    ``__init__`` calls ``lazy_exports`` is a lazy one."""
    import dis  # only here: a sourceless install is rare, and dis costs imports

    spec = module.__spec__
    loader = spec.loader if spec is not None else None
    get_code = getattr(loader, "get_code", None)
    code = get_code(module.__name__) if get_code is not None else None
    if code is None:
        return {}
    names: dict[str, tuple[str, str, bool]] = {}
    source_module, attr = "", ""
    bound = vars(module)
    for instruction in dis.get_instructions(code):
        if instruction.opname == "IMPORT_NAME":
            source_module, attr = str(instruction.argval), ""
        elif instruction.opname == "IMPORT_FROM":
            attr = str(instruction.argval)
        elif instruction.opname == "STORE_NAME" and attr:
            if source_module.startswith("archwheel") and source_module != "archwheel._lazy":
                alias = str(instruction.argval)
                names[alias] = (source_module, attr, alias not in bound)
            attr = ""
    return names


def lazy_exports(
    package: str,
) -> tuple[list[str], Callable[[str], object], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` of ``package``, from the imports of its
    ``__init__``: a lazy name is looked up in its module on first use (then kept on the
    package), any other unknown name is an ``AttributeError`` as for any module."""
    module = sys.modules[package]
    path = module.__file__
    assert path is not None  # a package's __init__ is a file
    if path.endswith(".py"):
        with open(path, encoding="utf-8") as handle:  # noqa: PTH123 - pathlib is not imported
            names = public_names(handle.read())
    else:  # installed without sources (.pyc only): the same imports, read from the bytecode
        names = compiled_names(module)
    table = {name: (module, attr) for name, (module, attr, lazy) in names.items() if lazy}

    def __getattr__(name: str) -> object:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, attr = target
        value = getattr(importlib.import_module(module_name), attr)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return sorted(names), __getattr__, __dir__
