"""Index folders that archwheel did not make as they are, against every command that reads or
writes an index: a ``current`` that leads out of the index (or nowhere), a ``trees`` that is a
link, a ``.lock`` that is a FIFO or a link. One line and a documented exit code, nothing outside
the index touched, no hang (the other bad inputs are in test_bad_input_matrix.py)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from archwheel.exit_codes import ExitCode
from tests.support.bad_input import DOCUMENTED, run_main
from tests.support.fuzz import watchdog
from tests.support.index_wheels import make_dist

TREE = "20260101T000000000000Z-00c0ffee"


def _index_with(folder: Path, shape: str) -> str:
    """An index folder (a tree, ``current`` naming it, a lock) bent into ``shape``; an
    ``outside`` folder beside it is what a bent link leads to."""
    index, outside = folder / "index", folder / "outside"
    (index / "trees" / TREE / "wheels").mkdir(parents=True)
    (index / "trees" / TREE / "index.json").write_text('{"schema_version": 1, "entries": []}')
    (outside / TREE).mkdir(parents=True)
    (index / ".lock").touch()
    current = index / "current"
    if shape == "current-outside":
        current.symlink_to(outside)
    elif shape == "current-root":
        current.symlink_to("/")
    elif shape == "current-dangling":
        current.symlink_to(f"trees/{TREE[:-1]}1")
    else:
        current.symlink_to(f"trees/{TREE}")
    if shape == "trees-link":
        (index / "trees").rename(folder / "moved")
        (index / "trees").symlink_to(outside)
    if shape in ("lock-fifo", "lock-link"):
        (index / ".lock").unlink()
        if shape == "lock-fifo":
            os.mkfifo(index / ".lock")
        else:
            (index / ".lock").symlink_to(outside / "made")
    return str(index)


INDEX_SHAPES = ("current-outside", "current-root", "current-dangling", "trees-link",
                "lock-fifo", "lock-link")  # fmt: skip
INDEX_COMMANDS: dict[str, Callable[[str, Path], list[str]]] = {
    "clean-index": lambda x, folder: [
        "clean",
        "--engine",
        "none",
        "--temp",
        str(folder / "none"),
        "--index",
        x,
        "--dry-run",
    ],
    "clean-index-remove": lambda x, folder: [
        "clean",
        "--engine",
        "none",
        "--temp",
        str(folder / "none"),
        "--index",
        x,
    ],
    "recheck-index": lambda x, _: ["matrix", "--recheck", "--index", x],
    "publish-into": lambda x, folder: [
        "publish",
        str(make_dist(folder / "w", "pure", "1.0")),
        "--index",
        x,
    ],
    "matrix-plan": lambda x, folder: [
        "matrix",
        "--plan",
        "--index",
        x,
        str(folder / "m.toml"),
    ],
}


@pytest.mark.parametrize("shape", INDEX_SHAPES)
@pytest.mark.parametrize("command", sorted(INDEX_COMMANDS))
def test_an_index_archwheel_did_not_make_is_refused_untouched(
    command: str, shape: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every command that reads or writes an index, against an index whose ``current`` leads
    out of it (or nowhere), whose ``trees`` is a link, or whose ``.lock`` is a FIFO or a link:
    one line, exit 2 (a dangling ``current`` is an index with nothing published for the
    commands that write; ``--recheck`` refuses it), nothing outside touched, no hang."""
    index = _index_with(tmp_path, shape)
    (tmp_path / "m.toml").write_text('[matrix]\nrecipes = ["example"]\ntorch = ["2.9.1"]\n')
    before = sorted(str(p) for p in (tmp_path / "outside").rglob("*"))
    argv = INDEX_COMMANDS[command](index, tmp_path)
    with watchdog(60):
        code = run_main(argv)
    out, err = capsys.readouterr()
    assert "internal error" not in err and "Traceback" not in err, err[-2000:]
    assert sorted(str(p) for p in (tmp_path / "outside").rglob("*")) == before
    writes = command in ("clean-index", "clean-index-remove", "publish-into")
    if not writes and shape.startswith("lock"):
        assert code in DOCUMENTED, (code, err)  # a reader takes no lock
    elif shape == "current-dangling" and command != "recheck-index":
        assert code in DOCUMENTED, (code, err)  # an index with nothing published, for these
    else:
        assert code == ExitCode.USAGE, (code, out, err)
        assert err.count("\n") == 1, err
