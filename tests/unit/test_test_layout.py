"""The tests mirror the package (checked on the source).

- every test module lies in ``unit/<floor>/`` (a top-level folder of the package; ``unit/``
  itself for checks of the whole tree) or in ``integration/<need>/``, where the need is one of
  the markers docker, nvcc, gpu, realwheel, faults, farm;
- an integration test carries its folder's marker, a unit test none of those markers;
- no module under tests/ imports a test module or a conftest: helpers are imported from
  ``tests.support``, fixtures come from the conftest files and the plugins they name;
- a conftest holds only fixtures, hooks and ``pytest_plugins`` (helper modules only).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import archwheel

TESTS = Path(__file__).resolve().parent.parent
PACKAGE = Path(archwheel.__file__).parent
NEEDS = ("docker", "nvcc", "gpu", "realwheel", "faults", "farm")
SUPPORT = "tests.support"


def floors(package: Path) -> set[str]:
    """The package's top-level folders that hold Python modules."""
    return {d.name for d in package.iterdir() if d.is_dir() and any(d.rglob("*.py"))}


def _test_files(root: Path) -> Iterator[Path]:
    return (p for p in sorted(root.rglob("test_*.py")) if "__pycache__" not in p.parts)


def misplaced(root: Path, floor_names: set[str]) -> list[str]:
    """Test modules outside unit/<floor>/ (or unit/) and integration/<need>/."""
    found = []
    for path in _test_files(root):
        parts = path.relative_to(root).parts
        folders = parts[:-1]
        if folders in {("unit",)}:
            continue
        if len(folders) == 2 and folders[0] == "unit" and folders[1] in floor_names:
            continue
        if len(folders) == 2 and folders[0] == "integration" and folders[1] in NEEDS:
            continue
        found.append("/".join(parts))
    return found


def _marks(decorators: list[ast.expr]) -> set[str]:
    """Marker names of ``@pytest.mark.X`` / ``@pytest.mark.X(...)`` decorators."""
    names = set()
    for d in decorators:
        node = d.func if isinstance(d, ast.Call) else d
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "mark"
        ):
            names.add(node.attr)
    return names


