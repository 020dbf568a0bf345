"""The builder image: its tag follows its inputs, and the toolkit probe refuses mismatches."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from archwheel.errors import RecipeError, ToolError
from archwheel.exit_codes import exit_code_for
from archwheel.facts.catalog import load_facts
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild.images.builder_image import (
    BuilderImageSpec,
    ImageToolkit,
    check_base_toolkit,
    check_toolchain,
    context_hash,
    parse_probe,
    parse_toolkit_probe,
)
from archwheel.wheelbuild.recipes.recipe import load_recipe
from tests.support.paths import ROOT

FACTS = load_facts()

DEBIAN_PYPI_PROBE = """\
nvcc=Cuda compilation tools, release 13.0, V13.0.88
cuda_home=/opt/archwheel/cuda-pypi/nvidia/cu13
gcc=g++ (Debian 12.2.0-14+deb12u1) 12.2.0
python=Python 3.11.2
pip=pip 23.0.1
sccache=sccache 0.16.0
glibc=ldd (Debian GLIBC 2.36-9+deb12u14) 2.36
os=Debian GNU/Linux 12 (bookworm)
toolchain_source=pypi
"""

MANYLINUX_IMAGE_PROBE = """\
nvcc=Cuda compilation tools, release 12.8, V12.8.93
cuda_home=/usr/local/cuda-12.8
gcc=g++ (GCC) 13.3.1 20240611 (Red Hat 13.3.1-2)
python=Python 3.12.11
pip=pip 25.1.1
sccache=none
glibc=ldd (GNU libc) 2.28
os=AlmaLinux 8.10 (Cerulean Leopard)
toolchain_source=image
"""


def test_probe_of_the_pypi_toolchain_on_debian() -> None:
    tc = parse_probe(DEBIAN_PYPI_PROBE)
    assert (tc.nvcc, tc.cuda) == ("13.0.88", CudaVersion(13, 0))
    assert (tc.gcc, tc.python, tc.pip, tc.sccache, tc.glibc) == (
        "12.2.0",
        "3.11.2",
        "23.0.1",
        "0.16.0",
        "2.36",
    )
    assert tc.source == "pypi"
    assert tc.to_json_dict()["cuda_home"] == "/opt/archwheel/cuda-pypi/nvidia/cu13"


def test_probe_of_a_toolkit_image_without_sccache() -> None:
    tc = parse_probe(MANYLINUX_IMAGE_PROBE)
    assert (tc.nvcc, tc.cuda, tc.gcc, tc.sccache, tc.glibc) == (
        "12.8.93",
        CudaVersion(12, 8),
        "13.3.1",
        "none",
        "2.28",
    )


def test_probe_without_nvcc_is_a_tool_error() -> None:
    with pytest.raises(ToolError, match="no working nvcc"):
        parse_probe("nvcc=\ngcc=g++ 12\n")


def test_toolkit_mismatch_is_refused_naming_recipe_and_image() -> None:
    tc = parse_probe(MANYLINUX_IMAGE_PROBE)
    recipe = Path("/r/pytorch-cu130.toml")
    with pytest.raises(RecipeError) as info:
        check_toolchain(tc, CudaVersion(13, 0), recipe, "pytorch/manylinux2_28-builder:cuda12.8")
    text = info.value.one_line()
    assert "[toolchain] cuda is 13.0" in text
    assert "carries CUDA 12.8 (nvcc 12.8.93) in /usr/local/cuda-12.8" in text
    assert str(recipe) in text
    check_toolchain(tc, CudaVersion(12, 8), recipe, "image")  # the matching version passes


def test_builder_tag_follows_every_input() -> None:
    recipe = load_recipe(ROOT / "recipes" / "example.toml", facts=FACTS)
    spec = BuilderImageSpec(
        base_image=recipe.toolchain.base_image,
        toolchain=recipe.toolchain,
        python="3.11",
        dockerfile_sha256=context_hash(ROOT / "docker"),
    )
    tag = spec.tag("sha256:aaa")
    assert tag.startswith("archwheel/builder:")
    assert spec.tag("sha256:aaa") == tag
    variants = {
        spec.tag("sha256:bbb"),
        replace(spec, python="3.12").tag("sha256:aaa"),
        replace(spec, dockerfile_sha256="0" * 64).tag("sha256:aaa"),
        replace(
            spec, toolchain=replace(recipe.toolchain, pypi_packages=("nvidia-cuda-nvcc==13.0.48",))
        ).tag("sha256:aaa"),
    }
    assert tag not in variants
    assert len(variants) == 4


def test_build_args_carry_the_toolchain() -> None:
    recipe = load_recipe(ROOT / "recipes" / "example.toml", facts=FACTS)
    args = BuilderImageSpec("archwheel/debian:bookworm", recipe.toolchain, "3.11", "x").build_args()
    assert args["ARCHWHEEL_TOOLCHAIN_SOURCE"] == "pypi"
    assert args["ARCHWHEEL_CUDA_VERSION"] == "13.0"
    assert args["ARCHWHEEL_PYTHON_VERSION"] == "3.11"
    assert args["ARCHWHEEL_PYPI_PREFIX"] == "nvidia/cu13"
    assert args["ARCHWHEEL_CUDART_SONAME"] == "libcudart.so.13"
    assert args["BASE_IMAGE"] == "archwheel/debian:bookworm"


def test_dockerfile_arguments_cannot_be_shadowed_by_the_base_images_env() -> None:
    """Base images set CUDA_VERSION / PYTHON_VERSION with ENV, which wins over a same-named ARG."""
    recipe = load_recipe(ROOT / "recipes" / "example.toml", facts=FACTS)
    args = BuilderImageSpec("nvidia/cuda:13.0.1-devel", recipe.toolchain, "3.11", "x").build_args()
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    after_from = dockerfile[dockerfile.index("\nFROM ") :]
    for name in args:
        if name == "BASE_IMAGE":  # used only by FROM, before the base image's ENV exists
            assert f"ARG {name}=" in dockerfile[: dockerfile.index("\nFROM ")]
            continue
        assert name.startswith("ARCHWHEEL_")
        assert f"ARG {name}=" in after_from
        assert "${" + name + "}" in after_from  # handed to provision.sh


def test_context_hash_needs_every_file(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    with pytest.raises(ToolError, match=r"provision\.sh is missing"):
        context_hash(tmp_path)


# -- the toolkit of a base image (docker/find-cuda.sh --probe) -----------------------------------


def test_toolkit_probe_of_a_base_image() -> None:
    found = parse_toolkit_probe(
        "cuda_home=/usr/local/cuda-12.8\nnvcc=Cuda compilation tools, release 12.8, V12.8.93\n"
    )
    assert found == ImageToolkit("/usr/local/cuda-12.8", "12.8.93", CudaVersion(12, 8))


def test_base_image_with_another_cuda_is_refused_naming_recipe_image_and_versions() -> None:
    found = parse_toolkit_probe(
        "cuda_home=/usr/local/cuda-13.0\nnvcc=Cuda compilation tools, release 13.0, V13.0.88\n"
    )
    recipe = Path("/r/example.toml")
    with pytest.raises(RecipeError) as info:
        check_base_toolkit(found, CudaVersion(12, 8), recipe, "nvidia/cuda:13.0.1-devel")
    assert exit_code_for(info.value) == 2
    assert info.value.one_line() == (
        "/r/example.toml: [toolchain] cuda is 12.8, but base image nvidia/cuda:13.0.1-devel "
        "carries CUDA 13.0 (nvcc 13.0.88) in /usr/local/cuda-13.0 "
        '(use a base image with CUDA 12.8, or set cuda = "13.0")'
    )
    check_base_toolkit(found, CudaVersion(13, 0), recipe, "nvidia/cuda:13.0.1-devel")


@pytest.mark.parametrize(
    ("cuda", "pypi_hint"), [(CudaVersion(13, 0), True), (CudaVersion(12, 8), False)]
)
def test_base_image_without_a_toolkit_is_refused(cuda: CudaVersion, pypi_hint: bool) -> None:
    found = parse_toolkit_probe("cuda_home=\nnvcc=\n")
    assert found == ImageToolkit("", "", None)
    with pytest.raises(RecipeError) as info:
        check_base_toolkit(found, cuda, Path("/r/x.toml"), "debian:12")
    text = info.value.one_line()
    assert 'source = "image", but base image debian:12 has no CUDA toolkit' in text
    assert f"/usr/local/cuda-{cuda}" in text
    assert ('or source = "pypi"' in text) is pypi_hint  # PyPI has no complete 12.x nvcc


def test_base_image_whose_nvcc_does_not_answer_is_a_tool_error() -> None:
    found = parse_toolkit_probe("cuda_home=/usr/local/cuda-13.0\nnvcc=\n")
    with pytest.raises(ToolError, match=r"has /usr/local/cuda-13.0/bin/nvcc, but"):
        check_base_toolkit(found, CudaVersion(13, 0), Path("/r/x.toml"), "arm64/cuda:13.0")
