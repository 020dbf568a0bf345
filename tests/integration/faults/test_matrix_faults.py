"""``archwheel matrix`` runs that meet on one index, and one killed while it publishes.

Real container builds of the example recipe (one arch, a warm cache volume after the first) and
of a copy of it under another distribution name, published into one index folder from separate
working folders at the same time, the way two CI jobs of one team do. What must hold: every run
ends 0, no wheel is lost, a file name is never given other bytes, the index is consistent and
pip installs from it; a run killed with SIGKILL while publishing leaves an index that readers
still use as it was, and the next run publishes, removing what the killed one left, with a line.
Whole builds: ``nox -s faults`` (marker ``costly``); figures in docs/faults.md.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from archwheel.effects.files import sha256_file
from archwheel.matrix.index import read_index, simple_url
from tests.support.containers_support import containers_with_label
from tests.support.index_wheels import fresh_venv, installed, pip_from_index
from tests.support.paths import ROOT

pytestmark = [
    pytest.mark.faults, pytest.mark.costly, pytest.mark.docker, pytest.mark.nvcc,
    pytest.mark.slow,
]  # fmt: skip
CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]
ARCH = "8.0"


@dataclass
class Matrices:
    env: dict[str, str]
    volume: str
    label: str

    def argv(self, recipe: str, index: Path, work: Path) -> list[str]:
        return [*CLI, "matrix", "--recipe", recipe, "--arch", ARCH, "--index", str(index),
                "--work", str(work), "--ccache-volume", self.volume, "--format", "json"]  # fmt: skip

    def start(self, recipe: str, index: Path, work: Path) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(recipe, index, work), env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip

    def run(self, recipe: str, index: Path, work: Path) -> tuple[int, dict[str, Any], str]:
        proc = subprocess.run(self.argv(recipe, index, work), env=self.env, capture_output=True,
                              text=True, timeout=1800, check=False)  # fmt: skip
        return proc.returncode, _json(proc.stdout, proc.stderr), proc.stderr


def _json(stdout: str, stderr: str) -> dict[str, Any]:
    try:
        found: dict[str, Any] = json.loads(stdout)
    except ValueError:
        raise AssertionError(f"no JSON result: {stderr[-3000:]}") from None
    return found


def _second_example(folder: Path) -> None:
    """The example under another distribution and package name (archwheel-example-two,
    ``archwheel_example_two``), recipe example-two; its CUDA sources are the same files."""
    source = folder / "example-two-src"
    shutil.copytree(ROOT / "examples" / "cuda-kernels", source)
    (source / "src" / "archwheel_example").rename(source / "src" / "archwheel_example_two")
    for path in [*source.glob("backend/*.py"), *source.glob("src/archwheel_example_two/*.py")]:
        text = path.read_text()
        text = text.replace("archwheel_example", "archwheel_example_two")
        text = text.replace(
            'DIST_NAME = "archwheel-example"', 'DIST_NAME = "archwheel-example-two"'
        )
        path.write_text(text)
    assert (
        "archwheel-example-two" in (source / "backend" / "archwheel_example_backend.py").read_text()
    )
    recipe = (ROOT / "recipes" / "example.toml").read_text()
    recipe = recipe.replace('path = "../examples/cuda-kernels"', f'path = "{source}"')
    recipe = recipe.replace('name = "example"', 'name = "example-two"')
    assert "example-two" in recipe and str(source) in recipe
    (folder / "example-two.toml").write_text(recipe)


@pytest.fixture(scope="module")
def matrices(docker_engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrices]:
    base = tmp_path_factory.mktemp("matrix-faults")
    recipes = base / "recipes"
    recipes.mkdir()
    _second_example(recipes)
    label = f"archwheel.test={uuid.uuid4().hex}"
    env = {
        **os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200",
        "ARCHWHEEL_RUN_LABEL": label, "ARCHWHEEL_RECIPES": str(recipes),
    }  # fmt: skip
    env.pop("ARCHWHEEL_CACHE_URL", None)
    made = subprocess.run([*CLI, "base-image"], env=env, capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    found = Matrices(env, f"archwheel-test-matrix-fault-{uuid.uuid4().hex[:8]}", label)
    yield found
    subprocess.run(["docker", "volume", "rm", "--force", found.volume], capture_output=True,
                   check=False)  # fmt: skip


@pytest.fixture(scope="module")
def undisturbed(matrices: Matrices, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each recipe's wheel from an undisturbed run, one after the other (it warms the cache)."""
    base = tmp_path_factory.mktemp("undisturbed")
    shas: dict[str, str] = {}
    for recipe in ("example", "example-two"):
        code, result, stderr = matrices.run(recipe, base / "index", base / f"work-{recipe}")
        assert code == 0, stderr[-3000:]
        for entry in read_index(base / "index"):
            shas[entry.file] = entry.sha256
    assert len(shas) == 2, shas
    return shas


