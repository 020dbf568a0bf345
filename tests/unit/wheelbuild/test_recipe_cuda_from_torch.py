"""``[toolchain] cuda`` taken from the pinned torch, and the compiler launchers of a build.

A recipe that pins torch may leave out ``[toolchain] cuda``: a ``+cuXYZ`` pin says it at load
time, otherwise the torch wheel's ``torch/version.py`` does once the wheel is in the cache
(``with_torch_cuda``). Wheels here are small ones with the official metadata layout.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path

import pytest

from archwheel.effects.pipconfig import PipSettings
from archwheel.effects.settings import Settings
from archwheel.errors import ArchListError, RecipeError
from archwheel.facts import arch_consumers, arch_grammars
from archwheel.facts.catalog import load_facts
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild import BuildOutput, BuildRequest, build_wheel
from archwheel.wheelbuild.compile.jobs import GIB, HostResources, choose_jobs
from archwheel.wheelbuild.compile.remote_cache import COMPILER_NAMES
from archwheel.wheelbuild.images import toolkit
from archwheel.wheelbuild.images.toolkit import prepare_torch, with_torch_cuda
from archwheel.wheelbuild.planning.plan import (
    COMPILER_LAUNCHERS,
    BuildOptions,
    check_arch_list,
    make_plan,
)
from archwheel.wheelbuild.planning.plan_parts import compiler_names_script
from archwheel.wheelbuild.recipes.recipe import load_recipe
from archwheel.wheelbuild.recipes.recipe_model import Recipe
from archwheel.wheelbuild.recipes.torch_pin import TORCH_WHEELS, TorchWheel, read_torch_wheel
from archwheel.wheelbuild.sources.source import ResolvedSource
from tests.support.paths import ROOT
from tests.support.torch_pin_support import fake_torch_wheel

FACTS = load_facts()

RECIPE = """\
schema_version = 1
[source]
path = "src"
[toolchain]
CUDA
base_image = "archwheel/debian:bookworm"
source = "pypi"
[arch]
format = "torch"
default = "DEFAULT"
[build]
requirements = [REQS]
command = "true"
ENV
"""


def write(
    tmp_path: Path, reqs: str, *, cuda: str = "", default: str = "9.0", env: str = ""
) -> Path:
    (tmp_path / "src").mkdir(parents=True, exist_ok=True)
    path = tmp_path / "r.toml"
    text = RECIPE.replace("REQS", reqs).replace("CUDA", f'cuda = "{cuda}"' if cuda else "")
    path.write_text(text.replace("DEFAULT", default).replace("ENV", env))
    return path


def cache_with(tmp_path: Path, **wheel: str | None) -> Path:
    cache = tmp_path / "cache"
    (cache / TORCH_WHEELS).mkdir(parents=True)
    fake_torch_wheel(cache / TORCH_WHEELS, **wheel)  # type: ignore[arg-type]
    return cache


def resolve(recipe: Recipe, cache: Path) -> Recipe:
    return with_torch_cuda(recipe, "3.11", PipSettings(), cache, facts=load_facts())[0]


def test_a_cu_label_gives_the_cuda_at_load(tmp_path: Path) -> None:
    r = load_recipe(write(tmp_path, '"torch==2.14.1+cu130"'), facts=FACTS)
    assert r.toolchain.cuda == CudaVersion(13, 0)
    assert r.toolchain.cuda_from == "torch-label"
    written = load_recipe(write(tmp_path / "w", '"torch==2.14.1+cu130"', cuda="13.0"), facts=FACTS)
    assert r.toolchain.pypi_packages == written.toolchain.pypi_packages
    assert r.toolchain.pypi_packages  # the nvcc wheels of CUDA 13.0


def test_without_a_label_the_cuda_is_read_from_the_torch_wheel(tmp_path: Path) -> None:
    r = load_recipe(write(tmp_path, '"torch==2.14.1"'), facts=FACTS)
    assert r.toolchain.cuda is None and r.toolchain.cuda_from == "torch"
    with pytest.raises(RecipeError, match=r"cuda is not set"):
        check_arch_list(r, "9.0", facts=FACTS)
    resolved = resolve(r, cache_with(tmp_path, cuda="13.0"))
    assert resolved.cuda == CudaVersion(13, 0)
    assert resolved.toolchain.cuda_from == "torch-wheel"
    written = load_recipe(write(tmp_path / "w", '"torch==2.14.1"', cuda="13.0"), facts=FACTS)
    assert resolved.toolchain.pypi_packages == written.toolchain.pypi_packages
    assert str(check_arch_list(resolved, "9.0", facts=FACTS).arch_list) == "9.0"
    build = prepare_torch(resolved, "3.11", PipSettings(), tmp_path / "cache")
    assert build is not None and build.local_version == "pt2.14.1cu130"


def test_the_torch_table_pin_also_gives_the_cuda(tmp_path: Path) -> None:
    path = write(tmp_path, "")
    path.write_text(path.read_text() + '[torch]\nversion = "2.14.1"\n')
    resolved = resolve(load_recipe(path, facts=FACTS), cache_with(tmp_path))
    assert resolved.cuda == CudaVersion(13, 0)


def test_the_arch_default_is_checked_against_the_derived_cuda(tmp_path: Path) -> None:
    # 3.5 is not buildable with CUDA 13.0: unknown at load, refused once the wheel says 13.0.
    r = load_recipe(write(tmp_path, '"torch==2.14.1"', default="3.5"), facts=FACTS)
    with pytest.raises(RecipeError, match=r"\[arch\] default"):
        resolve(r, cache_with(tmp_path))


def test_a_cpu_torch_cannot_give_a_cuda(tmp_path: Path) -> None:
    r = load_recipe(write(tmp_path, '"torch==2.14.1"'), facts=FACTS)
    with pytest.raises(RecipeError) as info:
        resolve(r, cache_with(tmp_path, cuda=None))
    text = info.value.one_line()
    assert "torch-2.14.1-cp311" in text and "no CUDA" in text and "[toolchain] cuda" in text


def test_a_written_cuda_still_wins_and_a_contradiction_is_refused(tmp_path: Path) -> None:
    r = load_recipe(write(tmp_path, '"torch==2.14.1"', cuda="13.0"), facts=FACTS)
    assert r.toolchain.cuda_from == "recipe"
    assert resolve(r, tmp_path / "empty-cache") is r  # nothing fetched, nothing changed
    with pytest.raises(RecipeError, match=r"cuda is 13\.1, but torch==2\.14\.1\+cu130"):
        load_recipe(write(tmp_path / "c", '"torch==2.14.1+cu130"', cuda="13.1"), facts=FACTS)


def test_without_a_torch_pin_cuda_stays_required(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match=r"\[toolchain\] cuda"):
        load_recipe(write(tmp_path, '"numpy"'), facts=FACTS)


def test_the_shipped_cmake_recipe_takes_its_cuda_from_torch(tmp_path: Path) -> None:
    r = load_recipe(ROOT / "recipes" / "torchopt-0.7.3.toml", facts=FACTS)
    assert r.toolchain.cuda is None
    assert r.source.project == "torchopt" and r.source.sha256
    assert r.torch.pin is not None and r.torch.pin.requirement == "torch==2.14.1"
    assert resolve(r, cache_with(tmp_path)).cuda == CudaVersion(13, 0)


# -- compiler launchers ---------------------------------------------------------------------------


def plan_env(recipe: Recipe, tmp_path: Path, **options: object) -> dict[str, str]:
    source = ResolvedSource(recipe.source, tmp_path, None, False, "d" * 64, ("a",), 1, "test")
    plan = make_plan(
        recipe,
        check_arch_list(recipe, "9.0", facts=FACTS),
        replace(BuildOptions(out=tmp_path / "out"), **options),  # type: ignore[arg-type]
        source,
        jobs=choose_jobs(HostResources(cpus=2, memory_bytes=8 * GIB), 2.0),
        pip=PipSettings(),
        user=(1000, 1000),
    )
    return dict(plan.build_env)


def test_cmake_builds_compile_through_sccache(tmp_path: Path) -> None:
    r = load_recipe(write(tmp_path, '"numpy"', cuda="13.0"), facts=FACTS)
    env = plan_env(r, tmp_path)
    assert {v: env[v] for v in COMPILER_LAUNCHERS} == dict.fromkeys(COMPILER_LAUNCHERS, "sccache")
    assert set(COMPILER_LAUNCHERS) == {
        "CMAKE_C_COMPILER_LAUNCHER",
        "CMAKE_CXX_COMPILER_LAUNCHER",
        "CMAKE_CUDA_COMPILER_LAUNCHER",
    }


def test_a_recipe_launcher_wins_and_no_cache_sets_none(tmp_path: Path) -> None:
    env_table = '[build.env]\nCMAKE_CXX_COMPILER_LAUNCHER = "ccache"\n'
    r = load_recipe(write(tmp_path, '"numpy"', cuda="13.0", env=env_table), facts=FACTS)
    assert plan_env(r, tmp_path)["CMAKE_CXX_COMPILER_LAUNCHER"] == "ccache"
    assert plan_env(r, tmp_path)["CMAKE_CUDA_COMPILER_LAUNCHER"] == "sccache"
    # without the cache sccache still runs the compilers, caching nothing (the same objects)
    uncached = plan_env(load_recipe(write(tmp_path / "n", '"numpy"', cuda="13.0"), facts=FACTS), tmp_path,
                        ccache_volume=None)  # fmt: skip
    assert uncached["CMAKE_CUDA_COMPILER_LAUNCHER"] == "sccache"
    assert uncached["SCCACHE_NO_CACHE"] == "1"


# -- the arch list's reader in the CMake recipe ---------------------------------------------------


def test_the_cmake_recipe_refuses_what_cmakes_own_findcuda_rejects(tmp_path: Path) -> None:
    r = resolve(
        load_recipe(ROOT / "recipes" / "torchopt-0.7.3.toml", facts=FACTS), cache_with(tmp_path)
    )
    assert r.arch.consumer == "cmake-findcuda"
    assert check_arch_list(r, "8.0;9.0+PTX", facts=FACTS).value == "8.0;9.0+PTX"
    for text, nearest in (("9.0;10.0", "9.0"), ("9.0a", "9.0"), ("12.0f", None)):
        with pytest.raises(ArchListError) as info:
            check_arch_list(r, text, facts=FACTS)
        message = info.value.one_line()
        assert "cmake-findcuda" in message and "Unknown CUDA Architecture Name" in message
        if nearest:
            assert f"nearest list it accepts: {nearest}" in message


def test_cmakes_findcuda_reads_numbers_and_names_its_own_way() -> None:
    nine = arch_grammars.read(arch_consumers.CMAKE_FINDCUDA, "9.0")
    assert nine.ok and nine.flags == ("-gencode", "arch=compute_90,code=sm_90")
    # PyTorch's copy: Ampere is 8.0 and 8.6, Hopper is 9.0; CMake's: Ampere 8.0, no Hopper.
    assert arch_grammars.read(arch_consumers.CMAKE_FINDCUDA, "Ampere").images == ("sm_80",)
    assert arch_grammars.read(arch_consumers.TORCH_CMAKE, "Ampere").images == ("sm_80", "sm_86")
    assert not arch_grammars.read(arch_consumers.CMAKE_FINDCUDA, "Hopper").ok
    assert arch_grammars.read(arch_consumers.TORCH_CMAKE, "10.0").ok
    assert not arch_grammars.read(arch_consumers.CMAKE_FINDCUDA, "10.0").ok


def plan_steps(recipe: Recipe, tmp_path: Path, **options: object) -> dict[str, str]:
    source = ResolvedSource(recipe.source, tmp_path, None, False, "d" * 64, ("a",), 1, "test")
    plan = make_plan(
        recipe,
        check_arch_list(recipe, "9.0", facts=FACTS),
        replace(BuildOptions(out=tmp_path / "out"), **options),  # type: ignore[arg-type]
        source,
        jobs=choose_jobs(HostResources(cpus=2, memory_bytes=8 * GIB), 2.0),
        pip=PipSettings(),
        user=(1000, 1000),
    )
    return {s.name: s.command[-1] for p in plan.phases for s in p.steps}


def test_pythons_own_compiler_names_run_sccache_in_cached_builds(tmp_path: Path) -> None:
    # setuptools (and cpp_extension without ninja) compiles C++ with sysconfig's CXX,
    # x86_64-linux-gnu-g++ on Debian: a name in COMPILER_NAMES, ahead of /usr/bin on PATH.
    r = load_recipe(write(tmp_path, '"numpy"', cuda="13.0"), facts=FACTS)
    path = plan_env(r, tmp_path)["PATH"].split(":")
    assert path.index(COMPILER_NAMES) < path.index("/usr/bin")
    copy = plan_steps(r, tmp_path)["copy-source"]
    assert compiler_names_script() in copy and "get_config_var" in copy
    for options in ({"ccache_volume": None}, {"check_reproducible": True}):
        assert COMPILER_NAMES in plan_env(r, tmp_path, **options)["PATH"]  # caching nothing


def test_the_recipe_file_is_read_once(tmp_path: Path) -> None:
    """The CUDA read from the wheel validates the document read at load again: the file is
    not read a second time (it may have changed or gone since), and its sha256 is kept."""
    path = write(tmp_path, '"torch==2.14.1"')
    r = load_recipe(path, facts=FACTS)
    path.write_text("not a recipe any more")
    resolved, wheel = with_torch_cuda(
        r, "3.11", PipSettings(), cache_with(tmp_path), facts=load_facts()
    )
    assert resolved.cuda == CudaVersion(13, 0) and resolved.sha256 == r.sha256
    assert wheel is not None and wheel.cuda == CudaVersion(13, 0)


class _Echo:
    """A build reporter that keeps the host-side lines (the plan is not run)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    @property
    def echo(self) -> Callable[[str], None]:
        return self.lines.append

    def planned(self, plan: object, repair: object) -> None:
        return None

    def running(self, log: object) -> AbstractContextManager[BuildOutput]:
        raise AssertionError("a plan runs nothing")


