"""``--compare-official`` (build/official.py) on the shipped recipes and on changed copies."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from archwheel.facts.catalog import load_facts
from archwheel.facts.pytorch_official import load_official
from archwheel.wheelbuild.recipes.recipe import load_recipe, parse_recipe
from archwheel.wheelbuild.wheel.official import compare_official
from tests.support.cli import CliRun
from tests.support.paths import ROOT

FACTS = load_facts()

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

RECIPES = ROOT / "recipes"


def recipe_data(name: str) -> dict[str, Any]:
    data: dict[str, Any] = tomllib.loads((RECIPES / f"{name}.toml").read_text())
    return data


@pytest.mark.parametrize(
    "name", ["pytorch-2.14.1-cu130", "pytorch-2.14.1-cu128", "pytorch-2.15.0-cu132"]
)
def test_shipped_recipes_differ_only_deliberately(name: str) -> None:
    comparison = compare_official(load_recipe(RECIPES / f"{name}.toml", facts=FACTS))
    assert comparison.variant is not None
    assert comparison.unexplained == ()
    variant = load_official().variant(comparison.release, comparison.cuda)
    assert variant is not None
    statuses = {r.variable: r.status for r in comparison.rows}
    # every official setting is in the recipe with the official value (the arch list: see
    # test_a_requested_arch_list_is_deliberate_the_default_is_not)
    settings = set(variant.env) - {"TORCH_CUDA_ARCH_LIST"}
    assert {v: statuses[v] for v in settings} == dict.fromkeys(settings, "same")


def test_the_official_and_the_unofficial_variant() -> None:
    cu130 = compare_official(load_recipe(RECIPES / "pytorch-2.14.1-cu130.toml", facts=FACTS))
    cu128 = compare_official(load_recipe(RECIPES / "pytorch-2.14.1-cu128.toml", facts=FACTS))
    assert cu130.in_official_matrix and "(official)" in cu130.headline()
    assert not cu128.in_official_matrix and "NOT an official variant" in cu128.headline()


def test_a_wrong_setting_is_an_unexplained_difference(tmp_path: Path) -> None:
    data = recipe_data("pytorch-2.14.1-cu130")
    data["build"]["env"]["USE_STATIC_CUDNN"] = "1"
    del data["build"]["env"]["USE_CUFILE"]
    data["build"]["env"]["MY_FLAG"] = "x"
    del data["repair"]
    comparison = compare_official(parse_recipe(data, origin=tmp_path / "r.toml", facts=FACTS))
    rows = {r.variable: r for r in comparison.unexplained}
    assert set(rows) == {
        "USE_STATIC_CUDNN",
        "USE_CUFILE",
        "MY_FLAG",
        "PYTORCH_EXTRA_INSTALL_REQUIREMENTS",
        "[repair] rpath_folders",
        "[repair] bundle",
        "[repair] platform",
    }
    assert (rows["USE_STATIC_CUDNN"].recipe, rows["USE_STATIC_CUDNN"].official) == ("1", "0")
    assert rows["USE_CUFILE"].status == "missing"
    assert rows["MY_FLAG"].status == "extra"
    assert rows["PYTORCH_EXTRA_INSTALL_REQUIREMENTS"].status == "missing"
    assert "USE_STATIC_CUDNN" in "\n".join(comparison.lines())


def test_a_requested_arch_list_is_deliberate_the_default_is_not(tmp_path: Path) -> None:
    recipe = load_recipe(RECIPES / "pytorch-2.14.1-cu130.toml", facts=FACTS)
    row = next(
        r
        for r in compare_official(recipe, "9.0;12.0+PTX").rows
        if r.variable == "TORCH_CUDA_ARCH_LIST"
    )
    assert row.status == "differs" and "--arch" in row.explanation
    default = next(r for r in compare_official(recipe).rows if r.variable == "TORCH_CUDA_ARCH_LIST")
    assert default.status == "differs" and "+PTX" in default.explanation  # kept on purpose
    data = recipe_data("pytorch-2.14.1-cu130")
    data["arch"]["default"] = "7.5;8.0;8.6;9.0;10.0;12.0"  # the release wheel's own list
    same = compare_official(parse_recipe(data, origin=tmp_path / "r.toml", facts=FACTS))
    assert next(r for r in same.rows if r.variable == "TORCH_CUDA_ARCH_LIST").status == "same"


def test_no_table_to_compare(tmp_path: Path) -> None:
    data = recipe_data("pytorch-2.14.1-cu130")
    data["recipe"]["version"] = "2.9.0"
    del data["repair"]
    comparison = compare_official(parse_recipe(data, origin=tmp_path / "r.toml", facts=FACTS))
    assert comparison.variant is None and comparison.rows == ()
    assert "no table for PyTorch 2.9.0 with CUDA 13.0" in comparison.headline()


def test_cli_compare_official(cli_run: CliRun) -> None:
    code, out, _err = cli_run("build", "--recipe", "pytorch-2.14.1-cu130", "--compare-official")
    assert code == 0
    assert "0 unexplained" in out and "USE_STATIC_CUDNN" in out
    code, out, _err = cli_run(
        "build", "--recipe", "pytorch-2.14.1-cu128", "--compare-official", "--format", "json"
    )
    assert code == 0 and '"in_official_matrix": false' in out
    code, out, _err = cli_run("build", "--recipe", "pytorch-2.15.0-cu132", "--compare-official")
    assert code == 0
    assert "against 2.15.0/cu132 (official)" in out and "0 unexplained" in out


def test_the_2_15_0_recipe_is_refused_until_its_pin_table_exists(cli_run: CliRun) -> None:
    code, _out, err = cli_run("build", "--recipe", "pytorch-2.15.0-cu130", "--plan")
    assert code == 2
    assert "no pin table for PyTorch 2.15.0 with CUDA 13.0" in " ".join(err.split())
    comparison = compare_official(load_recipe(RECIPES / "pytorch-2.15.0-cu130.toml", facts=FACTS))
    assert comparison.variant is None
    code, out, _err = cli_run("build", "--recipe", "pytorch-2.15.0-cu130", "--compare-official")
    assert code == 0 and "no table for PyTorch 2.15.0 with CUDA 13.0" in out


def test_bundled_ptxas_is_modelled_as_left_unset(tmp_path: Path) -> None:
    # build_cuda.sh (799d09f2) exports BUILD_BUNDLE_PTXAS=1 for 13.0, but the release wheel has
    # no torch/bin/ptxas: the table records it as unset by the official build, with that source.
    recipe = load_recipe(RECIPES / "pytorch-2.14.1-cu130.toml", facts=FACTS)
    row = next(r for r in compare_official(recipe).rows if r.variable == "BUILD_BUNDLE_PTXAS")
    assert (row.status, row.recipe, row.official) == ("same", None, None)
    assert "no ptxas" in row.source
    data = recipe_data("pytorch-2.14.1-cu130")
    data["build"]["env"]["BUILD_BUNDLE_PTXAS"] = "1"
    changed = compare_official(parse_recipe(data, origin=tmp_path / "r.toml", facts=FACTS))
    (bad,) = changed.unexplained
    assert (bad.variable, bad.status, bad.recipe) == ("BUILD_BUNDLE_PTXAS", "differs", "1")
    sources = load_official().sources
    assert sources["build_cuda_13"].commit.startswith("799d09f2")


def test_debians_2_6_0_with_cuda_13_is_compared_with_the_official_2_6_0_wheel() -> None:
    recipe = load_recipe(RECIPES / "pytorch-2.6.0-debian-cu130.toml", facts=FACTS)
    comparison = compare_official(recipe)
    assert comparison.variant == "2.6.0/cu124" and comparison.other_cuda == "12.4"
    assert not comparison.env_recorded
    headline = comparison.headline()
    assert "CUDA 12.4, not the recipe's 13.0" in headline and "not recorded" in headline
    rows = {r.variable: r for r in comparison.rows}
    # no environment recorded for 2.6.0: the requirements and the repair step only
    assert set(rows) == {
        "PYTORCH_EXTRA_INSTALL_REQUIREMENTS",
        "[repair] rpath_folders",
        "[repair] bundle",
        "[repair] platform",
    }
    # the CUDA 13.0 wheels against 12.4's: explained; what the recipe chose: the report's
    assert "other wheels" in rows["[repair] rpath_folders"].explanation
    assert "other wheels" in rows["PYTORCH_EXTRA_INSTALL_REQUIREMENTS"].explanation
    assert {r.variable for r in comparison.unexplained} == {"[repair] bundle", "[repair] platform"}
    assert rows["[repair] platform"].official == "manylinux1_x86_64"