def _check_index(index: Path, expected: dict[str, str], tmp_path: Path) -> None:
    entries = read_index(index)
    assert {e.file: e.sha256 for e in entries} == expected
    wheels = index / "current" / "wheels"
    for entry in entries:
        assert sha256_file(wheels / entry.file) == entry.sha256
    trees = sorted(p.name for p in (index / "trees").iterdir())
    assert len(trees) <= 2, trees  # the current tree and the one before it, nothing unfinished
    assert [p.name for p in index.iterdir() if p.name.startswith(".current")] == []
    python = fresh_venv(tmp_path / "venv")
    proc = pip_from_index(python, simple_url(index), "--no-deps", "archwheel-example",
                          "archwheel-example-two")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert installed(python, "archwheel-example") == "0.1.0"
    assert installed(python, "archwheel-example-two") == "0.1.0"


def test_three_matrix_runs_from_three_working_folders_publish_into_one_index(
    matrices: Matrices, undisturbed: dict[str, str], tmp_path: Path
) -> None:
    """Two runs of the same matrix (the same cell) and one of another recipe, at once."""
    index = tmp_path / "index"
    procs = [
        matrices.start("example", index, tmp_path / "work-a"),
        matrices.start("example", index, tmp_path / "work-b"),
        matrices.start("example-two", index, tmp_path / "work-c"),
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=1800)
        assert proc.returncode == 0, err[-3000:]
        assert "Traceback" not in err
        results.append(_json(out, err))
    # the cell both runs of the same matrix built is in the index once, with the same bytes
    _check_index(index, undisturbed, tmp_path)
    assert containers_with_label(["docker"], matrices.label) == []


def test_a_matrix_sigkilled_while_publishing_then_run_again(
    matrices: Matrices, undisturbed: dict[str, str], tmp_path: Path
) -> None:
    """The index holds example-two; a run of example is killed right after its build, while it
    audits and publishes. Readers still see example-two alone; the next run publishes both."""
    index = tmp_path / "index"
    code, _, stderr = matrices.run("example-two", index, tmp_path / "work-two")
    assert code == 0, stderr[-3000:]
    before = {e.file: e.sha256 for e in read_index(index)}
    proc = matrices.start("example", index, tmp_path / "work")
    seen: list[str] = []
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            seen.append(line)
            if line.lstrip().startswith("smoke test "):  # the build's last line: publishing now
                proc.send_signal(signal.SIGKILL)
                break
        else:
            raise AssertionError("the matrix never built: " + "".join(seen[-30:]))
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    # what a reader sees: the index before the killed publish (or after it, when it finished)
    now = {e.file: e.sha256 for e in read_index(index)}
    assert now in (before, undisturbed), now
    deadline = time.monotonic() + 30
    while containers_with_label(["docker"], matrices.label) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert containers_with_label(["docker"], matrices.label) == []
    code, _, stderr = matrices.run("example", index, tmp_path / "work")
    assert code == 0, stderr[-3000:]
    assert "Traceback" not in stderr
    stale = [line for line in stderr.splitlines() if "left by a publish" in line]
    print(
        f"killed while publishing: index {'unchanged' if now == before else 'published'}, "
        f"stale trees removed by the next run: {stale}"
    )
    _check_index(index, undisturbed, tmp_path)