@pytest.mark.parametrize(("python", "base"), [("3.11", "bookworm"), ("3.13", "trixie")])
def test_a_plan_fetches_and_reads_the_pinned_torch_wheel_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, python: str, base: str
) -> None:
    path = write(tmp_path, '"torch==2.14.1"')
    path.write_text(path.read_text() + '[python]\nversions = ["3.11", "3.13"]\n')
    (tmp_path / "src" / "setup.py").write_text("")
    cache = tmp_path / "cache"
    (cache / TORCH_WHEELS).mkdir(parents=True)
    fake_torch_wheel(cache / TORCH_WHEELS, python="cp" + python.replace(".", ""))
    reads: list[Path] = []
    real = read_torch_wheel

    def counted(wheel: Path) -> TorchWheel:
        reads.append(wheel)
        return real(wheel)

    monkeypatch.setattr(toolkit, "read_torch_wheel", counted)
    reporter = _Echo()
    request = BuildRequest(
        recipe=str(path), python=python, plan_only=True, settings=Settings(cache=cache)
    )
    plan = build_wheel(request, reporter).plan
    assert len(reads) == 1
    assert sum("torch wheel from the cache" in line for line in reporter.lines) == 1
    assert plan.torch is not None and plan.torch.cuda == CudaVersion(13, 0)
    # the base image chosen for the Python survives the CUDA taken from the wheel
    assert plan.base_image == f"archwheel/debian:{base}" == plan.recipe.toolchain.base_image
