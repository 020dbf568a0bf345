"""No Python module of archwheel, its tests or its benchmarks is over ``MAX_LINES`` lines.

A module that outgrows the limit is split by responsibility (a new module beside it), not
trimmed: a reader holds one module in mind at a time, and the limit keeps each one readable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 700
CHECKED = ("src", "tests", "benchmarks")


def too_long(folder: Path, limit: int = MAX_LINES) -> list[str]:
    """``path: N lines`` of each ``*.py`` under ``folder`` over ``limit`` lines."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        with path.open("rb") as handle:
            lines = sum(1 for _ in handle)
        if lines > limit:
            found.append(f"{path.relative_to(folder.parent)}: {lines} lines")
    return found


@pytest.mark.parametrize("folder", CHECKED)
def test_no_module_is_over_the_limit(folder: str) -> None:
    assert too_long(ROOT / folder) == []


def test_the_check_sees_a_long_module(tmp_path: Path) -> None:
    folder = tmp_path / "pkg"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (folder / "sub" / "at_the_limit.py").write_text("x = 1\n" * MAX_LINES)
    (folder / "notes.txt").write_text("x\n" * (MAX_LINES + 1))
    assert too_long(folder) == [f"pkg/sub/long.py: {MAX_LINES + 1} lines"]
