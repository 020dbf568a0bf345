"""``[arch] format = "cmake"``: how the list is handed to CMake (wheelbuild/recipes/cmake_arch.py), what
the plan reads in the project's CMake files (wheelbuild/sources/cmake_project.py), and the recipe
settings refused because CMake would never read them. Real CMake runs the same settings in
tests/integration/nvcc/test_cmake_arch_delivery.py."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

from archwheel.effects.pipconfig import PipSettings
from archwheel.errors import RecipeError
from archwheel.facts.arch_consumers import CMAKE, CPP_EXTENSION
from archwheel.facts.catalog import load_facts
from archwheel.wheelbuild.compile.jobs import GIB, HostResources, choose_jobs
from archwheel.wheelbuild.planning.plan import (
    BuildOptions,
    BuildPlan,
    check_arch_list,
    make_plan,
)
from archwheel.wheelbuild.planning.plan_variants import serial_variant
from archwheel.wheelbuild.recipes.recipe import load_recipe
from archwheel.wheelbuild.recipes.recipe_model import Recipe
from archwheel.wheelbuild.sources.cmake_project import commands, read_cmake_files
from archwheel.wheelbuild.sources.source import ResolvedSource
from tests.support.cli import CliRun

FACTS = load_facts()
OURS = "80-real;90-real"

RECIPE = """\
schema_version = 1

[recipe]
name = "cm"
kind = "extension"
version = "1.0"

[source]
path = "src"

[toolchain]
cuda = "13.0"
base_image = "archwheel/debian:bookworm"
source = "pypi"

[arch]
{arch}

[build]
command = "python -m pip wheel --no-build-isolation -w $ARCHWHEEL_DIST ."
{build}
"""

FALLBACK = """\
cmake_minimum_required(VERSION 3.20)
# set(CMAKE_CUDA_ARCHITECTURES 50) in a comment is not read
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
  set(CMAKE_CUDA_ARCHITECTURES
      75 86 89)  # the project's own list, over two lines
