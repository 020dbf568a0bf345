"""The package's floors: a module imports only from its own floor and the ones below; the use
cases that share floor 4 (inspection, smoke, doctor, crosscheck, housekeeping) never import each
other, and the use cases above them stand in order (wheelbuild builds on inspection, matrix on
wheelbuild); verdicts only judge (checked on the source)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import archwheel
from archwheel._lazy import public_names
from tests.support.imports import imported_modules

# floor number of each top-level folder of the package
FLOORS = {
    "facts": 0,
    "effects": 1,
    "binary": 2,
    "verdicts": 3,
    "inspection": 4,
    "smoke": 4,
    "doctor": 4,
    "crosscheck": 4,
    "housekeeping": 4,
    "wheelbuild": 5,
    "matrix": 6,
    "interfaces": 7,
}
USE_CASE_FLOOR = 4  # the one floor several use cases share: siblings there never meet
SHARED = ("errors.py", "exit_codes.py", "text.py", "_version.py", "_lazy.py", "__init__.py")
PACKAGE = Path(archwheel.__file__).parent


def imported_folders(path: Path) -> set[str]:
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
            if parts[0] == "archwheel" and len(parts) > 1 and parts[1] in FLOORS:
                found.add(parts[1])
    return found


def violations_of(folder: str, path: Path) -> list[str]:
    floor = FLOORS[folder]
    bad = []
    for other in sorted(imported_folders(path) - {folder}):
        if FLOORS[other] > floor:
            bad.append(f"{path.relative_to(PACKAGE)} imports the upper floor {other}")
        elif FLOORS[other] == floor == USE_CASE_FLOOR:
            bad.append(f"{path.relative_to(PACKAGE)} imports the sibling use case {other}")
    return bad


def test_every_folder_of_the_package_has_a_floor() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(FLOORS)


def test_no_module_imports_upward_or_sideways() -> None:
    violations = []
    for folder in FLOORS:
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            violations.extend(violations_of(folder, path))
    assert violations == []


def test_shared_modules_import_no_floor() -> None:
    for name in SHARED:
        if (PACKAGE / name).exists() and name != "__init__.py":
            assert imported_folders(PACKAGE / name) == set()


def test_no_module_of_a_floor_imports_the_package_root() -> None:
    """``archwheel/__init__.py`` names what users import; a module of a floor that imported it
    (``from archwheel import __version__``) would point from the bottom to the top. The version
    is ``archwheel/_version.py``'s."""
    found = [
        str(path.relative_to(PACKAGE))
        for folder in FLOORS
        for path in sorted((PACKAGE / folder).rglob("*.py"))
        if "archwheel" in imported_modules(path)
    ]
    assert found == []


def import_cycles(folder: Path, package: Path = PACKAGE) -> list[list[str]]:
    """The cycles of imports among the modules of ``folder`` (each import counts: at run time,
    inside functions and for mypy only), as lists of module names; ``__init__`` excluded."""
    names = {
        ".".join(p.relative_to(folder).with_suffix("").parts): p
        for p in folder.rglob("*.py")
        if p.name != "__init__.py"
    }
    prefix = "archwheel." + ".".join(folder.relative_to(package).parts) + "."
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        imported = set()
        for module in imported_modules(path):
            imported.add(module.removeprefix(prefix))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):  # ``from archwheel.matrix import pages``
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.update(f"{node.module}.{a.name}".removeprefix(prefix) for a in node.names)
        graph[name] = {m for m in imported if m in names and m != name}
    cycles: list[list[str]] = []
    done: set[str] = set()

    def walk(name: str, path: list[str]) -> None:
        for other in sorted(graph[name]):
            if other in path:
                cycles.append([*path[path.index(other) :], other])
            elif other not in done:
                walk(other, [*path, other])
        done.add(name)

    for name in sorted(graph):
        if name not in done:
            walk(name, [name])
    return cycles


@pytest.mark.parametrize("folder", sorted(FLOORS))
def test_no_import_cycle_inside_a_floor(folder: str) -> None:
    """Imports inside a floor go one way (its subpackages included): counting imports for mypy
    and those inside functions, no module reaches itself again."""
    assert import_cycles(PACKAGE / folder) == []


