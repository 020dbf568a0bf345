"""Which base image a build's Python runs on, decided before any container (python_base.py)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from archwheel.errors import RecipeError
from archwheel.facts.catalog import load_facts
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild.images.host_compiler import with_host_compiler
from archwheel.wheelbuild.images.python_base import choose_base, with_base_for
from archwheel.wheelbuild.recipes.recipe import load_recipe
from archwheel.wheelbuild.recipes.recipe_model import Recipe
from tests.support.cli import CliRun
from tests.support.paths import ROOT

FACTS = load_facts()
PIN = "sha256:" + "ab" * 32


def example(tmp_path: Path, versions: str, *, base: str | None = None, pin: bool = False) -> Path:
    """A copy of the example recipe listing ``versions`` (TOML array text), on ``base``."""
    text = (ROOT / "recipes" / "example.toml").read_text()
    text = text.replace("../examples/", str(ROOT / "examples") + "/")
    text = re.sub(r"(?m)^versions = .*$", f"versions = {versions}", text)
    if base is not None:
        text = re.sub(r'(?m)^base_image = ".*"$', f'base_image = "{base}"', text)
    if pin:
        text = text.replace('source = "pypi"', f'source = "pypi"\nbase_image_id = "{PIN}"', 1)
    path = tmp_path / "example-pythons.toml"
    path.write_text(text)
    return path


def load(path: Path) -> Recipe:
    return load_recipe(path, facts=FACTS)


def test_the_example_recipe_serves_3_11_on_bookworm_and_3_13_on_trixie() -> None:
    recipe = load(ROOT / "recipes" / "example.toml")
    assert recipe.python_versions == ("3.11", "3.13")
    same, choice = with_base_for(recipe, "3.11")
    assert same is recipe
    assert choice.image == "archwheel/debian:bookworm"
    assert "python3.11" in choice.why
    moved, choice = with_base_for(recipe, "3.13")
    assert moved.toolchain.base_image == choice.image == "archwheel/debian:trixie"
    assert "Debian 13 trixie (python3.13, glibc 2.41)" in choice.why
    assert "archwheel/debian:bookworm has python3.11 only" in choice.why
    assert moved.toolchain.cuda == recipe.toolchain.cuda  # only the base changes


def test_a_recipe_on_trixie_builds_3_11_on_bookworm(tmp_path: Path) -> None:
    recipe = load(example(tmp_path, '["3.13", "3.11"]', base="archwheel/debian:trixie"))
    assert choose_base(recipe, "3.13").image == "archwheel/debian:trixie"
    assert choose_base(recipe, "3.11").image == "archwheel/debian:bookworm"


@pytest.mark.parametrize(
    ("python", "message"),
    [
        ("3.12", r"no base archwheel makes offers Python 3\.12 \(archwheel/debian offers "
                 r"3\.9 \(bullseye\), 3\.11 \(bookworm\), 3\.13 \(trixie\), 3\.14 \(sid\)\)"),
        ("3.14t", r"Python 3\.14t .*built with the GIL; .*/opt/python/cp314-cp314t"),
    ],
)  # fmt: skip
def test_a_python_no_base_offers_is_refused_naming_what_is(
    tmp_path: Path, python: str, message: str
) -> None:
    recipe = load(example(tmp_path, f'["3.11", "{python}"]'))
    with pytest.raises(RecipeError, match=message) as caught:
        choose_base(recipe, python)
    assert caught.value.hint is not None and "build for 3.11" in caught.value.hint


def test_a_pinned_base_builds_only_its_own_python(tmp_path: Path) -> None:
    recipe = load(example(tmp_path, '["3.11", "3.13"]', pin=True))
    assert choose_base(recipe, "3.11").image == "archwheel/debian:bookworm"
    with pytest.raises(RecipeError, match=r"base_image_id pins archwheel/debian:bookworm, whose "
                       r"Python is 3\.11; Python 3\.13 is on archwheel/debian:trixie"):  # fmt: skip
        choose_base(recipe, "3.13")


@pytest.mark.parametrize(
    ("base", "said"),
    [
        ("pytorch/manylinux2_28-builder:cuda13.0", "/opt/python/cp312-cp312"),
        ("nvidia/cuda:13.0.0-devel-ubuntu24.04", "from the image, or its package manager"),
        ("archwheel/debian:forky", "Debian forky is not in archwheel's table"),
    ],
)
def test_other_bases_are_taken_as_they_are(tmp_path: Path, base: str, said: str) -> None:
    recipe = load(example(tmp_path, '["3.12"]', base=base))
    choice = choose_base(recipe, "3.12")
    assert choice.image == base
    assert said in choice.why


def test_the_plan_names_the_chosen_base_and_a_missing_python_exits_2(
    tmp_path: Path, cli_run: CliRun
) -> None:
    path = example(tmp_path, '["3.11", "3.13", "3.12"]')
    code, out, err = cli_run("build", "--recipe", str(path), "--python", "3.13", "--plan",
                             "--format", "json", "--no-host-pip-config")  # fmt: skip
    assert code == 0, err
    row = json.loads(out)["plan"]["base image"]
    assert row.startswith("archwheel/debian:trixie (")
    assert "Debian 13 trixie (python3.13, glibc 2.41)" in row

    code, out, err = cli_run("build", "--recipe", str(path), "--python", "3.12", "--plan",
                             "--no-host-pip-config")  # fmt: skip
    assert code == 2
    errors = [line for line in err.splitlines() if line.startswith("archwheel: error")]
    assert len(errors) == 1, err
    assert "no base archwheel makes offers Python 3.12" in errors[0]
    assert "3.11 (bookworm), 3.13 (trixie), 3.14 (sid)" in errors[0]
    assert "Traceback" not in err


def test_python_3_14_builds_on_sid_as_3_13_on_trixie(tmp_path: Path, cli_run: CliRun) -> None:
    path = example(tmp_path, '["3.11", "3.14"]')
    recipe = load(path)
    moved, choice = with_base_for(recipe, "3.14")
    assert moved.toolchain.base_image == choice.image == "archwheel/debian:sid"
    assert "Debian unstable sid (python3.14, glibc 2.43)" in choice.why
    # the example's CUDA 13.0 cannot compile against sid's glibc 2.43: refused before any image
    code, out, err = cli_run("build", "--recipe", str(path), "--python", "3.14", "--plan",
                             "--no-host-pip-config")  # fmt: skip
    errors = [line for line in err.splitlines() if line.startswith("archwheel: error")]
    assert code == 2 and len(errors) == 1, err
    assert (
        "CUDA 13.0 cannot compile on archwheel/debian:sid: its glibc 2.43 declares rsqrt"
        in errors[0]
        and '[toolchain] cuda = "13.2"' in errors[0]
    )
    path.write_text(path.read_text().replace('cuda = "13.0"', 'cuda = "13.2"'))
    code, out, err = cli_run("build", "--recipe", str(path), "--python", "3.14", "--plan",
                             "--format", "json", "--no-host-pip-config")  # fmt: skip
    assert code == 0, err
    plan = json.loads(out)["plan"]
    assert plan["base image"].startswith("archwheel/debian:sid (")
    # sid's gcc 16 is newer than nvcc 13.2 accepts (15): g++-15 for nvcc, said in the row
    assert (
        "nvcc's host compiler g++-15 (NVCC_CCBIN): CUDA 13.2 accepts gcc <= 15, sid's gcc "
        "is 16" in plan["base image"]
    )


def test_nvcc_gets_an_older_gcc_only_where_the_base_s_is_too_new(tmp_path: Path) -> None:
    path = example(tmp_path, '["3.11", "3.14"]')
    path.write_text(path.read_text().replace('cuda = "13.0"', 'cuda = "13.2"'))
    on_sid, _ = with_base_for(load(path), "3.14")
    moved, why = with_host_compiler(on_sid)
    assert moved.toolchain.system_packages == ("g++-15",)
    assert moved.build.env["NVCC_CCBIN"] == "g++-15" and why is not None
    # bookworm's gcc 12 and trixie's 14 are accepted: nothing changes
    for python in ("3.11", "3.13"):
        recipe, _ = with_base_for(load(example(tmp_path, '["3.11", "3.13"]')), python)
        assert with_host_compiler(recipe) == (recipe, None)
    # a recipe that names nvcc's host compiler keeps its own
    own = dataclasses.replace(
        on_sid, build=dataclasses.replace(on_sid.build, env={"CUDAHOSTCXX": "/usr/bin/g++-14"})
    )
    assert with_host_compiler(own) == (own, None)
    # a CUDA whose nvcc archwheel has not read is left to nvcc (and to the failure's line)
    unknown = dataclasses.replace(
        on_sid, toolchain=dataclasses.replace(on_sid.toolchain, cuda=CudaVersion(13, 3))
    )
    assert with_host_compiler(unknown) == (unknown, None)
