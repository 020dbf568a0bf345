"""A publish killed with SIGKILL before its swap: the index keeps serving the tree it
had, and the next publish, or ``archwheel clean --index``, removes what the killed one left and
says so. The kill is real: a child process publishes and is killed while its tree is written."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archwheel.matrix.index import (
    CURRENT,
    TREES,
    Candidate,
    publish,
    read_index,
)
from archwheel.matrix.layout import unfinished_publishes
from tests.support.cli import CliRun
from tests.support.fuzz import EXAMPLES, FUZZ_SETTINGS, watchdog
from tests.support.index_wheels import make_dist

ROOT = Path(__file__).resolve().parents[3]

KILLED_PUBLISH = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from archwheel.matrix import index as m

    written = m._write_tree

    def write_then_hang(tree, *args):
        written(tree, *args)
        print(tree, flush=True)
        time.sleep(600)  # killed here: after the tree, before the swap

    m._write_tree = write_then_hang
    m.publish(Path(sys.argv[1]), [m.Candidate(Path(sys.argv[2]))])
    """
)


def _killed_publish(index: Path, wheel: Path) -> Path:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_PUBLISH, str(index), str(wheel)],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert child.stdout is not None
    tree = Path(child.stdout.readline().strip())
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert tree.is_dir()
    return tree


def test_a_killed_publish_leaves_the_index_serving_and_the_next_one_removes_its_tree(
    tmp_path: Path,
) -> None:
    index = tmp_path / "index"
    first = make_dist(tmp_path / "a", "pure", "1.0")
    assert publish(index, [Candidate(first)]).ok
    served = (index / CURRENT).resolve()
    left = _killed_publish(index, make_dist(tmp_path / "b", "pure", "1.1"))
    assert (index / CURRENT).resolve() == served  # readers never saw it
    assert [e.file for e in read_index(index)] == [first.name]
    assert unfinished_publishes(index, remove=False) == (f"{TREES}/{left.name}",)
    assert left.is_dir()  # listing removes nothing
    third = make_dist(tmp_path / "c", "pure", "1.2")
    result = publish(index, [Candidate(third)])
    assert result.ok
    assert result.stale_removed == (f"{TREES}/{left.name}",)
    assert not left.exists()
    assert sorted(e.file for e in read_index(index)) == sorted([first.name, third.name])
    assert sorted(p.name for p in (index / TREES).iterdir()) == sorted(
        [served.name, (index / CURRENT).resolve().name]
    )


def test_clean_removes_an_unfinished_publish_and_a_half_swap_and_nothing_else(
    tmp_path: Path, cli_run: CliRun
) -> None:
    index = tmp_path / "index"
    for n in range(2):
        assert publish(index, [Candidate(make_dist(tmp_path / "w", "pure", f"1.{n}"))]).ok
    before = sorted(p.name for p in (index / TREES).iterdir())
    left = _killed_publish(index, make_dist(tmp_path / "k", "pure", "2.0"))
    half = index / f".{CURRENT}-deadbeef"
    half.symlink_to(Path(TREES) / left.name, target_is_directory=True)
    code, out, err = cli_run("clean", "--engine", "none", "--temp", str(tmp_path / "none"),
                             "--index", str(index), "--dry-run")  # fmt: skip
    assert code == 0, err
    assert f"would remove {index}/{TREES}/{left.name}" in out
    assert f"would remove {index}/{half.name}" in out
    assert left.is_dir() and half.is_symlink()
    code, out, err = cli_run("clean", "--engine", "none", "--temp", str(tmp_path / "none"),
                             "--index", str(index))  # fmt: skip
    assert code == 0, err
    assert out.count("(a publish that did not finish)") == 2
    assert not left.exists() and not half.is_symlink()
    assert sorted(p.name for p in (index / TREES).iterdir()) == before
    assert len(read_index(index)) == 2


# -- a tampered index: only what archwheel made, inside the index, is ever removed ----------------

OLD_NAME = "00000000T000000000000Z-00000000"  # sorts before every tree: "newer" than nothing
NEW_NAME = "99999999T999999999999Z-ffffffff"  # sorts after every tree: "unfinished" by name
LEFTOVER = "99990101T000000000000Z-abcdef01"  # a real unfinished tree: clean removes it
LINKED_NAME = "99999999T999999999998Z-eeeeeeee"  # a tree name given to a link out


def _victim(root: Path) -> Path:
    """A folder outside the index that a tampered index leads to, holding folders with tree
    names (so that a name comparison would pick them) and a file."""
    victim = root / "victim"
    for name in (OLD_NAME, NEW_NAME, "data"):
        (victim / name).mkdir(parents=True)
        (victim / name / "precious.txt").write_text(name)
    (victim / "keep").write_text("keep")
    return victim


def _snapshot(folder: Path) -> list[tuple[str, str]]:
    """Every path under ``folder`` (links not followed) with its kind and a regular file's
    sha256."""
    found = []
    for path in sorted(folder.rglob("*")):
        mode = path.lstat().st_mode
        kind = "link" if path.is_symlink() else "dir" if path.is_dir() else "other"
        if stat.S_ISREG(mode):
            kind = "file"
        if kind == "file" and path.stat().st_size < 1 << 20:
            kind += hashlib.sha256(path.read_bytes()).hexdigest()
        found.append((str(path.relative_to(folder)), kind))
    return found