def _module_marks(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            value = node.value
            items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
            return _marks(items)
    return set()


def wrong_markers(root: Path) -> list[str]:
    """Tests whose need markers do not match their folder."""
    found = []
    for path in _test_files(root):
        parts = path.relative_to(root).parts
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = _module_marks(tree)
        for node in tree.body:
            if not isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                continue
            if not node.name.lower().startswith("test"):
                continue
            needs = (module | _marks(node.decorator_list)) & set(NEEDS)
            where = f"{'/'.join(parts)}::{node.name}"
            if parts[0] == "integration" and parts[1] not in needs:
                found.append(f"{where} lacks the {parts[1]} marker")
            if parts[0] == "unit" and needs:
                found.append(f"{where} is marked {', '.join(sorted(needs))} but lies in unit/")
    return found


def _imported_modules(tree: ast.Module, path: Path, root: Path) -> Iterator[tuple[str, int]]:
    package = ("tests", *path.relative_to(root).parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                yield ".".join([*base, *([node.module] if node.module else [])]), node.lineno
            elif node.module:
                yield node.module, node.lineno


def forbidden_imports(root: Path) -> list[str]:
    """Imports, by any module under tests/, of modules of tests/ other than tests.support."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, line in _imported_modules(tree, path, root):
            if name.split(".")[0] not in ("tests", "conftest"):
                continue
            if name == SUPPORT or name.startswith(SUPPORT + "."):
                continue
            found.append(f"{path.relative_to(root)}:{line} imports {name}")
    return found


def _is_fixture(decorators: list[ast.expr]) -> bool:
    for d in decorators:
        node = d.func if isinstance(d, ast.Call) else d
        if isinstance(node, ast.Attribute) and node.attr == "fixture":
            return True
    return False


def conftest_extras(root: Path) -> list[str]:
    """What a conftest holds besides fixtures, hooks, imports and ``pytest_plugins``."""
    found = []
    for path in sorted(root.rglob("conftest.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(root)
        for i, node in enumerate(tree.body):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # the docstring
            if isinstance(node, ast.FunctionDef) and (
                node.name.startswith("pytest_") or _is_fixture(node.decorator_list)
            ):
                continue
            if (
                isinstance(node, ast.Assign)
                and [getattr(t, "id", None) for t in node.targets] == ["pytest_plugins"]
                and isinstance(node.value, ast.List)
            ):
                for item in node.value.elts:
                    value = item.value if isinstance(item, ast.Constant) else None
                    if not (isinstance(value, str) and value.startswith(SUPPORT + ".")):
                        found.append(f"{where}:{node.lineno} names a plugin outside tests.support")
                continue
            found.append(f"{where}:{node.lineno} holds more than fixtures and hooks")
    return found


def test_every_test_module_lies_under_unit_floor_or_integration_need() -> None:
    assert misplaced(TESTS, floors(PACKAGE)) == []


def test_integration_tests_carry_their_folders_marker_and_unit_tests_none() -> None:
    assert wrong_markers(TESTS) == []


def test_no_module_imports_a_test_module_or_a_conftest() -> None:
    assert forbidden_imports(TESTS) == []


def test_conftest_files_hold_only_fixtures_and_hooks() -> None:
    assert conftest_extras(TESTS) == []


def test_the_checks_catch_each_kind_of_violation(tmp_path: Path) -> None:
    """Each check reports a tree that breaks its rule (so none of the checks above passes idly)."""
    (tmp_path / "unit" / "facts").mkdir(parents=True)
    (tmp_path / "unit" / "nowhere").mkdir()
    (tmp_path / "integration" / "nvcc").mkdir(parents=True)
    (tmp_path / "support").mkdir()
    (tmp_path / "test_loose.py").write_text("def test_x() -> None: ...\n")
    (tmp_path / "unit" / "nowhere" / "test_lost.py").write_text("def test_x() -> None: ...\n")
    (tmp_path / "unit" / "facts" / "test_a.py").write_text(
        "import pytest\nfrom tests.test_loose import x\nfrom .conftest import CliRun\n"
        "from tests.support.paths import ROOT\n"
        "@pytest.mark.docker\ndef test_marked() -> None: ...\n"
    )
    (tmp_path / "integration" / "nvcc" / "test_b.py").write_text(
        "import pytest\npytestmark = pytest.mark.slow\ndef test_unmarked() -> None: ...\n"
    )
    (tmp_path / "support" / "helper.py").write_text("from tests.unit.facts.test_a import y\n")
    (tmp_path / "conftest.py").write_text(
        '"""doc"""\nimport pytest\npytest_plugins = ["tests.support.venvs", "tests.unit.x"]\n'
        "ROOT = 1\ndef require() -> None: ...\n"
        "@pytest.fixture\ndef fine() -> int:\n    return 1\n"
        "def pytest_configure(config: object) -> None: ...\n"
    )
    assert misplaced(tmp_path, {"facts"}) == ["test_loose.py", "unit/nowhere/test_lost.py"]
    assert wrong_markers(tmp_path) == [
        "integration/nvcc/test_b.py::test_unmarked lacks the nvcc marker",
        "unit/facts/test_a.py::test_marked is marked docker but lies in unit/",
    ]
    assert forbidden_imports(tmp_path) == [
        "support/helper.py:1 imports tests.unit.facts.test_a",
        "unit/facts/test_a.py:2 imports tests.test_loose",
        "unit/facts/test_a.py:3 imports tests.unit.facts.conftest",
    ]
    assert conftest_extras(tmp_path) == [
        "conftest.py:3 names a plugin outside tests.support",
        "conftest.py:4 holds more than fixtures and hooks",
        "conftest.py:5 holds more than fixtures and hooks",
    ]
