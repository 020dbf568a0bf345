"""A publish killed with SIGKILL before its swap (issue 29): the index keeps serving the tree it
had, and the next publish, or ``archwheel clean --index``, removes what the killed one left and
says so. The kill is real: a child process publishes and is killed while its tree is written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from archwheel.matrix.index import (
    CURRENT,
    TREES,
    Candidate,
    publish,
    read_index,
)
from archwheel.matrix.layout import unfinished_publishes
from tests.support.cli import CliRun
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