# Each shape: (what it does to the index, whether `clean` and `publish` must refuse it).
Tamper = Callable[[Path, Path], None]


def _relink(link: Path, target: str | Path) -> None:
    link.unlink()
    link.symlink_to(target)


def _swap_trees(index: Path, victim: Path) -> None:
    shutil.rmtree(index / TREES)
    (index / TREES).symlink_to(victim, target_is_directory=True)


def _lock_fifo(index: Path, _victim: Path) -> None:
    (index / ".lock").unlink()
    os.mkfifo(index / ".lock")


def _lock_folder(index: Path, _victim: Path) -> None:
    (index / ".lock").unlink()
    (index / ".lock").mkdir()


def _lock_link(index: Path, victim: Path) -> None:
    _relink(index / ".lock", victim / "made-by-the-lock")  # opening it for append made this


def _current_tree_link(index: Path, victim: Path) -> None:
    # A tree that is a link out, named by current.
    (index / TREES / NEW_NAME).symlink_to(victim / NEW_NAME, target_is_directory=True)
    _relink(index / CURRENT, f"{TREES}/{NEW_NAME}")


def _current_folder(index: Path, _victim: Path) -> None:
    (index / CURRENT).unlink()
    (index / CURRENT).mkdir()


CURRENT_SHAPES: dict[str, tuple[Tamper, bool]] = {
    "current-absolute": (lambda index, victim: _relink(index / CURRENT, victim), True),
    "current-root": (lambda index, _victim: _relink(index / CURRENT, "/"), True),
    "current-climbs": (
        lambda index, _victim: _relink(index / CURRENT, f"{TREES}/../../victim"),
        True,
    ),
    "current-trees": (lambda index, _victim: _relink(index / CURRENT, TREES), True),
    "current-folder": (_current_folder, True),
    "current-tree-link": (_current_tree_link, True),
}
TREES_SHAPES: dict[str, tuple[Tamper, bool]] = {
    "trees-link": (_swap_trees, True),
    "tree-entry-link": (
        lambda index, victim: (index / TREES / LINKED_NAME).symlink_to(
            victim, target_is_directory=True
        ),
        False,
    ),
    "half-swap-link": (
        lambda index, victim: (index / f".{CURRENT}-0badc0de").symlink_to(victim),
        False,
    ),
}
LOCK_SHAPES: dict[str, tuple[Tamper, bool]] = {
    "lock-fifo": (_lock_fifo, True),
    "lock-folder": (_lock_folder, True),
    "lock-link": (_lock_link, True),
}


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An index of two publishes, and a wheel to publish into copies of it."""
    root = tmp_path_factory.mktemp("published")
    index = root / "index"
    for n in range(2):
        assert publish(index, [Candidate(make_dist(root / "w", "pure", f"1.{n}"))]).ok
    return index, make_dist(root / "next", "pure", "2.0")


def _shapes(table: dict[str, tuple[Tamper, bool]]) -> st.SearchStrategy[str | None]:
    return st.sampled_from([None, *sorted(table)])


@settings(FUZZ_SETTINGS, max_examples=min(EXAMPLES, 40), suppress_health_check=list(HealthCheck))
@given(
    current=_shapes(CURRENT_SHAPES),
    trees=_shapes(TREES_SHAPES),
    lock=_shapes(LOCK_SHAPES),
    leftover=st.booleans(),
)
def test_clean_and_publish_never_remove_outside_a_tampered_index(
    published: tuple[Path, Path],
    cli_run: CliRun,
    current: str | None,
    trees: str | None,
    lock: str | None,
    leftover: bool,
) -> None:
    """Generated hostile layouts: ``current`` leading out of ``trees/`` (to a folder outside,
    to ``/``), ``trees`` a link to another folder, a tree or a half swap that is a link, a
    ``.lock`` that is a FIFO, a folder or a link. Neither ``clean --index`` nor ``publish``
    removes or makes anything outside the index, nor hangs; a shape archwheel did not make
    ends either with exit 2 and the index untouched."""
    source, wheel = published
    with tempfile.TemporaryDirectory() as box:
        root = Path(box)
        index = root / "index"
        shutil.copytree(source, index, symlinks=True)
        served = (index / CURRENT).resolve()
        victim = _victim(root)
        if leftover:
            (index / TREES / LEFTOVER / "wheels").mkdir(parents=True)
        refused = False
        for table, chosen in ((CURRENT_SHAPES, current), (TREES_SHAPES, trees),
                              (LOCK_SHAPES, lock)):  # fmt: skip
            if chosen is not None:
                tamper, refuses = table[chosen]
                tamper(index, victim)
                refused |= refuses
        outside, inside = _snapshot(victim), _snapshot(index)
        with watchdog(30):
            code, _out, err = cli_run("clean", "--engine", "none", "--temp",
                                      str(root / "none"), "--index", str(index))  # fmt: skip
        assert _snapshot(victim) == outside
        if refused:
            assert code == 2 and err.count("\n") == 1, err
            assert _snapshot(index) == inside
        else:
            assert code == 0, err
            assert not (index / TREES / LEFTOVER).exists()
            assert served.is_dir()
        with watchdog(30):
            code, _out, err = cli_run("publish", str(wheel), "--index", str(index))
        assert _snapshot(victim) == outside
        assert code == (2 if refused else 0), err
