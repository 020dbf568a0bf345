"""A build that stops resumes where it stopped: ``--work-name`` and ``--stop-after configure``
on a real container build (the example's builder image: CUDA 13.0 from the package index).

The project (tests/support/data/ninja-kernels) configures as CMake does for ninja: its
``configure.sh`` writes build/build.ninja with the arch flags baked into each of its three nvcc
compiles. One tree, kept under a name, goes through four builds:

1. ``--stop-after configure``: the proof of its build.ninja (3 CUDA steps, exactly the arch
   list) and no wheel;
2. ``--targets csrc/a.cu``: a partial build, ``obj/a.o`` audited against its step, no wheel;
3. a build that stops after compiling ``b.cu`` (its command exits, as a killed build would);
4. the same build again: ninja goes on, neither ``a.cu`` nor ``b.cu`` is compiled again (the
   tree's nvcc history shows no new row for them), the gate sees all three sources compiled,
   the wheel is audited;
5. the same name with another arch list: refused in one line naming what changed (exit 2).

Then ``archwheel clean --work NAME`` removes the tree. No container is left behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from archwheel.effects.paths import cache_dir
from tests.support.containers_support import containers_with_label
from tests.support.paths import ROOT

CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]
PROJECT = ROOT / "tests" / "support" / "data" / "ninja-kernels"
ARCH = "8.0;9.0"

pytestmark = [pytest.mark.docker, pytest.mark.nvcc, pytest.mark.slow]

RECIPE = """\
schema_version = 1

[recipe]
name = "ninja-kernels"
version = "0.1.0"

[source]
path = "project"

[toolchain]
cuda = "13.0"
base_image = "archwheel/debian:bookworm"
source = "pypi"

[python]
versions = ["3.11"]

[arch]
variable = "CUDA_GENCODE_FLAGS"
format = "gencode"
default = "8.0;9.0"

[build]
requirements = ["ninja"]
memory_per_job_gib = 1.0
configure = "sh configure.sh"
build_folder = "build"
command = '''
ninja -C build obj/b.o
if [ ! -e stopped-once ]; then
    touch stopped-once
    echo "stopping after obj/b.o, as a killed build would"
    exit 7
fi
ninja -C build
python make_wheel.py "$ARCHWHEEL_DIST"
'''
"""


@dataclass(frozen=True)
class Tree:
    recipe: Path
    out: Path
    cache: Path
    env: dict[str, str]
    name: str
    label: str

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CLI, *args], env=self.env, capture_output=True, text=True, timeout=1800, check=False
        )

    def build(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run("build", "--recipe", str(self.recipe), "--out", str(self.out),
                        "--no-cache", "--work-name", self.name, "--format", "json", *args)  # fmt: skip

    @property
    def folder(self) -> Path:
        return self.cache / "work" / self.name

    def compiled(self) -> Counter[str]:
        """The tree's nvcc history: rows per source (every compile adds rows)."""
        history = self.folder / "nvcc-record.csv"
        rows = history.read_text().splitlines() if history.exists() else []
        return Counter(
            Path(row.split(",")[0].strip().strip('"')).name
            for row in rows
            if row.strip() and not row.startswith('"source file name"')
        )


@pytest.fixture(scope="module")
def tree(docker_engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    root = tmp_path_factory.mktemp("kept-tree")
    shutil.copytree(PROJECT, root / "project")
    recipe = root / "ninja-kernels.toml"
    recipe.write_text(RECIPE)
    label = f"archwheel.test={uuid.uuid4().hex}"
    cache = cache_dir(os.environ.get("ARCHWHEEL_CACHE") or os.environ.get("XDG_CACHE_HOME"))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", "ARCHWHEEL_RUN_LABEL": label}
    made = subprocess.run(
        [*CLI, "base-image"], env=env, capture_output=True, text=True, check=False
    )
    assert made.returncode == 0, made.stderr[-2000:]
    kept = Tree(recipe, root / "dist", cache, env, f"test-{uuid.uuid4().hex[:8]}", label)
    yield kept
    shutil.rmtree(kept.folder, ignore_errors=True)


def test_a_stopped_build_resumes_where_it_stopped(tree: Tree) -> None:
    # 1. configure only: the proof, no wheel
    configured = tree.build("--stop-after", "configure")
    assert configured.returncode == 0, configured.stderr[-3000:]
    document = json.loads(configured.stdout)
    (proof,) = document["configured"]
    assert (proof["cuda_steps"], proof["exact"], proof["deviating"]) == (3, 3, 0)
    assert proof["expected"] == ["sm_80", "sm_90"] and document["ok"] is True
    assert document["work_folder"] == str(tree.folder / "src")
    assert (tree.folder / "src" / "build" / "build.ninja").is_file()
    assert not list(tree.out.glob("*.whl"))

    # 2. a partial build: the objects of one source, audited
    partial = tree.build("--targets", "csrc/a.cu")
    assert partial.returncode == 0, partial.stderr[-3000:]
    assert "resuming the build tree" in partial.stderr
    (check,) = json.loads(partial.stdout)["objects"]
    assert check == {"output": "obj/a.o", "source": str(Path("/build/src/csrc/a.cu")),
                     "found": ["sm_80", "sm_90"], "expected": ["sm_80", "sm_90"], "ok": True}  # fmt: skip
    first = tree.compiled()
    assert first["a.cu"] > 0 and first["b.cu"] == first["c.cu"] == 0
    assert not list(tree.out.glob("*.whl"))

    # 3. a build that stops after one more object
    stopped = tree.build()
    assert stopped.returncode == 5, stopped.stderr[-3000:]
    second = tree.compiled()
    assert second["a.cu"] == first["a.cu"] and second["b.cu"] > 0 and second["c.cu"] == 0
    assert (tree.folder / "src" / "build" / "obj" / "b.o").is_file()

    # 4. again: only what is left is compiled, and the wheel passes the gates
    resumed = tree.build()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "the tree so far: 2 of 3 compile steps done (2 of 3 CUDA)" in resumed.stderr
    after = tree.compiled()
    assert after["a.cu"] == first["a.cu"], "a.cu was compiled again: the build started over"
    assert after["b.cu"] == second["b.cu"], "b.cu was compiled again: the build started over"
    assert after["c.cu"] > 0
    built = json.loads(resumed.stdout)
    provenance = json.loads(Path(built["provenance"]).read_text())
    assert sorted(Path(s).name for s in provenance["nvcc"]["sources"]) == ["a.cu", "b.cu", "c.cu"]
    assert Path(built["wheel"]).is_file()

    # 5. other inputs under the same name: refused, the tree untouched
    other = tree.build("--arch", "9.0")
    assert other.returncode == 2, other.stderr[-3000:]
    assert f"the kept build tree {tree.name!r} was made for other inputs" in other.stderr
    assert "changed: arch list" in other.stderr
    assert (tree.folder / "src" / "build" / "obj" / "a.o").is_file()
    assert containers_with_label(["docker"], tree.label) == []


def test_clean_removes_a_kept_tree(tree: Tree) -> None:
    tree.folder.mkdir(parents=True, exist_ok=True)
    listed = tree.run("clean", "--work", tree.name, "--dry-run")
    assert listed.returncode == 0 and str(tree.folder) in listed.stdout
    assert tree.folder.is_dir()
    removed = tree.run("clean", "--work", tree.name)
    assert removed.returncode == 0, removed.stderr
    assert f"removed the kept build tree {tree.folder}" in removed.stdout
    assert not tree.folder.exists()
    again = tree.run("clean", "--work", tree.name)
    assert again.returncode == 2 and "no kept build tree named" in again.stderr
