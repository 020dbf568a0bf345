"""Libraries a project opens with ``torch.ops.load_library``, read from its Python files before
any compile.

An operator library (``TORCH_LIBRARY`` / ``STABLE_TORCH_LIBRARY`` in its C++ sources) has no
``PyInit_``: ``import`` cannot open it. The package opens it itself,
``torch.ops.load_library(path)`` (``ctypes.CDLL``, after ``import torch``), and its operators
are called as ``torch.ops.<namespace>.<op>``. The syntax tree (``ast``, nothing runs) says
where the project does so and which ``.so`` names that file mentions; the C++ sources say the
namespaces. The plan says so, and that the smoke snippet must load the library the same way
(docs/smoke.md, "Operator libraries").
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass

_SO_NAME = re.compile(r"[\w.*?\[\]-]*\.so(?:\.[0-9.]+)?")
_LIBRARY = re.compile(r"\b(?:STABLE_)?TORCH_LIBRARY(?:_FRAGMENT)?\s*\(\s*([A-Za-z_]\w*)\s*,")
SHOWN = 3


@dataclass(frozen=True)
class LoadLibraryCall:
    """One ``torch.ops.load_library(...)`` call: where, its argument as written, and the library
    names (or globs) the same file spells."""

    where: str  # "src/pkg/__init__.py:28"
    argument: str  # "str(library_path())"
    names: tuple[str, ...] = ()  # "_C*.so"


def load_library_calls(path: str, text: str) -> tuple[LoadLibraryCall, ...]:
    """The ``torch.ops.load_library(...)`` calls of one Python file (none when it does not
    parse)."""
    if "load_library" not in text:
        return ()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return ()
    names = tuple(
        dict.fromkeys(
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _SO_NAME.fullmatch(node.value)
        )
    )
    calls = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _is_load_library(node.func)):
            continue
        argument = ast.unparse(node.args[0]) if node.args else ""
        calls.append(LoadLibraryCall(f"{path}:{node.lineno}", argument, names))
    return tuple(sorted(calls, key=lambda c: c.where))


def _is_load_library(func: ast.expr) -> bool:
    """``torch.ops.load_library`` (or ``ops.load_library`` after ``from torch import ops``)."""
    if not (isinstance(func, ast.Attribute) and func.attr == "load_library"):
        return False
    owner = func.value
    if isinstance(owner, ast.Name):
        return owner.id == "ops"
    return (
        isinstance(owner, ast.Attribute)
        and owner.attr == "ops"
        and isinstance(owner.value, ast.Name)
        and owner.value.id == "torch"
    )


def operator_namespaces(sources: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """The namespaces ``TORCH_LIBRARY(ns, m)`` / ``STABLE_TORCH_LIBRARY(ns, m)`` define in the
    C++/CUDA sources (``_IMPL`` blocks only add kernels to them)."""
    return tuple(dict.fromkeys(ns for _path, text in sources for ns in _LIBRARY.findall(text)))


@dataclass(frozen=True)
class OperatorLibraries:
    """The project's ``torch.ops.load_library`` calls and its operator namespaces."""

    calls: tuple[LoadLibraryCall, ...]
    namespaces: tuple[str, ...] = ()

    def row(self) -> tuple[str, str]:
        """The plan's ``operator library`` row: which library the package opens that way and
        how the smoke snippet must load it."""
        shown = self.calls[:SHOWN]
        opened = "; ".join(
            f"{c.where} opens torch.ops.load_library({c.argument})"
            + (f" ({', '.join(c.names)})" if c.names else "")
            for c in shown
        )
        if len(self.calls) > SHOWN:
            opened += f"; and {len(self.calls) - SHOWN} more"
        ops = (
            ", ".join(f"torch.ops.{ns}.<op>" for ns in self.namespaces)
            if self.namespaces
            else "torch.ops.<namespace>.<op>"
        )
        return (
            "operator library",
            f"{opened}: a library with no PyInit_, not an extension module. The smoke snippet "
            "must load it with torch.ops.load_library(...) (or import the package that does), "
            f"not import it, and call its operators as {ops}",
        )


def find_operator_libraries(
    python: Iterable[tuple[str, str]], sources: Iterable[tuple[str, str]]
) -> OperatorLibraries | None:
    """The project's ``torch.ops.load_library`` calls (``python``: ``(path, text)`` of its
    Python files) with the namespaces of its C++ ``sources``; None when it makes none."""
    calls = tuple(c for path, text in python for c in load_library_calls(path, text))
    if not calls:
        return None
    return OperatorLibraries(calls, operator_namespaces(sources))
