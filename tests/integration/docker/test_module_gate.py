"""The gate per CUDA source on real container builds: variants of archwheel's
stable-ABI example (recipes/stable-ops.toml, built by setuptools + cpp_extension against torch
2.14.1) whose build compiles less, or more, than asked. Each fails with exit 5, names what the
build's own nvcc record shows, and places the wheel in rejected/ only.

The torch image and the compiler cache are the session's (tests/support/extension_builds.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.containers_support import containers_with_label
from tests.support.extension_builds import Session, ok, run_cli
from tests.support.paths import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.realwheel]

# A second module whose CUDA kernel is built only behind a switch of the project's, as
# projects do (FORCE_CUDA, <PROJECT>_FORCE_BUILD): without it, the module is CPU only.
SECOND_MODULE = """
import os

if os.environ.get("STABLE_OPS_EXTRA_CUDA") == "1":
    EXTRA = CUDAExtension(
        name="archwheel_stable_ops._extra",
        sources=["csrc/extra.cpp", "csrc/extra_cuda.cu"],
        py_limited_api=True,
        extra_compile_args={"cxx": ["-O2", *DEFINES], "nvcc": ["-O2", "-DUSE_CUDA", *DEFINES]},
    )
else:
    EXTRA = CppExtension(
        name="archwheel_stable_ops._extra",
        sources=["csrc/extra.cpp"],
        py_limited_api=True,
        extra_compile_args={"cxx": ["-O2", *DEFINES]},
    )
"""


def _variant(tmp_path: Path, *, command: str | None = None, second: bool = False) -> Path:
    """A copy of the stable-ABI example and its recipe."""
    source = tmp_path / "stable-ops"
    shutil.copytree(ROOT / "examples" / "stable-ops", source)
    if second:
        (source / "csrc" / "extra.cpp").write_text("int archwheel_extra_cpu() { return 1; }\n")
        (source / "csrc" / "extra_cuda.cu").write_text(
            "__global__ void archwheel_extra(float* x) { x[threadIdx.x] += 1.0f; }\n"
        )
        setup = (source / "setup.py").read_text()
        setup = setup.replace(
            "from torch.utils.cpp_extension import BuildExtension, CUDAExtension",
            "from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension",
        )
        setup = setup.replace("setup(\n", SECOND_MODULE + "\nsetup(\n")
        setup = setup.replace("        )\n    ],\n", "        ),\n        EXTRA,\n    ],\n")
        assert "EXTRA," in setup and "STABLE_OPS_EXTRA_CUDA" in setup
        (source / "setup.py").write_text(setup)
    text = (ROOT / "recipes" / "stable-ops.toml").read_text()
    text = text.replace('path = "../examples/stable-ops"', f'path = "{source}"')
    text = text.replace('name = "stable-ops"', 'name = "stable-ops-variant"')
    # no range check here: the gate is what these builds test
    text = text.replace('loads_with = ["2.12.1", "2.13.0", "2.14.0", "2.14.1"]\n', "")
    if command is not None:
        old = 'python -m pip wheel -v --no-deps --no-build-isolation --no-index --wheel-dir "$ARCHWHEEL_DIST" .'
        assert old in text
        text = text.replace(old, command)
    recipe = tmp_path / "stable-ops-variant.toml"
    recipe.write_text(text)
    return recipe


def _build(built: Session, recipe: Path, out: Path) -> tuple[int, str]:
    proc = run_cli(
        built.env, "build", "--recipe", str(recipe), "--arch", "9.0", "--out", str(out),
        "--ccache-volume", built.ccache_volume,
    )  # fmt: skip
    return proc.returncode, " ".join(proc.stderr.split())


def test_a_module_that_fell_back_to_cpu_fails_naming_its_source_and_the_switch(
    extension_builds: Session, tmp_path: Path
) -> None:
    ok(extension_builds, "libtorch-ops")  # the torch image exists
    out = tmp_path / "dist"
    code, err = _build(extension_builds, _variant(tmp_path, second=True), out)
    assert code == 5, err[-3000:]
    assert "1 CUDA sources of the project were never compiled by nvcc (csrc/extra_cuda.cu)" in err
    assert "fell back to CPU" in err
    # the module: the one the wheel holds without device code (the build linked it CPU-only)
    assert "the wheel's modules without device code: archwheel_stable_ops/_extra.abi3.so" in err
    assert "STABLE_OPS_EXTRA_CUDA (setup.py:" in err  # the switch, from the build files
    assert not list(out.glob("*.whl")) and len(list((out / "rejected").glob("*.whl"))) == 1
    assert containers_with_label(["docker"], extension_builds.label) == []


def test_the_projects_switch_set_builds_both_modules(
    extension_builds: Session, tmp_path: Path
) -> None:
    recipe = _variant(tmp_path, second=True)
    recipe.write_text(
        recipe.read_text().replace(
            "[repair]", '[build.env]\nSTABLE_OPS_EXTRA_CUDA = "1"\n\n[repair]'
        )
    )
    code, err = _build(extension_builds, recipe, tmp_path / "dist")
    assert code == 0, err[-3000:]
    assert "all 2 libraries with device code" in err


def test_a_build_that_compiles_archs_nobody_asked_for_ignored_the_arch_list(
    extension_builds: Session, tmp_path: Path
) -> None:
    command = (
        'TORCH_CUDA_ARCH_LIST="8.0;9.0" python -m pip wheel -v --no-deps --no-build-isolation '
        '--no-index --wheel-dir "$ARCHWHEEL_DIST" .'
    )
    out = tmp_path / "dist"
    code, err = _build(extension_builds, _variant(tmp_path, command=command), out)
    assert code == 5, err[-3000:]
    assert "archwheel_stable_ops/_C.abi3.so carries sm_80 beyond the request 9.0" in err
    assert "the build ignored the arch list" in err
    assert "nvcc compiled" in err and "ops_cuda.cu for them" in err
    assert len(list((out / "rejected").glob("*.whl"))) == 1


# Two modules, each built only when named in a switch of the project's whose name setup.py
# imports from another file of the project (the shape of the multi-kernel projects users build).
SELECTING_SETUP = """
import os
import sys

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stable_ops_build import OPS_ENV  # noqa: E402

