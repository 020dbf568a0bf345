"""Real third-party extension sdists from the package index, of kinds the other shipped recipes
do not cover, built for one arch (9.0) against torch 2.14.1 in the session's torch image
(tests/support/extension_builds.py):

- torchsort 0.1.9: its CUDA module is built only when `nvcc` runs from PATH (a CPU module
  always); recipes/torchsort-0.1.9.toml;
- causal-conv1d 1.7.0: its setup.py hard-codes a -gencode list (eleven archs with CUDA 13) and
  downloads a prebuilt wheel unless CAUSAL_CONV1D_FORCE_BUILD=TRUE; the recipe's patch makes it
  read TORCH_CUDA_ARCH_LIST (recipes/causal-conv1d-1.7.0.toml);
- beamgrad 2.3.0: three modules on CPython's limited API in one cp310-abi3 wheel (a torch CPU
  module, a CUDA module behind the project's BEAMGRAD_CUDA switch, a plain ctypes library);
  recipes/beamgrad-2.3.0.toml;
- DeepSpeed 0.19.8: many CUDA ops, each behind a DS_BUILD_<OP> switch, two of them built into
  modules three folders deep, with the accelerator named (DS_ACCELERATOR=cuda: a GPU-less
  container would otherwise build for "cpu"); recipes/deepspeed-0.19.8.toml.

Each module is checked by an independent scan (exactly sm_90, no other image), by the build's
own nvcc record (every .cu compiled, for sm_90 only), and by can-load against the real torch
2.14.1, whose verdict the real loader confirms; the smoke snippet's CPU part runs in a fresh venv.
Budget: about 2.5 (torchsort), 8 (causal-conv1d), 2 (beamgrad) and 3 (DeepSpeed) minutes of
build on the 2-core machine, cold. torchsort runs in the README's `nox -s tests`; the other three
carry the marker `heavy` (`nox -s heavy`), which keeps CI under 60 minutes.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from archwheel.wheelbuild.compile.nvcc_record import never_compiled
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
    "beamgrad-2.3.0": ({"beamgrad/_C_cuda.abi3.so"}, {"cuda/dbs_cuda.cu"}),
    "deepspeed-0.19.8": (
        {
            "deepspeed/ops/adam/fused_adam_op.cpython-311-x86_64-linux-gnu.so",
            "deepspeed/ops/lamb/fused_lamb_op.cpython-311-x86_64-linux-gnu.so",
        },
        {"csrc/adam/multi_tensor_adam.cu", "csrc/lamb/fused_lamb_cuda_kernel.cu"},
    ),
}
# In `nox -s heavy` only: about 13 minutes of builds together (docs/maintainers/performance.md, CI).
HEAVY = {"causal-conv1d-1.7.0", "beamgrad-2.3.0", "deepspeed-0.19.8"}
RECIPES = [
    pytest.param(recipe, marks=pytest.mark.heavy) if recipe in HEAVY else recipe
    for recipe in sorted(CASES)
]
# Modules deeper than one package folder, which the real loader must open by name.
DEEP = {"deepspeed-0.19.8": sorted(CASES["deepspeed-0.19.8"][0])}


def _built(session: Session, recipe: str) -> Built:
    return ok(session, recipe)


@pytest.mark.parametrize("recipe", RECIPES)
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


@pytest.mark.heavy
def test_the_hard_coded_list_was_patched_and_the_project_built_here(
    extension_builds: Session,
) -> None:
    built = _built(extension_builds, "causal-conv1d-1.7.0")
    provenance: dict[str, Any] = built.provenance
    (patch,) = provenance["source"]["patches"]
    assert patch["file"].endswith("causal-conv1d-1.7.0-arch-list.diff")
    assert provenance["environment"]["CAUSAL_CONV1D_FORCE_BUILD"] == "TRUE"


@pytest.mark.parametrize("recipe", RECIPES)
def test_can_load_agrees_with_the_real_loader_and_the_cpu_part_runs(
    extension_builds: Session,
    torch_venv: Path,
    torch_wheel: Path,
    cli_run: CliRun,
    tmp_path: Path,
    recipe: str,
) -> None:
    built = _built(extension_builds, recipe)
    doc = check_against_import(
        cli_run, torch_venv, built.wheel, torch_wheel, tmp_path / "u", modules=DEEP.get(recipe)
    )
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


@pytest.mark.heavy
def test_beamgrad_is_one_abi3_wheel_with_its_cuda_module_required(
    extension_builds: Session,
) -> None:
    built = _built(extension_builds, "beamgrad-2.3.0")
    # The limited-API tag survives the repair (cp310-abi3, not the builder's cp311-cp311).
    assert built.wheel.name.endswith("-cp310-abi3-manylinux_2_36_x86_64.whl"), built.wheel.name
    provenance: dict[str, Any] = built.provenance
    assert provenance["environment"]["BEAMGRAD_CUDA"] == "1"
    with zipfile.ZipFile(built.wheel) as zf:
        names = set(zf.namelist())
        build_info = zf.read("beamgrad/_build_info.py").decode()
    assert {"beamgrad/_C.abi3.so", "beamgrad/_libdbs.abi3.so", "beamgrad/_C_cuda.abi3.so"} <= names
    assert "CUDA_SKIPPED = None" in build_info, build_info  # the project's own record agrees
    assert "TORCH_VERSION = '2.14.1" in build_info, build_info


@pytest.mark.heavy
def test_deepspeed_built_exactly_the_ops_its_switches_named(extension_builds: Session) -> None:
    built = _built(extension_builds, "deepspeed-0.19.8")
    provenance: dict[str, Any] = built.provenance
    environment = provenance["environment"]
    assert environment["DS_ACCELERATOR"] == "cuda"
    assert (environment["DS_BUILD_FUSED_ADAM"], environment["DS_BUILD_FUSED_LAMB"]) == ("1", "1")
    with zipfile.ZipFile(built.wheel) as zf:
        libraries = {n for n in zf.namelist() if n.endswith(".so")}
        record = zf.read("deepspeed/git_version_info_installed.py").decode()
    assert libraries == CASES["deepspeed-0.19.8"][0], libraries  # no other op slipped in
    # DeepSpeed's own record of what was built (read at run time to skip the JIT build).
    installed = next(line for line in record.splitlines() if line.startswith("installed_ops="))
    built_ops = {op for op, flag in ast.literal_eval(installed.partition("=")[2]).items() if flag}
    assert built_ops == {"fused_adam", "fused_lamb"}, installed
    assert "accelerator_name='cuda'" in record, record
