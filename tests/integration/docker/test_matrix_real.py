"""`archwheel matrix` over real container builds, then pip and uv install from the index.

One matrix, run once per session (``ran`` fixture): the example recipe (no torch), archwheel's
libtorch example against torch 2.14.1 and 2.13.0 (the torch axis replaces the recipe's pin:
another torch wheel, another torch image, another local label and Requires-Dist), and a variant
of the example whose source does not compile. The failing cell stops nothing and publishes
nothing; the same matrix run again builds only that cell. Then, in fresh virtual environments
holding each real torch, pip and uv install the extension from the index's ``file://`` URL
and get the wheel of their torch, and the find-links page of each torch+CUDA lists only its own.

Budget on the 2-core machine: see docs/matrix.md (measured figures).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from archwheel.binary.scan.inputs import scan_path
from archwheel.effects.files import sha256_file
from archwheel.matrix.index import read_index, simple_url
from tests.support.containers_support import containers_with_label
from tests.support.index_wheels import fresh_venv, installed, pip_from_index, uv_from_index
from tests.support.paths import ROOT
from tests.support.venvs import copy_torch_venv

CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]
TORCHES = ("2.13.0", "2.14.1")
EXTENSION = "archwheel-torch-ops"
STABLE = "archwheel-stable-ops"
STABLE_SERVES = ("2.12.1", "2.13.0", "2.14.0")  # besides 2.14.1: recipes/stable-ops.toml

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.realwheel]


@dataclass(frozen=True)
class Run:
    returncode: int
    stderr: str
    result: dict[str, Any]
    seconds: float

    def cell(self, recipe: str, torch: str | None = None) -> dict[str, Any]:
        found: list[dict[str, Any]] = [
            c for c in self.result["cells"] if c["recipe"] == recipe and c["torch"] == torch
        ]
        assert len(found) == 1, found
        return found[0]


@dataclass(frozen=True)
class Ran:
    index: Path
    work: Path  # the cells' build folders, WORK/<key16> (with their logs)
    first: Run
    again: Run
    current_before: Path  # the tree `current` named after the first run
    current_after: Path
    label: str


def _run_matrix(env: dict[str, str], index: Path, work: Path) -> Run:
    argv = [
        *CLI, "matrix", "--recipe", "example", "--recipe", "libtorch-ops",
        "--recipe", "example-broken", "--recipe", "stable-ops",
        *(a for t in TORCHES for a in ("--torch", t)),
        "--index", str(index), "--work", str(work), "--format", "json",
    ]  # fmt: skip
    mark = time.monotonic()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600, check=False)
    seconds = time.monotonic() - mark
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(
            f"no JSON result (exit {proc.returncode}): {proc.stderr[-4000:]}"
        ) from None
    print(f"archwheel matrix: {seconds:.0f} s, exit {proc.returncode}")
    return Run(proc.returncode, proc.stderr, result, seconds)


def _broken_example(folder: Path) -> None:
    """recipes/example.toml with a copy of its source in which one kernel file has an error."""
    source = folder / "broken-src"
    shutil.copytree(ROOT / "examples" / "cuda-kernels", source)
    kernel = source / "csrc" / "info.cu"
    kernel.write_text(kernel.read_text() + "\nthis_is_not_cuda archwheel_test_error;\n")
    recipe = (ROOT / "recipes" / "example.toml").read_text()
    recipe = recipe.replace('path = "../examples/cuda-kernels"', f'path = "{source}"')
    recipe = recipe.replace('name = "example"', 'name = "example-broken"')
    assert "example-broken" in recipe and str(source) in recipe
    (folder / "example-broken.toml").write_text(recipe)


@pytest.fixture(scope="module")
def ran(docker_engine: str, tmp_path_factory: pytest.TempPathFactory) -> Ran:
    base = tmp_path_factory.mktemp("matrix-real")
    recipes = base / "recipes"
    recipes.mkdir()
    _broken_example(recipes)
    label = f"archwheel.test={uuid.uuid4().hex}"
    env = {
        **os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200",
        "ARCHWHEEL_RUN_LABEL": label, "ARCHWHEEL_RECIPES": str(recipes),
    }  # fmt: skip
    made = subprocess.run(
        [*CLI, "base-image"], env=env, capture_output=True, text=True, check=False
    )
    assert made.returncode == 0, made.stderr[-2000:]
    index = base / "index"
    first = _run_matrix(env, index, base / "work")
    before = (index / "current").resolve()
    again = _run_matrix(env, index, base / "work")
    current = (index / "current").resolve()
    return Ran(index, base / "work", first, again, before, current, label)


def _metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return z.read(name).decode()


def _wheel(ran: Ran, cell: dict[str, Any]) -> Path:
    (name,) = cell["wheels"]
    return ran.index / "current" / "wheels" / str(name)


# -- the run ------------------------------------------------------------------------------------


def test_every_cell_is_reported_and_the_failing_one_stops_nothing(ran: Ran) -> None:
    first = ran.first
    assert first.returncode == 5, first.stderr[-4000:]
    verdicts = {(c["recipe"], c["torch"]): c["verdict"] for c in first.result["cells"]}
    assert verdicts == {
        ("example", None): "published",
        ("libtorch-ops", "2.13.0"): "published",
        ("libtorch-ops", "2.14.1"): "published",
        ("example-broken", None): "build failed",
        # one cell for both torches: the recipe's loads_with names them
        ("stable-ops", "2.14.1"): "published",
    }, first.stderr[-4000:]
    broken = first.cell("example-broken")
    assert broken["message"] and not broken["wheels"]
    assert "step 'compile' failed" in broken["message"]
    (log,) = (ran.work / broken["key"][:16] / "logs").glob("example-broken-*.log")
    assert "archwheel_test_error" in log.read_text()  # nvcc's own error, from the real build
    # the failed cell published nothing: every entry of the index is a passing cell's
    published = {c["key"] for c in first.result["cells"] if c["verdict"] == "published"}
    assert {e.cell_key for e in read_index(ran.index)} == published
    print({c["recipe"] + str(c["torch"]): c["seconds"] for c in first.result["cells"]})


def test_the_same_matrix_again_builds_only_the_failed_cell(ran: Ran) -> None:
    again = ran.again
    verdicts = {(c["recipe"], c["torch"]): c["verdict"] for c in again.result["cells"]}
    assert verdicts == {
        ("example", None): "skipped",
        ("libtorch-ops", "2.13.0"): "skipped",
        ("libtorch-ops", "2.14.1"): "skipped",
        ("example-broken", None): "build failed",
        ("stable-ops", "2.14.1"): "skipped",
    }
    for cell in again.result["cells"]:
        if cell["verdict"] == "skipped":
            assert cell["reason"] == "in the index with the same inputs"
            assert cell["wheels"] == ran.first.cell(cell["recipe"], cell["torch"])["wheels"]
    # nothing new was published: `current` still names the first run's tree
    assert ran.current_after == ran.current_before
    print(f"rerun: {again.seconds:.0f} s (first run {ran.first.seconds:.0f} s)")


def test_no_container_is_left_behind(ran: Ran) -> None:
    assert containers_with_label(["docker"], ran.label) == []


# -- what the torch axis built ------------------------------------------------------------------


@pytest.mark.parametrize("torch", TORCHES)
def test_each_torch_cell_is_built_against_its_torch(ran: Ran, torch: str) -> None:
    wheel = _wheel(ran, ran.first.cell("libtorch-ops", torch))
    assert f"+pt{torch}cu130-cp311-" in wheel.name
    meta = _metadata(wheel).split("\n\n")[0].splitlines()
    assert f"Requires-Dist: torch=={torch}" in meta
    assert f"Version: 0.1.0+pt{torch}cu130" in meta
    provenance = json.loads(wheel.with_name(wheel.name + ".provenance.json").read_text())
    assert provenance["wheel"]["sha256"] == sha256_file(wheel)
    record = provenance["torch"]
    assert record["version"] == f"{torch}+cu130" and record["cuda"] == "13.0"
    assert record["requirement"] == f"torch=={torch}"
    # the recipe pins 2.14.1; the 2.13.0 cell says that --torch replaced it
    assert record["replaces"] == (None if torch == "2.14.1" else "torch==2.14.1")
    audit = json.loads(wheel.with_name(wheel.name + ".audit.json").read_text())
    assert audit["ok"] is True
    images = {
        e.target.name(e.kind)
        for library in scan_path(wheel).libraries
        for e in library.entries
        if Path(str(library.path)).name == "_ops.so"
    }
    assert "sm_90" in images


def test_the_two_torch_cells_differ_in_what_they_compiled_against(ran: Ran) -> None:
    docs = {}
    for torch in TORCHES:
        wheel = _wheel(ran, ran.first.cell("libtorch-ops", torch))
        docs[torch] = json.loads(wheel.with_name(wheel.name + ".provenance.json").read_text())
    old, new = docs["2.13.0"]["torch"], docs["2.14.1"]["torch"]
    assert old["wheel_sha256"] != new["wheel_sha256"]  # another torch wheel
    assert old["image"] != new["image"]  # compiled in another torch image
    assert docs["2.13.0"]["arch"]["torch_grammar"] == "2.13.0"


# -- the index and the installers ---------------------------------------------------------------


def test_each_find_links_page_lists_only_its_torch(ran: Ran) -> None:
    current = ran.index / "current"
    pages = sorted(p.name for p in current.glob("torch-*.html"))
    # the stable-ABI wheel also serves 2.12.1 and 2.14.0, which its build checked
    assert pages == [f"torch-{t}+cu130.html" for t in (*STABLE_SERVES, "2.14.1")]
    for torch in TORCHES:
        text = (current / f"torch-{torch}+cu130.html").read_text()
        other = next(t for t in TORCHES if t != torch)
        assert f"+pt{torch}cu130" in text and f"+pt{other}cu130" not in text
        assert "archwheel_example" not in text  # no torch: on no torch page
        wheel = _wheel(ran, ran.first.cell("libtorch-ops", torch))
        assert f"#sha256={sha256_file(wheel)}" in text


@pytest.mark.parametrize("installer", ["pip", "uv"])
@pytest.mark.parametrize("torch", TORCHES)
def test_installers_choose_the_wheel_of_the_installed_torch(
    ran: Ran, tmp_path: Path, installer: str, torch: str
) -> None:
    """A fresh venv holding the real torch (and its CUDA libraries): the resolver meets the
    newer cell's torch pin, backtracks, and takes the wheel built against this torch."""
    python = copy_torch_venv(torch, tmp_path / "venv")
    install = pip_from_index if installer == "pip" else uv_from_index
    proc = install(python, simple_url(ran.index), EXTENSION)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert installed(python, EXTENSION) == f"0.1.0+pt{torch}cu130"
    assert installed(python, "torch") == torch  # torch was kept, not replaced


