"""One exit-code table (archwheel/exit_codes.py), and docs/exit-codes.md says the same."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import archwheel
from archwheel import errors
from archwheel.effects.process import ProgramTimedOut
from archwheel.exit_codes import ERROR_CODES, MEANING, ExitCode, exit_code_for

PACKAGE = Path(archwheel.__file__).parent
DOC = PACKAGE.parent.parent / "docs" / "exit-codes.md"


def table_codes(text: str) -> set[int]:
    """The codes in the first column of the document's tables (`| 10 |`, `| 2, 4 |`)."""
    codes: set[int] = set()
    for line in text.splitlines():
        match = re.match(r"^\|\s*([0-9][0-9, ]*)\s*\|", line)
        if match:
            codes.update(int(n) for n in re.findall(r"[0-9]+", match.group(1)))
    return codes


def test_every_code_in_the_document_is_in_the_table_and_back() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert table_codes(text) <= {int(c) for c in ExitCode}
    for code in ExitCode:
        assert re.search(rf"(?<![0-9.]){int(code)}(?![0-9.])", text), f"{code!r} undocumented"


def test_every_code_has_a_meaning() -> None:
    assert set(MEANING) == set(ExitCode)


def test_table_reader_sees_codes() -> None:
    assert table_codes("| code | x |\n|---:|---|\n| 10 | jit |\n| 2, 4 | as above |\n") == {
        2,
        4,
        10,
    }


def exit_numbers_outside_the_table(path: Path) -> list[str]:
    """EXIT_* names bound to a number, and commands returning a bare number other than 0."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            value = node.value
            if (
                any(n.startswith("EXIT_") for n in names)
                and isinstance(value, ast.Constant)
                and isinstance(value.value, int)
            ):
                found.append(f"{path.name}:{node.lineno} binds {names[0]} = {value.value}")
        if (
            isinstance(node, ast.Return)
            and isinstance(node.value, ast.Constant)
            and type(node.value.value) is int
            and node.value.value != 0
            and "interfaces" in path.parts
        ):
            found.append(f"{path.name}:{node.lineno} returns {node.value.value}")
    return found


def test_no_module_defines_an_exit_number_of_its_own() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name != "exit_codes.py" and "data" not in path.parts:
            found.extend(exit_numbers_outside_the_table(path))
    assert found == []


def test_checker_sees_a_second_table(tmp_path: Path) -> None:
    (tmp_path / "interfaces").mkdir()
    probe = tmp_path / "interfaces" / "probe.py"
    probe.write_text("EXIT_X = 7\ndef f() -> int:\n    return 2\n")
    assert exit_numbers_outside_the_table(probe) == [
        "probe.py:1 binds EXIT_X = 7",
        "probe.py:3 returns 2",
    ]


def test_library_errors_carry_no_exit_code_and_the_table_maps_each_class() -> None:
    classes = [
        c
        for c in vars(errors).values()
        if isinstance(c, type) and issubclass(c, errors.ArchwheelError)
    ]
    assert len(classes) >= 8
    for cls in classes:
        assert not hasattr(cls, "exit_code"), cls
    expected = {
        errors.ArchwheelError: ExitCode.USAGE,
        errors.UsageError: ExitCode.USAGE,
        errors.ArchListError: ExitCode.USAGE,
        errors.RecipeError: ExitCode.USAGE,
        errors.OutputError: ExitCode.USAGE,
        errors.FactsError: ExitCode.TOOL,
        errors.InputError: ExitCode.INCOMPLETE,
        errors.ToolError: ExitCode.TOOL,
        errors.BuildError: ExitCode.BUILD,
    }
    assert set(expected) == set(classes)
    for cls, code in expected.items():
        assert exit_code_for(cls("x")) is code, cls
    # a subclass elsewhere takes its nearest listed base's code
    assert exit_code_for(ProgramTimedOut("x", 1.0)) is ExitCode.TOOL
    assert set(ERROR_CODES.values()) <= set(ExitCode)


def test_the_document_says_where_the_codes_of_errors_come_from() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert "exit_code_for" in text