def test_cycle_checker_sees_a_cycle_through_an_import_for_mypy(tmp_path: Path) -> None:
    folder = tmp_path / "archwheel" / "matrix"
    folder.mkdir(parents=True)
    (folder / "index.py").write_text("from archwheel.matrix.pages import page\n")
    (folder / "pages.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from archwheel.matrix.index import IndexEntry\n"
    )
    (folder / "plan.py").write_text("from archwheel.matrix import index\n")
    assert import_cycles(folder, tmp_path / "archwheel") == [["index", "pages", "index"]]


# The package's Python API (archwheel.audit, ...) is an interface: archwheel/__init__.py binds
# it lazily from interfaces/api.py, and imports that module for mypy only.
API_MODULE = "archwheel.interfaces.api"


def test_the_package_binds_only_the_api_and_lazily() -> None:
    init = PACKAGE / "__init__.py"
    runtime = imported_modules(init, type_checking=False)
    assert {m for m in runtime if m.split(".")[0] == "archwheel"} <= {
        f"archwheel.{name.removesuffix('.py')}" for name in SHARED if name != "__init__.py"
    }
    for_mypy = imported_modules(init) - runtime
    assert {m for m in for_mypy if m.startswith("archwheel.")} == {API_MODULE}
    lazy = {m for m, _, lazy in public_names(init.read_text(encoding="utf-8")).values() if lazy}
    assert lazy == {API_MODULE}


def test_import_checker_tells_runtime_imports_from_those_for_mypy(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from typing import TYPE_CHECKING\nimport archwheel.errors\n"
        "if TYPE_CHECKING:\n    from archwheel.interfaces.api import audit\n"
    )
    assert imported_modules(probe, type_checking=False) == {"typing", "archwheel.errors"}
    assert "archwheel.interfaces.api" in imported_modules(probe)


def test_checker_sees_an_upward_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from archwheel.interfaces.cli import main\n")
    assert imported_folders(probe) == {"interfaces"}
    (tmp_path / "x").mkdir()
    moved = tmp_path / "x" / "probe.py"
    probe.rename(moved)
    global PACKAGE  # noqa: PLW0603 - relative_to needs the probe's root
    saved, PACKAGE = PACKAGE, tmp_path
    try:
        assert violations_of("binary", moved) == ["x/probe.py imports the upper floor interfaces"]
    finally:
        PACKAGE = saved


def test_checker_sees_a_sibling_use_case(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from archwheel.wheelbuild.recipes.recipe import load_recipe\n")
    global PACKAGE  # noqa: PLW0603
    saved, PACKAGE = PACKAGE, tmp_path
    try:
        assert violations_of("smoke", probe) == ["probe.py imports the upper floor wheelbuild"]
        assert violations_of("matrix", probe) == []
        assert violations_of("interfaces", probe) == []
        probe.write_text("from archwheel.inspection.audits import audit_inputs\n")
        assert violations_of("smoke", probe) == ["probe.py imports the sibling use case inspection"]
        assert violations_of("wheelbuild", probe) == []
        probe.write_text("from archwheel.matrix.plan import make_plan\n")
        assert violations_of("wheelbuild", probe) == ["probe.py imports the upper floor matrix"]
    finally:
        PACKAGE = saved


# The one process runner: every subprocess of archwheel starts in effects/process.py.
PROCESS_RUNNER = "effects/process.py"
SUBPROCESS_EXEMPT = {
    # a standalone stdlib script run by another interpreter, in the environment under test
    "smoke/data/smoke_payload.py",
    # the same: the whole-call cache's script, run by the build's Python in the compile
    # container for each nvcc call (it runs nvcc -M after a miss)
    "wheelbuild/compile/whole_call.py",
}


def imports_module(path: Path, module: str) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == module for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == module:
            return True
    return False


def imports_subprocess(path: Path) -> bool:
    return imports_module(path, "subprocess")


def test_only_the_process_runner_imports_subprocess() -> None:
    found = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if imports_subprocess(path)
    }
    assert PROCESS_RUNNER in found  # the check sees an import where there is one
    assert found - SUBPROCESS_EXEMPT == {PROCESS_RUNNER}


