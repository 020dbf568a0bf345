"""A recipe's ``[build.env]`` against what archwheel sets in the build container: every variable
archwheel sets is refused there or honoured, never replaced silently; nvcc's own ``--time``
(which would move the per-source gate's record) is refused when the recipe is read."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path
from types import MappingProxyType

import pytest

from archwheel.effects.pipconfig import PipSettings
from archwheel.errors import RecipeError
from archwheel.exit_codes import ExitCode
from archwheel.facts.catalog import load_facts
from archwheel.interfaces.cli import main
from archwheel.wheelbuild.compile.jobs import GIB, HostResources, choose_jobs
from archwheel.wheelbuild.compile.remote_cache import parse_cache_url
from archwheel.wheelbuild.planning.plan import (
    COMPILER_LAUNCHERS,
    BuildOptions,
    BuildPlan,
    check_arch_list,
    make_plan,
)
from archwheel.wheelbuild.recipes.recipe import load_recipe
from archwheel.wheelbuild.recipes.recipe_env import sets_nvcc_time
from archwheel.wheelbuild.recipes.recipe_model import RESERVED_ENV, Recipe
from archwheel.wheelbuild.sources.source import ResolvedSource
from tests.support.paths import ROOT

FACTS = load_facts()

RECIPE = """\
schema_version = 1

[recipe]
name = "demo"
kind = "extension"
version = "1.0"

[source]
path = "src"

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
command = "make wheel"

