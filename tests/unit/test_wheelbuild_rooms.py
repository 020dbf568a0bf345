"""The rooms of the build floor (``wheelbuild/``): each sub-package imports only the rooms below
it, the plan's runner and the use case stand on top, no module lies loose beside them, and each
room's ``__init__`` names the modules it owns (checked on the source)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import archwheel
from tests.support.imports import imported_modules

FLOOR = Path(archwheel.__file__).parent / "wheelbuild"
# bottom to top; a room may import the rooms before it in this list, never those after it
ROOMS = ("compile", "recipes", "images", "sources", "planning", "wheel", "run")
# the modules on top of every room: the runner of a plan, then the use case, then the exports
TOP = ("runner", "usecase", "__init__")
LEVEL = {name: level for level, name in enumerate((*ROOMS, *TOP))}
PREFIX = "archwheel.wheelbuild."


def level_of(module: str) -> int | None:
    """The level of ``archwheel.wheelbuild.<room>.<module>`` (or of a top module); None for
    what is not inside the build floor."""
    if module == "archwheel.wheelbuild":
        return LEVEL["__init__"]
    if not module.startswith(PREFIX):
        return None
    first = module.removeprefix(PREFIX).split(".")[0]
    return LEVEL.get(first)


def upward_imports(path: Path, level: int, root: Path = FLOOR) -> list[str]:
    found = []
    for module in sorted(imported_modules(path)):
        other = level_of(module)
        if other is not None and other > level:
            found.append(f"{path.relative_to(root)} imports {module.removeprefix(PREFIX)}")
    return found


def test_every_module_of_the_floor_is_in_a_room_or_on_top() -> None:
    loose = sorted(p.stem for p in FLOOR.glob("*.py") if p.stem not in TOP)
    assert loose == []
    rooms = sorted(p.name for p in FLOOR.iterdir() if (p / "__init__.py").exists())
    assert rooms == sorted(ROOMS)


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_imports_only_the_rooms_below_it(room: str) -> None:
    found = []
    for path in sorted((FLOOR / room).rglob("*.py")):
        found.extend(upward_imports(path, LEVEL[room]))
    assert found == []


def test_the_top_modules_stand_in_order() -> None:
    found = []
    for name in TOP:
        found.extend(upward_imports(FLOOR / f"{name}.py", LEVEL[name]))
    assert found == []


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_names_what_it_owns(room: str) -> None:
    doc = ast.get_docstring(ast.parse((FLOOR / room / "__init__.py").read_text())) or ""
    owned = sorted(p.stem for p in (FLOOR / room).glob("*.py") if p.stem != "__init__")
    assert [name for name in owned if f"``{name}``" not in doc] == []
    assert "May import" in doc or "imports no other room" in doc


def test_the_checker_sees_an_upward_import_between_rooms(tmp_path: Path) -> None:
    probe = tmp_path / "compile" / "probe.py"
    probe.parent.mkdir()
    probe.write_text(
        "from typing import TYPE_CHECKING\n"
        "from archwheel.wheelbuild.recipes.recipe_model import Recipe\n"
        "if TYPE_CHECKING:\n    from archwheel.wheelbuild.runner import BuildRunner\n"
    )
    assert upward_imports(probe, LEVEL["compile"], tmp_path) == [
        "compile/probe.py imports recipes.recipe_model",
        "compile/probe.py imports runner",
    ]
    assert upward_imports(probe, LEVEL["usecase"], tmp_path) == []
