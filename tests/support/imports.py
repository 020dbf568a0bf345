"""What a module of the package imports, read from its source (the layer tests' reader)."""

from __future__ import annotations

import ast
from pathlib import Path


def _type_checking_blocks(tree: ast.AST) -> set[int]:
    """The ids of the nodes inside ``if TYPE_CHECKING:`` blocks (imports for mypy only)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
        ):
            for child in node.body:
                inside.update(id(n) for n in ast.walk(child))
    return inside


def imported_modules(path: Path, *, type_checking: bool = True) -> set[str]:
    """Every module ``path`` imports (``from X import y``: X), with or without those imported
    only for mypy."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = set() if type_checking else _type_checking_blocks(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found