[build.env]
"""


def recipe_file(tmp_path: Path, env: str = "", command: str = "make wheel") -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    path = tmp_path / "demo.toml"
    text = RECIPE.replace('command = "make wheel"', f"command = {command!r}")
    path.write_text(textwrap.dedent(text) + env)
    return path


def plan_for(recipe: Recipe, **options: object) -> BuildPlan:
    opts = dataclasses.replace(BuildOptions(out=Path("/out")), **options)  # type: ignore[arg-type]
    source = ResolvedSource(
        spec=recipe.source,
        root=Path("/checkout/src"),
        commit="c" * 40,
        dirty=False,
        content_sha256="d" * 64,
        files=("a.cu",),
        source_date_epoch=1_700_000_000,
        epoch_origin="test",
    )
    return make_plan(
        recipe,
        check_arch_list(recipe, "8.0;9.0", facts=FACTS),
        opts,
        source,
        jobs=choose_jobs(HostResources(cpus=8, memory_bytes=16 * GIB), 2.0),
        pip=PipSettings(),
        user=(1234, 567),
    )


REMOTE: dict[str, object] = {"cache_url": parse_cache_url("redis://cache.example:6379")}
VARIANTS: dict[str, dict[str, object]] = {
    "cache": {},
    "remote-cache": REMOTE,
    "no-cache": {"ccache_volume": None},
    "reproducible": {"check_reproducible": True},
}


def _set_by_archwheel(recipe: Recipe, plan: BuildPlan) -> set[str]:
    """The compile step's variables that archwheel set, less those it honours a recipe's
    value for by design (the launchers, scikit-build-core's build folder, the parallel
    variables, NVCC_APPEND_FLAGS) and those
    refused on their own (the arch and jobs variables) or at plan time (the remote cache)."""
    honoured = {*COMPILER_LAUNCHERS, "NVCC_APPEND_FLAGS", "SKBUILD_BUILD_DIR"}
    honoured |= {name for name, _ in (plan.parallel.env if plan.parallel else ())}
    honoured |= {recipe.arch.variable, recipe.build.jobs_variable}
    return set(plan.build_env) - set(recipe.build.env) - honoured


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("name", ["example", "pytorch-2.14.1-cu130"])
def test_every_variable_archwheel_sets_is_refused_when_the_recipe_is_read(
    name: str, variant: str
) -> None:
    """RESERVED_ENV holds every variable the plan sets (TZ, LC_ALL and the compiler cache's
    settings were once set over a recipe's own value without a word)."""
    recipe = load_recipe(ROOT / "recipes" / f"{name}.toml", facts=FACTS)
    plan = plan_for(recipe, **VARIANTS[variant])
    assert _set_by_archwheel(recipe, plan) <= RESERVED_ENV, sorted(
        _set_by_archwheel(recipe, plan) - RESERVED_ENV
    )


@pytest.mark.parametrize(
    "variable",
    ["TZ", "LC_ALL", "SCCACHE_DIR", "SCCACHE_CACHE_SIZE", "SCCACHE_IDLE_TIMEOUT",
     "SCCACHE_SERVER_UDS", "SCCACHE_C_CUSTOM_CACHE_BUSTER", "PYTHONDONTWRITEBYTECODE", "PATH"],
)  # fmt: skip
def test_build_env_may_not_set_what_archwheel_sets(tmp_path: Path, variable: str) -> None:
    path = recipe_file(tmp_path, f'{variable} = "x"\n')
    with pytest.raises(RecipeError) as info:
        load_recipe(path, facts=FACTS)
    line = info.value.one_line()
    assert str(path) in line and f"[build] env.{variable}" in line and "set by archwheel" in line


@pytest.mark.parametrize("variable", ["TZ", "SCCACHE_IDLE_TIMEOUT", "HOME"])
def test_a_variable_the_plan_would_replace_is_refused_when_the_plan_is_made(
    tmp_path: Path, variable: str
) -> None:
    """The plan's own check, on the environment it made: a variable archwheel sets that the
    recipe check missed (here put past it) is refused, not replaced."""
    recipe = load_recipe(recipe_file(tmp_path), facts=FACTS)
    env = MappingProxyType({variable: "x"})
    sneaked = dataclasses.replace(recipe, build=dataclasses.replace(recipe.build, env=env))
    with pytest.raises(RecipeError, match=rf"\[build\] env\.{variable}: is set by archwheel"):
        plan_for(sneaked)


def test_what_archwheel_honours_keeps_the_recipe_s_value(tmp_path: Path) -> None:
    env = (
        'CMAKE_CUDA_COMPILER_LAUNCHER = "sccache"\n'
        'CMAKE_BUILD_PARALLEL_LEVEL = "2"\n'
        'NVCC_APPEND_FLAGS = "-lineinfo -DX=1"\n'
    )
    recipe = load_recipe(recipe_file(tmp_path, env), facts=FACTS)
    plan = plan_for(recipe)
    assert plan.build_env["CMAKE_CUDA_COMPILER_LAUNCHER"] == "sccache"
    assert plan.build_env["CMAKE_BUILD_PARALLEL_LEVEL"] == "2"
    flags = plan.build_env["NVCC_APPEND_FLAGS"].split()
    assert flags[:2] == ["-lineinfo", "-DX=1"] and "--time" in flags  # appended after


# -- nvcc's --time: the per-source gate's record ------------------------------------------------

OWN_TIME = [
    ("NVCC_APPEND_FLAGS", "--time /tmp/mine.csv"),
    ("NVCC_APPEND_FLAGS", "-lineinfo -time=/tmp/mine.csv"),
    ("NVCC_PREPEND_FLAGS", "--time=/tmp/mine.csv"),
    ("TORCH_NVCC_FLAGS", "-O3 --time /tmp/x"),
    ("CMAKE_CUDA_FLAGS", "-time x"),
]


@pytest.mark.parametrize(("variable", "value"), OWN_TIME)
def test_a_recipe_s_own_nvcc_time_is_refused_when_it_is_read(
    tmp_path: Path, variable: str, value: str
) -> None:
    """It moved nvcc's record, and the plan still promised the per-source gate."""
    path = recipe_file(tmp_path, f"{variable} = {value!r}\n")
    with pytest.raises(RecipeError) as info:
        load_recipe(path, facts=FACTS)
    line = info.value.one_line()
    assert f"[build] env.{variable}: gives nvcc its own --time" in line and "\n" not in line


def test_a_build_command_giving_nvcc_time_is_refused(tmp_path: Path) -> None:
    path = recipe_file(tmp_path, command="NVCC_APPEND_FLAGS='--time /tmp/x' make wheel")
    with pytest.raises(RecipeError, match=r"\[build\] command: gives nvcc its own --time"):
        load_recipe(path, facts=FACTS)


@pytest.mark.parametrize(
    "text",
    ["--timeout 5", "--time-limit=3", "/usr/bin/time -v make", "TIME=1", "-ftime-report",
     "--times", "runtime", ""],
)  # fmt: skip
def test_words_that_are_not_nvcc_time_pass(tmp_path: Path, text: str) -> None:
    assert not sets_nvcc_time(text)
    load_recipe(recipe_file(tmp_path, f"MY_FLAGS = {text!r}\n"), facts=FACTS)


def test_build_plan_refuses_an_own_time_with_the_recipe_error_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = recipe_file(tmp_path, 'NVCC_APPEND_FLAGS = "--time /tmp/mine.csv"\n')
    try:
        code = main(["build", "--recipe", str(path), "--plan"])
    except SystemExit as exc:  # pragma: no cover - argparse
        code = int(exc.code or 0)
    assert code == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "gives nvcc its own --time" in err