def test_pip_installs_from_the_find_links_page_of_its_torch(ran: Ran, tmp_path: Path) -> None:
    python = copy_torch_venv("2.13.0", tmp_path / "venv")
    page = ran.index / "current" / "torch-2.13.0+cu130.html"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-cache-dir",
         "--no-index", "--find-links", page.as_uri(), EXTENSION],
        capture_output=True, text=True, check=False, timeout=300,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert installed(python, EXTENSION) == "0.1.0+pt2.13.0cu130"


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_the_example_installs_into_an_empty_venv(ran: Ran, tmp_path: Path, installer: str) -> None:
    python = fresh_venv(tmp_path / "venv")
    install = pip_from_index if installer == "pip" else uv_from_index
    proc = install(python, simple_url(ran.index), "archwheel-example")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert installed(python, "archwheel-example") == "0.1.0"
    # and the extension cannot be installed without a torch the index does not serve
    proc = install(python, simple_url(ran.index), EXTENSION)
    assert proc.returncode != 0


# -- a range cell: one wheel for several torches ([torch] loads_with) -----------------------------


def test_the_range_cell_is_one_wheel_on_the_page_of_every_torch_it_serves(ran: Ran) -> None:
    cell = ran.first.cell("stable-ops", "2.14.1")
    assert cell["serves"] == list(TORCHES)  # the torch axis's values its loads_with names
    wheel = _wheel(ran, cell)
    meta = _metadata(wheel).split("\n\n")[0].splitlines()
    assert "Requires-Dist: torch>=2.12.1,<2.15" in meta
    (entry,) = [e for e in read_index(ran.index) if e.project == STABLE]
    assert entry.serves == (*STABLE_SERVES, "2.14.1")
    for torch in entry.serves:
        text = (ran.index / "current" / f"torch-{torch}+cu130.html").read_text()
        assert f"#sha256={sha256_file(wheel)}" in text


def test_pip_installs_the_range_wheel_next_to_an_older_torch(ran: Ran, tmp_path: Path) -> None:
    python = copy_torch_venv("2.13.0", tmp_path / "venv")
    proc = pip_from_index(python, simple_url(ran.index), STABLE)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert installed(python, STABLE) == "0.1.0"
    assert installed(python, "torch") == "2.13.0"  # kept: the wheel's range admits it
    run = subprocess.run(
        [str(python), "-c", "import torch, archwheel_stable_ops as o; "
         "print(o.axpy(torch.ones(3), torch.ones(3), 2.0).tolist())"],
        capture_output=True, text=True, check=False, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0 and run.stdout.strip() == "[3.0, 3.0, 3.0]", run.stderr[-2000:]
