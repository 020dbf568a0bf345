"""The plan's static look at real third-party sdists from the package index, fetched by
``build --plan`` itself ([source] project + version + sha256): causal-conv1d 1.7.0 and
mamba-ssm 2.3.2.post1 write their own -gencode lists into setup.py (sm_75 ... sm_121) and read
their own switches (``*_FORCE_BUILD``, ``*_SKIP_CUDA_BUILD``); the plan must say so before any
compile, naming the lines, and name the hard-coded targets the request did not ask for."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.support.cli import CliRun
from tests.support.paths import ROOT

pytestmark = pytest.mark.realwheel

SDISTS = {
    "causal-conv1d": ("1.7.0", "3202758494eaa7b597ce1c282dfa188889506bfcb92cad3c407d26736bfcd32b",
                      "CAUSAL_CONV1D"),
    "mamba-ssm": ("2.3.2.post1", "104cc47e9101e5401a675fa2b784f2952b9b037f3b1dd83b5ac544394e95d028",
                  "MAMBA"),
}  # fmt: skip


@pytest.mark.parametrize("project", sorted(SDISTS))
def test_the_plan_names_a_real_projects_hard_coded_archs_and_switches(
    project: str, cli_run: CliRun, tmp_path: Path
) -> None:
    version, sha256, prefix = SDISTS[project]
    recipe = tmp_path / f"{project}.toml"
    recipe.write_text(
        "schema_version = 1\n"
        f'[source]\nproject = "{project}"\nversion = "{version}"\nsha256 = "{sha256}"\n'
        '[toolchain]\ncuda = "13.0"\nbase_image = "archwheel/debian:bookworm"\nsource = "pypi"\n'
        '[arch]\nvariable = "TORCH_CUDA_ARCH_LIST"\ndefault = "8.0;9.0"\n'
        '[build]\ncommand = "true"\n'
    )
    code, out, err = cli_run("build", "--recipe", str(recipe), "--plan", "--format", "json")
    assert code == 0, err
    document = json.loads(out)
    found = document["source_check"]
    coded = [line for line in found if " hard-codes " in line]
    assert len(coded) == 1 and coded[0].startswith("setup.py:"), found
    assert "hard-codes sm_75 sm_80 sm_87 sm_90 sm_100 sm_120" in coded[0]
    assert any(line.startswith("hard-coded targets not requested: sm_75 sm_87 sm_100 sm_103 "
                               "sm_110 sm_120 sm_121") for line in found), found  # fmt: skip
    assert "project switches" in " ".join(err.split())  # the text plan shows them too
    switches = document["plan"]["project switches"]
    assert f"{prefix}_FORCE_BUILD (setup.py:" in switches
    assert f"{prefix}_SKIP_CUDA_BUILD (setup.py:" in switches
    # get_package_version() returns f"{public_version}+{local_version}" of this one
    assert re.search(
        rf"{prefix}_LOCAL_VERSION \(setup.py:\d+\) changes the version string", switches
    )
    # its CachedWheelsCommand replaces bdist_wheel (it fetches a prebuilt wheel when it can)
    assert "the project brings its own bdist_wheel (setup.py (line " in document["plan"]["python"]


PATCH = ROOT / "recipes" / "patches" / "causal-conv1d-1.7.0-arch-list.diff"
PATCH_SHA256 = "20d97714ac0a05fe3fb998d2a225a81fcdace2a60daf3502a2f9b43cfd4cc018"


def test_a_recipe_patch_steers_a_project_that_hard_codes_its_archs(
    cli_run: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """causal-conv1d 1.7.0 with ``[[source.patches]]``: its fixed -gencode list replaced by one
    read from TORCH_CUDA_ARCH_LIST. The plan's source check no longer finds a hard-coded list,
    and the source row names the patch. A cache folder of its own: the patched copy is made
    here (a build of the shipped causal-conv1d recipe earlier in the run made one in the
    shared cache, which a second plan reuses without running git apply)."""
    monkeypatch.setenv("ARCHWHEEL_CACHE", str(tmp_path / "cache"))
    version, sha256, _ = SDISTS["causal-conv1d"]
    shutil.copy(PATCH, tmp_path / PATCH.name)
    recipe = tmp_path / "causal-conv1d.toml"
    recipe.write_text(
        "schema_version = 1\n"
        f'[source]\nproject = "causal-conv1d"\nversion = "{version}"\nsha256 = "{sha256}"\n'
        f'[[source.patches]]\npath = "{PATCH.name}"\nsha256 = "{PATCH_SHA256}"\n'
        '[toolchain]\ncuda = "13.0"\nbase_image = "archwheel/debian:bookworm"\nsource = "pypi"\n'
        '[arch]\nvariable = "TORCH_CUDA_ARCH_LIST"\ndefault = "8.0;9.0"\n'
        '[build]\ncommand = "true"\n'
    )
    code, out, err = cli_run("build", "--recipe", str(recipe), "--plan", "--format", "json")
    assert code == 0, err
    document = json.loads(out)
    assert not [line for line in document["source_check"] if "hard-code" in line]
    assert f"patched with {PATCH.name} (sha256 {PATCH_SHA256[:12]})" in document["plan"]["source"]
    # the sdist in the cache is untouched: the build mounts a patched copy
    assert "git apply" in err


DEEPSPEED = ("0.19.8", "9e491abd0827ea5c389dd702e15e11e13d83d904bac4a20d6c2a4cb37207a9af")


def test_the_plan_reads_deepspeeds_op_switches_and_names_the_cu_files_left_out(
    cli_run: CliRun, tmp_path: Path
) -> None:
    """DeepSpeed 0.19.8 selects its CUDA ops one switch each (each op builder's BUILD_VAR, with
    DS_BUILD_OPS as the default): with DS_BUILD_OPS=0 and two ops on, the plan names the
    switches and the .cu files of the 17 other builders it leaves out, before any compile."""
    version, sha256 = DEEPSPEED
    recipe = tmp_path / "deepspeed.toml"
    recipe.write_text(
        "schema_version = 1\n"
        f'[source]\nproject = "deepspeed"\nversion = "{version}"\nsha256 = "{sha256}"\n'
        '[toolchain]\ncuda = "13.0"\nbase_image = "archwheel/debian:bookworm"\nsource = "pypi"\n'
        '[arch]\nvariable = "TORCH_CUDA_ARCH_LIST"\ndefault = "9.0"\n'
        '[build]\ncommand = "true"\n'
        '[build.env]\nDS_ACCELERATOR = "cuda"\nDS_BUILD_OPS = "0"\n'
        'DS_BUILD_FUSED_ADAM = "1"\nDS_BUILD_FUSED_LAMB = "1"\n'
    )
    code, out, err = cli_run("build", "--recipe", str(recipe), "--plan", "--format", "json")
    assert code == 0, err
    plan = json.loads(out)["plan"]
    row = plan["module selection"]
    assert row.startswith(
        "DS_BUILD_OPS and each module's own switch (BUILD_VAR of 19 builder classes); the recipe "
        "sets DS_BUILD_OPS=0, DS_BUILD_FUSED_ADAM=1, DS_BUILD_FUSED_LAMB=1 select the modules"
    ), row
    assert "): fused_adam, fused_lamb; not built, on purpose:" in row
    assert "(41 CUDA sources; the gate lets them go" in row
    left = json.loads(row[row.index("unbuilt_cuda = ") + 15 : row.rindex("]") + 1])
    assert "csrc/transformer/softmax_kernels.cu" in left
    assert "csrc/lion/multi_tensor_lion.cu" in left
    assert (  # a builder's "inference/v2/..." source is the sdist's deepspeed/inference/v2/...
        "deepspeed/inference/v2/kernels/ragged_ops/embed/embed_cuda.cu" in left
    )
    assert not {"csrc/adam/multi_tensor_adam.cu", "csrc/lamb/fused_lamb_cuda_kernel.cu"} & set(left)
    assert "(the 41 DS_BUILD_OPS leaves out let go)" in plan["gate"]
    assert "set by the recipe: DS_BUILD_OPS='0' (setup.py:129)" in plan["project switches"]
