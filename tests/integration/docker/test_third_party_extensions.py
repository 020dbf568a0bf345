"""Two more real third-party extension sdists from the package index, of kinds
the other shipped recipes do not cover, built for one arch (9.0) against torch 2.14.1 in the
session's torch image (tests/support/extension_builds.py):

- torchsort 0.1.9: its CUDA module is built only when `nvcc` runs from PATH (a CPU module
  always); recipes/torchsort-0.1.9.toml;
- causal-conv1d 1.7.0: its setup.py hard-codes a -gencode list (eleven archs with CUDA 13) and
  downloads a prebuilt wheel unless CAUSAL_CONV1D_FORCE_BUILD=TRUE; the recipe's patch makes it
  read TORCH_CUDA_ARCH_LIST (recipes/causal-conv1d-1.7.0.toml).

Each module is checked by an independent scan (exactly sm_90, no other image), by the build's
own nvcc record (every .cu compiled, for sm_90 only), and by can-load against the real torch
2.14.1, whose verdict the real loader confirms; the smoke snippet's CPU part runs in a fresh venv.
Budget: about 2 (torchsort) and 4-7 (causal-conv1d) minutes of compile on the 2-core machine.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from archwheel.wheelbuild.nvcc_record import never_compiled
from tests.support.cli import CliRun
from tests.support.extension_builds import Built, Session, device_images, ok
from tests.support.real_import import check_against_import
from tests.support.venvs import copy_torch_venv

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.realwheel]

CASES = {
    # recipe: (the modules with device code, the CUDA sources of the project)
    "torchsort-0.1.9": (
        {"torchsort/isotonic_cuda.cpython-311-x86_64-linux-gnu.so"},
        {"torchsort/isotonic_cuda.cu"},
    ),
    "causal-conv1d-1.7.0": (
        {"causal_conv1d_cuda.cpython-311-x86_64-linux-gnu.so"},
        {"csrc/causal_conv1d_fwd.cu", "csrc/causal_conv1d_bwd.cu", "csrc/causal_conv1d_update.cu"},
    ),
}


def _built(session: Session, recipe: str) -> Built:
    return ok(session, recipe)


@pytest.mark.parametrize("recipe", sorted(CASES))
def test_each_cuda_module_holds_exactly_the_requested_arch(
    extension_builds: Session, recipe: str
) -> None:
    built = _built(extension_builds, recipe)
    modules, sources = CASES[recipe]
    images = device_images(built.wheel)
    assert set(images) == modules, images
    assert all(found == {"sm_90"} for found in images.values()), images
    provenance: dict[str, Any] = built.provenance
    record = provenance["nvcc"]
    assert record is not None and not record["truncated"]
    names = record["sources"]  # as nvcc was given them (ninja: relative to its build folder)
    assert never_compiled(sorted(sources), names, "/build/src") == ()  # every .cu compiled ...
    assert {a for archs in names.values() for a in archs} == {"sm_90"}  # ... for sm_90 only


def test_the_hard_coded_list_was_patched_and_the_project_built_here(
    extension_builds: Session,
) -> None:
    built = _built(extension_builds, "causal-conv1d-1.7.0")
    provenance: dict[str, Any] = built.provenance
    (patch,) = provenance["source"]["patches"]
    assert patch["file"].endswith("causal-conv1d-1.7.0-arch-list.diff")
    assert provenance["environment"]["CAUSAL_CONV1D_FORCE_BUILD"] == "TRUE"


@pytest.mark.parametrize("recipe", sorted(CASES))
def test_can_load_agrees_with_the_real_loader_and_the_cpu_part_runs(
    extension_builds: Session,
    torch_venv: Path,
    torch_wheel: Path,
    cli_run: CliRun,
    tmp_path: Path,
    recipe: str,
) -> None:
    built = _built(extension_builds, recipe)
    doc = check_against_import(cli_run, torch_venv, built.wheel, torch_wheel, tmp_path / "u")
    assert doc["verdict"] == "loads", doc
    python = copy_torch_venv("2.14.1", tmp_path / "venv")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         str(built.wheel)],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    snippet = built.wheel.with_name(built.wheel.name + ".smoke.py")
    run = subprocess.run(
        [str(python), str(snippet)], capture_output=True, text=True, check=False, timeout=600,
        env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"}, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