endif()
project(demo LANGUAGES CXX CUDA)
"""


def plan_for(recipe: Recipe, arch: str = "8.0;9.0") -> BuildPlan:
    source = ResolvedSource(
        spec=recipe.source, root=Path("/checkout/src"), commit="c" * 40, dirty=False,
        content_sha256="d" * 64, files=("a.cu",), source_date_epoch=1, epoch_origin="test",
    )  # fmt: skip
    return make_plan(
        recipe,
        check_arch_list(recipe, arch, facts=FACTS),
        BuildOptions(out=Path("/out")),
        source,
        jobs=choose_jobs(HostResources(cpus=8, memory_bytes=6 * GIB), 2.0),
        pip=PipSettings(),
        user=(1234, 567),
    )


def write_recipe(tmp_path: Path, arch: str, build: str = "", cmakelists: str = "") -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    if cmakelists:
        (tmp_path / "src" / "CMakeLists.txt").write_text(cmakelists)
    path = tmp_path / "cm.toml"
    path.write_text(RECIPE.format(arch=textwrap.dedent(arch), build=textwrap.dedent(build)))
    return path


def lines(
    text: str, consumer: str = CMAKE, variable: str = "CMAKE_CUDA_ARCHITECTURES"
) -> list[tuple[str, str]]:
    return read_cmake_files([("CMakeLists.txt", text)], consumer, variable, OURS).rows


# -- the environment ---------------------------------------------------------------------------


def test_the_plan_hands_cmake_cudaarchs_and_a_define_after_the_recipes_own_args(
    tmp_path: Path,
) -> None:
    recipe = load_recipe(
        write_recipe(tmp_path, 'format = "cmake"\ndefault = "8.0;9.0"',
                     '[build.env]\nCMAKE_ARGS = "-DUSE_FOO=ON -G Ninja"'),
        facts=FACTS,
    )  # fmt: skip
    plan = plan_for(recipe)
    env = plan.phases[-1].steps[-1].env
    assert env["CUDAARCHS"] == OURS
    # appended, never replacing the project's own options; unquoted (one argument either way)
    assert env["CMAKE_ARGS"] == f"-DUSE_FOO=ON -G Ninja -DCMAKE_CUDA_ARCHITECTURES={OURS}"
    assert env["CMAKE_CUDA_ARCHITECTURES"] == OURS  # for scripts that forward it
    rows = dict(plan.summary_rows())
    assert rows["arch list"] == (
        f"8.0;9.0 -> -DCMAKE_CUDA_ARCHITECTURES={OURS} in CMAKE_ARGS and CUDAARCHS={OURS}"
    )
    said = dict(plan.environment_rows())["arch variable"]
    assert said.startswith(f"CMake receives -DCMAKE_CUDA_ARCHITECTURES={OURS}")
    assert "CMake reads no environment variable of that name" in said
    # the reproducibility check's serial build keeps them
    assert serial_variant(plan).build_env["CMAKE_ARGS"] == env["CMAKE_ARGS"]


def test_other_formats_set_their_variable_only(tmp_path: Path) -> None:
    recipe = load_recipe(write_recipe(tmp_path, 'format = "gencode"\ndefault = "8.0"'), FACTS)
    env = plan_for(recipe, "8.0").build_env
    assert "CUDAARCHS" not in env and "CMAKE_ARGS" not in env


@pytest.mark.parametrize(
    ("arch", "build", "message"),
    [
        ('format = "torch"\nvariable = "CMAKE_CUDA_ARCHITECTURES"\ndefault = "8.0"', "",
         "CMake never reads an environment variable CMAKE_CUDA_ARCHITECTURES"),
        ('consumer = "nvcc"\nvariable = "CUDAARCHS"\ndefault = "8.0"', "",
         'use format = "cmake"'),
        ('format = "cmake"\nvariable = "CMAKE_ARGS"\ndefault = "8.0"', "",
         "CMAKE_ARGS holds CMake options, not an arch list"),
        ('format = "cmake"\ndefault = "8.0"', '[build.env]\nCUDAARCHS = "75"',
         "env.CUDAARCHS: is set by archwheel from the arch list"),
        ('format = "cmake"\ndefault = "8.0"',
         '[build.env]\nCMAKE_ARGS = "-DX=1 -D CMAKE_CUDA_ARCHITECTURES:STRING=75"',
         "defines CMAKE_CUDA_ARCHITECTURES itself"),
    ],
)  # fmt: skip
def test_what_cmake_would_never_read_is_refused(
    tmp_path: Path, arch: str, build: str, message: str
) -> None:
    with pytest.raises(RecipeError) as caught:
        load_recipe(write_recipe(tmp_path, arch, build), FACTS)
    assert message in " ".join(caught.value.one_line().split())


def test_a_recipe_may_name_cudaarchs_or_its_own_variable(tmp_path: Path) -> None:
    recipe = load_recipe(
        write_recipe(tmp_path, 'format = "cmake"\nvariable = "CUDAARCHS"\ndefault = "8.0"'), FACTS
    )
    env = plan_for(recipe, "8.0").build_env
    assert env["CUDAARCHS"] == "80-real" and env["CMAKE_ARGS"].endswith("=80-real")


# -- the project's CMake files -----------------------------------------------------------------


def test_a_fallback_list_is_read_as_unused_when_archwheel_defines_the_list() -> None:
    rows = lines(FALLBACK)
    assert [label for label, _ in rows] == ["cmake", "cmake"]
    assert rows[0][1] == (
        "CMakeLists.txt:3 tests CMAKE_CUDA_ARCHITECTURES and ENV{CUDAARCHS}: archwheel defines "
        f"it (-DCMAKE_CUDA_ARCHITECTURES={OURS} in CMAKE_ARGS; CUDAARCHS={OURS})"
    )
    assert rows[1][1] == (
        "CMakeLists.txt:4 sets CMAKE_CUDA_ARCHITECTURES to 75;86;89 when it is not defined: "
        "archwheel defines it, so 75;86;89 is not used"
    )
    reading = read_cmake_files([("CMakeLists.txt", FALLBACK)], CMAKE, "X", OURS)
    assert reading.unused == {("CMakeLists.txt", 4)}


def test_the_else_branch_of_a_defined_test_is_a_fallback_too() -> None:
    text = (
        'if(DEFINED ENV{CUDAARCHS})\n  message("from the environment")\nelse()\n'
        '  set(CMAKE_CUDA_ARCHITECTURES "75;86")\nendif()\n'
        'if("${CMAKE_CUDA_ARCHITECTURES}" STREQUAL "")\n  set(CMAKE_CUDA_ARCHITECTURES 89)\n'
        "endif()\n"
    )
    said = [line for _, line in lines(text) if " sets " in line]
    assert said == [
        "CMakeLists.txt:4 sets CMAKE_CUDA_ARCHITECTURES to 75;86 when it is not defined: "
        "archwheel defines it, so 75;86 is not used",
        "CMakeLists.txt:7 sets CMAKE_CUDA_ARCHITECTURES to 89 when it is not defined: "
        "archwheel defines it, so 89 is not used",
    ]


def test_a_list_set_whatever_is_given_and_a_target_property_are_named() -> None:
    text = (
        "project(x CUDA)\nif(WIN32)\nendif()\nset(CMAKE_CUDA_ARCHITECTURES 75 86)\n"
        'set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "" FORCE)\n'
        'set(CMAKE_CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES};120")\n'
        'set_target_properties(k PROPERTIES CUDA_ARCHITECTURES "75;86" POSITION_INDEPENDENT_CODE ON)\n'
        "set_property(TARGET k2 PROPERTY CUDA_ARCHITECTURES ${CMAKE_CUDA_ARCHITECTURES})\n"
    )
    said = [line for _, line in lines(text)]
    assert said[0].endswith(
        f"to 75;86 whatever is given: it replaces archwheel's {OURS} (patch it: [[source.patches]])"
    )
    assert said[1].startswith("CMakeLists.txt:5 sets CMAKE_CUDA_ARCHITECTURES to 90 whatever")
    assert said[2] == (
        "CMakeLists.txt:6 sets CMAKE_CUDA_ARCHITECTURES to ${CMAKE_CUDA_ARCHITECTURES};120: "
        f"check that it keeps archwheel's {OURS}"
    )
    assert said[3].startswith("CMakeLists.txt:7 sets its targets' CUDA_ARCHITECTURES to 75;86")
    assert len(said) == 4  # a property from the variable is archwheel's list


def test_another_format_on_a_cmake_cuda_project_names_the_recipes_variable_as_the_cause() -> None:
    rows = lines(FALLBACK, CPP_EXTENSION, "TORCH_CUDA_ARCH_LIST")
    assert rows[0] == (
        "arch variable",
        "CMakeLists.txt:7 enables CMake's CUDA language, which takes its archs from "
        "CMAKE_CUDA_ARCHITECTURES (a -D option or CUDAARCHS), never from TORCH_CUDA_ARCH_LIST: "
        'CMake builds its fallback 75;86;89; set [arch] format = "cmake"',
    )
    assert "archwheel does not define it" in rows[2][1] and "get 75;86;89" in rows[2][1]
    # torch's CMake reads TORCH_CUDA_ARCH_LIST; a project that reads the variable itself too
    with_torch = FALLBACK + "find_package(Torch REQUIRED)\n"
    assert "arch variable" not in [
        k for k, _ in lines(with_torch, CPP_EXTENSION, "TORCH_CUDA_ARCH_LIST")
    ]
    reads = FALLBACK + 'set(CMAKE_CUDA_ARCHITECTURES "$ENV{MY_ARCHS}")\n'
    assert "arch variable" not in [k for k, _ in lines(reads, CPP_EXTENSION, "MY_ARCHS")]
    # a setup.py of cpp_extension compiles the CUDA: its CMake files are not the cause
    both = [("CMakeLists.txt", FALLBACK), ("setup.py", "CUDAExtension('x', ['x.cu'])\n")]
    rows = read_cmake_files(both, CPP_EXTENSION, "TORCH_CUDA_ARCH_LIST", OURS).rows
    assert rows and "arch variable" not in [k for k, _ in rows]
    # no CMake files, or CMake without CUDA: nothing to say
    assert lines("project(x CXX)\n", CPP_EXTENSION, "TORCH_CUDA_ARCH_LIST") == []
    assert read_cmake_files([("setup.py", "x")], CMAKE, "X", OURS).rows == []


def test_the_command_reader_keeps_strings_brackets_and_lines() -> None:
    text = 'message("a ) ( b") #[[ set(CMAKE_CUDA_ARCHITECTURES 1) ]]\n\nset(X [=[ ) ]=] "")\n'
    found = list(commands(text))
    assert [(c.name, c.line) for c in found] == [("message", 1), ("set", 3)]
    assert found[0].args == ("a ) ( b",) and found[1].args[-1] == '""'
    assert list(commands("if(\n")) == []  # an unclosed command: nothing, no error


def test_unclosed_brackets_and_strings_run_to_the_end_and_lines_stay_right() -> None:
    before = "project(x CUDA)\n\n\nset(CMAKE_CUDA_ARCHITECTURES 80)\n"
    for tail in ("#[[ never closed set(A 1)\n", '"never closed\nset(A 1)\n', "f([=[ x ]] \n"):
        found = list(commands(before + tail + "set(B 2)\n"))
        assert [(c.name, c.line) for c in found] == [("project", 1), ("set", 4)], tail


def test_a_set_inside_a_plain_if_inside_a_test_is_still_a_fallback() -> None:
    text = (
        "if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)\n  if(WIN32)\n  elseif(UNIX)\n"
        "    set(CMAKE_CUDA_ARCHITECTURES 75)\n  endif()\nelse()\n  if(APPLE)\n"
        "    set(CMAKE_CUDA_ARCHITECTURES 86)\n  endif()\nendif()\n"
    )
    said = [line for _, line in lines(text) if " sets " in line]
    assert "to 75 when it is not defined" in said[0]
    assert "to 86 whatever is given" in said[1]  # the else branch of a NOT DEFINED test


def _read_seconds(text: str) -> float:
    start = time.perf_counter()
    read_cmake_files([("CMakeLists.txt", text)], CMAKE, "CMAKE_CUDA_ARCHITECTURES", OURS)
    return time.perf_counter() - start


HOSTILE = {
    "unclosed bracket comments": "#[[ x\n",
    "unclosed bracket arguments": "f([[ ",
    "words": "w\n",
    "nested ifs": "if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)\nset(CMAKE_CUDA_ARCHITECTURES 8)\n",
}


@pytest.mark.parametrize("unit", HOSTILE.values(), ids=HOSTILE.keys())
def test_the_reader_is_linear_in_its_input(unit: str) -> None:
    """The full figures are ``nox -s bench -- cmake-hostile``; the quadratic reader took 8 s
    and more for 64 KiB of each of these."""
    small = min(_read_seconds(unit * (16384 // len(unit))) for _ in range(3))
    large = min(_read_seconds(unit * (65536 // len(unit))) for _ in range(3))
    assert large < 1.0, large
    assert large / max(small, 0.005) < 8, (small, large)  # 4x the input: about 4x the time


def test_the_plan_reads_the_projects_cmake_files(tmp_path: Path, cli_run: CliRun) -> None:
    path = write_recipe(tmp_path, 'format = "cmake"\ndefault = "8.0;9.0"', "", FALLBACK)
    code, out, err = cli_run("build", "--recipe", str(path), "--plan", "--format", "json",
                             "--no-host-pip-config")  # fmt: skip
    assert code == 0, err
    document = json.loads(out)
    said = [item["line"] for item in document["cmake"]]
    assert any("75;86;89 is not used" in line for line in said)
    # the fallback is no "hard-coded" finding when archwheel's list replaces it
    assert not any("75" in line for line in document["source_check"])
    assert document["environment"]["CUDAARCHS"] == OURS
    # the text plan, on standard output
    code, out, _ = cli_run("build", "--recipe", str(path), "--plan", "--no-host-pip-config")
    text = " ".join(out.split())
    assert code == 0 and "arch variable │ CMake receives" in text