def test_subprocess_checker_sees_both_import_forms(tmp_path: Path) -> None:
    plain, star, clean = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "c.py"
    plain.write_text("def f():\n    import subprocess\n")
    star.write_text("from subprocess import run\n")
    clean.write_text("from archwheel.effects.process import run_program\n")
    assert imports_subprocess(plain) and imports_subprocess(star)
    assert not imports_subprocess(clean)


def test_no_argparse_below_the_interfaces() -> None:
    """Commands turn argv into typed requests; nothing below interfaces/ sees argparse."""
    found = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if imports_module(path, "argparse") and path.relative_to(PACKAGE).parts[0] != "interfaces"
    }
    assert found == {"smoke/data/smoke_payload.py"}  # the payload script parses its own argv


# Verdicts only judge the values handed to them: reading files, wheels, indexes or the network
# is the floors' below (binary's readers, effects) called from a use case. From binary and
# effects a verdict imports only these names: result types and pure parsers of text it is
# given ("*": every name of a module that reads nothing).
VERDICTS_MAY_IMPORT: dict[str, frozenset[str] | str] = {
    "archwheel.binary.model": "*",  # the scan's frozen results
    "archwheel.binary.variantname": "*",  # a variant label's grammar
    "archwheel.binary.cuobjdump": frozenset(  # the listing's grammar
        {
            "CUBIN_SECTION",
            "EXECUTABLE_FATBIN",
            "RAW_FATBIN_SECTION",
            "RELOCATABLE_FATBIN",
            "ImageKey",
        }
    ),
    "archwheel.binary.dynamic": frozenset({"DynamicInfo", "UndefinedSymbol"}),
    "archwheel.binary.wheelmeta": frozenset({"WheelMetadata"}),
    "archwheel.binary.buildfile": frozenset({"BuildSteps", "LinkStep", "nvcc_images"}),  # parsed
    "archwheel.binary.buildgraph": frozenset({"BuildGraph", "GraphEdge"}),  # the graph read
    "archwheel.effects.watchdog": frozenset({"ChildOutcome", "ChildStatus"}),
}
# Standard modules that reach files, processes or the network: no verdict imports them.
VERDICTS_NEVER_IMPORT = frozenset(
    {"http", "os", "shutil", "socket", "ssl", "subprocess", "tarfile", "tempfile", "urllib",
     "zipfile"}
)  # fmt: skip


def verdict_import_violations(path: Path) -> list[str]:
    """The imports of ``path`` that a verdict may not make (see ``VERDICTS_MAY_IMPORT``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad: list[str] = []
    for node in ast.walk(tree):
        pairs: list[tuple[str, str | None]]
        if isinstance(node, ast.Import):
            pairs = [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            pairs = [(node.module, a.name) for a in node.names]
        else:
            continue
        for module, name in pairs:
            top = module.split(".")[0]
            parts = module.split(".")
            if top in VERDICTS_NEVER_IMPORT:
                bad.append(f"{path.name} imports {module}")
            elif top == "archwheel" and len(parts) > 1 and parts[1] in ("binary", "effects"):
                allowed = VERDICTS_MAY_IMPORT.get(module, frozenset())
                if name is None or (allowed != "*" and name not in allowed):
                    bad.append(f"{path.name} imports {module}{'' if name is None else ':' + name}")
    return bad


def test_verdicts_import_no_reader() -> None:
    violations = []
    for path in sorted((PACKAGE / "verdicts").rglob("*.py")):
        violations.extend(verdict_import_violations(path))
    assert violations == []


def test_verdict_checker_sees_a_reader(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from archwheel.binary.dynamic import DynamicInfo, read_file_dynamic\n"
        "from archwheel.binary.model import InputInventory\n"
        "from archwheel.effects.ranged import RangedFile\n"
        "import archwheel.binary.zipread\nimport ssl\n"
    )
    assert verdict_import_violations(probe) == [
        "probe.py imports archwheel.binary.dynamic:read_file_dynamic",
        "probe.py imports archwheel.effects.ranged:RangedFile",
        "probe.py imports archwheel.binary.zipread",
        "probe.py imports ssl",
    ]