TARGET = "0x020C000000000000"
DEFINES = [f"-DTORCH_TARGET_VERSION={TARGET}", "-DTORCH_STABLE_ONLY"]
FLAGS = {"cxx": ["-O2", *DEFINES], "nvcc": ["-O2", "-DUSE_CUDA", *DEFINES]}
ops = os.environ.get(OPS_ENV, "").split(",")
ext_modules = []
if "core" in ops:
    ext_modules.append(CUDAExtension("archwheel_stable_ops._C", ["csrc/ops.cpp", "csrc/ops_cuda.cu"], py_limited_api=True, extra_compile_args=FLAGS))
if "extra" in ops:
    ext_modules.append(CUDAExtension("archwheel_stable_ops._extra", ["csrc/extra.cpp", "csrc/extra_cuda.cu"], py_limited_api=True, extra_compile_args=FLAGS))
setup(ext_modules=ext_modules, cmdclass={"build_ext": BuildExtension})
"""


def test_modules_a_switch_leaves_out_are_said_before_and_let_go_after(
    extension_builds: Session, tmp_path: Path
) -> None:
    """The recipe selects one of the two modules: the plan names the switch (found through the
    file its name comes from), what it is set to and the CUDA source it leaves out, before any
    compile; the real build compiles only the selected one and passes the gate."""
    ok(extension_builds, "libtorch-ops")  # the torch image exists
    recipe = _variant(tmp_path, second=True)
    source = tmp_path / "stable-ops"
    (source / "setup.py").write_text(SELECTING_SETUP)
    (source / "stable_ops_build.py").write_text('OPS_ENV = "STABLE_OPS_MODULES"\n')
    recipe.write_text(
        recipe.read_text().replace(
            "[repair]", '[build.env]\nSTABLE_OPS_MODULES = "core"\n\n[repair]'
        )
    )
    proc = run_cli(extension_builds.env, "build", "--recipe", str(recipe), "--arch", "9.0",
                   "--plan", "--format", "json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)["plan"]
    assert "STABLE_OPS_MODULES='core'" in plan["project switches"]
    assert "stable_ops_build.py" in plan["project switches"]
    assert plan["module selection"].startswith("STABLE_OPS_MODULES (setup.py:")
    assert "csrc/extra_cuda.cu" in plan["module selection"]
    assert "csrc/ops_cuda.cu" not in plan["module selection"]
    code, err = _build(extension_builds, recipe, tmp_path / "dist")
    assert code == 0, err[-3000:]
    assert "all 1 libraries with device code" in err
