"""``[arch] format = "cmake"`` against real CMake (the host's cmake, nvcc 13): what archwheel
sets (wheelbuild/recipes/cmake_arch.py) reaches ``CMAKE_CUDA_ARCHITECTURES`` by every route CMake
projects are built by, and the plan's reading of the project's CMake files
(wheelbuild/sources/cmake_project.py) says what real CMake then does.

Routes: a plain ``cmake`` (the environment only: ``CUDAARCHS``), scikit-build-core (its cmake
command line gets ``shlex.split(CMAKE_ARGS)``) and a setup.py that forwards
``CMAKE_ARGS.split(" ")``. The control is what archwheel did before: ``CMAKE_CUDA_ARCHITECTURES``
in the environment only, which CMake never reads.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from archwheel.facts.arch_consumers import CMAKE
from archwheel.wheelbuild.recipes.cmake_arch import arch_environment
from archwheel.wheelbuild.sources.cmake_project import read_cmake_files
from tests.support.components import require

pytestmark = [pytest.mark.nvcc]

OURS = "80-real;90-real"
HEAD = "cmake_minimum_required(VERSION 3.20)\n"
TAIL = """\
project(probe LANGUAGES CUDA)
add_library(k SHARED k.cu)
get_target_property(seen k CUDA_ARCHITECTURES)
message(STATUS "TARGET_ARCHS=${seen} FOO=${FOO}")
"""
FALLBACK = HEAD + """\
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
  set(CMAKE_CUDA_ARCHITECTURES 75 86 89)  # the project's own list
endif()
""" + TAIL  # fmt: skip
CACHED = HEAD + 'set(CMAKE_CUDA_ARCHITECTURES "75;86" CACHE STRING "archs")\n' + TAIL
FORCED = (
    HEAD
    + TAIL
    + "set(CMAKE_CUDA_ARCHITECTURES 75)\nadd_library(k2 SHARED k.cu)\n"
    + ('get_target_property(seen2 k2 CUDA_ARCHITECTURES)\nmessage(STATUS "K2_ARCHS=${seen2}")\n')
)
PLAIN = HEAD + TAIL


def configure(tmp_path: Path, nvcc: Path, cmakelists: str, route: str) -> str:
    """Configure a one-kernel CUDA project as ``route`` builds it with the environment
    archwheel's plan gives the compile; the target's CUDA_ARCHITECTURES as CMake saw it."""
    cmake = shutil.which("cmake")
    require(cmake is not None, "cmake not found")
    assert cmake is not None
    src = Path(tempfile.mkdtemp(prefix=f"{route}-", dir=tmp_path)) / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(cmakelists)
    (src / "k.cu").write_text("__global__ void k() {}\n")
    planned = arch_environment(CMAKE, "CMAKE_CUDA_ARCHITECTURES", OURS, {"CMAKE_ARGS": "-DFOO=1"})
    env = {k: v for k, v in os.environ.items() if k not in ("CUDAARCHS", "CMAKE_ARGS")}
    args: list[str] = []
    if route == "plain-cmake":
        env.update(planned)
    elif route == "scikit-build-core":
        env.update(planned)
        args = shlex.split(planned["CMAKE_ARGS"])
    elif route == "setup.py-split":
        env.update(planned)
        args = [a for a in planned["CMAKE_ARGS"].split(" ") if a]
    else:  # the control: the list in an environment variable CMake never reads
        env["CMAKE_CUDA_ARCHITECTURES"] = OURS
    proc = subprocess.run(
        [cmake, "-S", str(src), "-B", str(src.parent / "build"),
         f"-DCMAKE_CUDA_COMPILER={nvcc}", *args],
        env=env, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if "ARCHS=" in line]
    return " ".join(line.removeprefix("-- ") for line in lines)


def reading(cmakelists: str) -> list[str]:
    rows = read_cmake_files([("CMakeLists.txt", cmakelists)], CMAKE, "CMAKE_CUDA_ARCHITECTURES",
                            OURS).rows  # fmt: skip
    return [line for _, line in rows]


@pytest.mark.parametrize("route", ["plain-cmake", "scikit-build-core", "setup.py-split"])
def test_a_fallback_list_gives_way_to_the_requested_list(
    route: str, tmp_path: Path, nvcc: Path
) -> None:
    seen = configure(tmp_path, nvcc, FALLBACK, route)
    assert f"TARGET_ARCHS={OURS}" in seen
    # the recipe's own CMAKE_ARGS reach CMake too on the routes that read them
    assert ("FOO=1" in seen) == (route != "plain-cmake")
    assert any("is not used" in line for line in reading(FALLBACK))


def test_the_old_route_is_never_read_by_cmake(tmp_path: Path, nvcc: Path) -> None:
    """The control: archwheel's list only in an environment variable CMake does not read."""
    assert "TARGET_ARCHS=75;86;89" in configure(tmp_path, nvcc, FALLBACK, "environment-only")
    # without a fallback, the compiler's default: not the requested list either
    assert f"TARGET_ARCHS={OURS}" not in configure(tmp_path, nvcc, PLAIN, "environment-only")


def test_without_a_fallback_cudaarchs_alone_reaches_a_plain_cmake(
    tmp_path: Path, nvcc: Path
) -> None:
    assert f"TARGET_ARCHS={OURS}" in configure(tmp_path, nvcc, PLAIN, "plain-cmake")


def test_a_cache_entry_yields_to_the_define_but_not_to_cudaarchs(
    tmp_path: Path, nvcc: Path
) -> None:
    assert f"TARGET_ARCHS={OURS}" in configure(tmp_path, nvcc, CACHED, "scikit-build-core")
    assert "TARGET_ARCHS=75;86" in configure(tmp_path, nvcc, CACHED, "plain-cmake")
    (line,) = reading(CACHED)
    assert "CMAKE_ARGS wins; CUDAARCHS alone does not" in line


def test_a_plain_set_replaces_the_list_and_the_plan_says_so(tmp_path: Path, nvcc: Path) -> None:
    seen = configure(tmp_path, nvcc, FORCED, "scikit-build-core")
    assert f"TARGET_ARCHS={OURS}" in seen and "K2_ARCHS=75" in seen
    (line,) = reading(FORCED)
    assert line.startswith("CMakeLists.txt:6 sets CMAKE_CUDA_ARCHITECTURES to 75 whatever")
    assert f"replaces archwheel's {OURS}" in line
