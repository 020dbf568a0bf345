"""Every public function, method and class in src/archwheel says what it does and why.

Public: a name without a leading underscore, in a module whose file name has none (``__init__.py``
aside), and for a method, in a public class. Nested functions are the function's own business.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "archwheel"

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _public_definitions(body: list[ast.stmt]) -> Iterator[Definition]:
    for node in body:
        if not isinstance(node, Definition) or node.name.startswith("_"):
            continue
        yield node
        if isinstance(node, ast.ClassDef):
            yield from _public_definitions(node.body)


def _public_modules() -> Iterator[Path]:
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).parts
        if any(p.startswith("_") and p != "__init__.py" for p in parts):
            continue
        yield path


def missing_docstrings() -> list[str]:
    """`path:line name` of every public definition without a docstring."""
    missing = []
    for path in _public_modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _public_definitions(tree.body):
            if ast.get_docstring(node) is None:
                where = path.relative_to(SRC.parent)
                missing.append(f"{where}:{node.lineno} {node.name}")
    return missing


def test_every_public_definition_has_a_docstring() -> None:
    missing = missing_docstrings()
    assert not missing, f"{len(missing)} public definitions without a docstring:\n" + "\n".join(
        missing
    )


def test_the_check_sees_a_missing_docstring() -> None:
    tree = ast.parse("class A:\n    def f(self):\n        pass\n\ndef _g():\n    pass\n")
    names = [n.name for n in _public_definitions(tree.body) if ast.get_docstring(n) is None]
    assert names == ["A", "f"]
