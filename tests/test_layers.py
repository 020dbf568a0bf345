"""The package's layers: a lower layer never imports an upper one (checked on the source)."""

from __future__ import annotations

import ast
from pathlib import Path

import archwheel

LAYERS = ["facts", "binary", "verdicts", "orchestration", "interfaces"]
PACKAGE = Path(archwheel.__file__).parent


def imported_layers(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "archwheel" and len(parts) > 1 and parts[1] in LAYERS:
                found.add(parts[1])
    return found


def test_lower_layers_never_import_upper_ones() -> None:
    violations = []
    for index, layer in enumerate(LAYERS):
        upper = set(LAYERS[index + 1 :])
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            bad = imported_layers(path) & upper
            if bad:
                violations.append(f"{path.relative_to(PACKAGE)} imports {sorted(bad)}")
    assert violations == []


def test_shared_modules_import_no_layer() -> None:
    for name in ("errors.py", "__init__.py"):
        assert imported_layers(PACKAGE / name) == set()


def test_checker_sees_a_violation(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from archwheel.interfaces.cli import main\n")
    assert imported_layers(probe) == {"interfaces"}
