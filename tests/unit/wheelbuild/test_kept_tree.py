"""A build stopped after configure and a build tree kept under a name (run/kept_tree.py): the
plan's steps, the inputs a tree is resumed for, the refusal of other inputs and of a second
build, the name's grammar and ``remove_kept``. The real builds: tests/integration/docker/
test_kept_tree.py."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from pathlib import Path

import pytest

from archwheel.errors import UsageError
from archwheel.wheelbuild.planning.plan import COPIED
from archwheel.wheelbuild.planning.plan_variants import serial_variant
from archwheel.wheelbuild.recipes.recipe import load_recipe, parse_recipe
from archwheel.wheelbuild.recipes.recipe_model import Recipe
from archwheel.wheelbuild.run.kept_tree import (
    NVCC_HISTORY,
    check_name,
    kept_tree,
    kept_trees,
    plan_inputs,
    remove_kept,
)
from tests.support.paths import ROOT
from tests.support.plans import FACTS, plan_for

PYTORCH = ROOT / "recipes" / "pytorch-2.6.0-debian-cu130.toml"


@pytest.fixture(scope="module")
def pytorch() -> Recipe:
    return load_recipe(PYTORCH, facts=FACTS)


def _steps(plan: object) -> list[str]:
    return [step.name for phase in plan.phases for step in phase.steps]  # type: ignore[attr-defined]


def test_configure_runs_after_the_cache_daemon_and_stop_after_drops_the_compile(
    pytorch: Recipe,
) -> None:
    full = plan_for(pytorch)
    assert _steps(full)[-3:] == ["cache-start", "configure", "compile"]
    configure = next(s for p in full.phases for s in p.steps if s.name == "configure")
    assert "python setup.py build --cmake-only" in configure.command[-1]
    assert configure.env == next(s for s in full.phases[-1].steps if s.name == "compile").env
    stopped = plan_for(pytorch, stop_after="configure")
    assert _steps(stopped)[-2:] == ["cache-start", "configure"]
    rows = dict(stopped.summary_rows())
    assert rows["stop after"] == "configure: no wheel (--stop-after)"
    assert rows["configure"].startswith("(cd torch/csrc/jit/serialization && flatc")


def test_the_serial_variant_configures_as_it_compiles(pytorch: Recipe) -> None:
    serial = serial_variant(plan_for(pytorch))
    steps = {s.name: s for p in serial.phases for s in p.steps}
    assert steps["configure"].env == steps["compile"].env == serial.build_env
    assert steps["compile"].env != plan_for(pytorch).build_env  # one job at a time


def test_stop_after_configure_needs_a_configure_step() -> None:
    example = load_recipe(ROOT / "recipes" / "example.toml", facts=FACTS)
    with pytest.raises(UsageError, match="recipe example has no \\[build\\] configure"):
        plan_for(example, stop_after="configure")


def test_a_partial_build_keeps_going_past_a_failed_object(pytorch: Recipe) -> None:
    plan = plan_for(pytorch, targets=("c10", "aten/src/ATen/native/cuda/Sleep.cu"))
    assert _steps(plan)[-2:] == ["configure", "targets"]
    script = next(s for p in plan.phases for s in p.steps if s.name == "targets").command[-1]
    assert script.startswith('ninja -C /build/src/build -k 0 -j "$MAX_JOBS" c10 ')
    assert script.endswith(" '/build/src/aten/src/ATen/native/cuda/Sleep.cu^'")


def test_a_kept_tree_is_copied_into_once(pytorch: Recipe) -> None:
    def copy_command(plan: object) -> str:
        step = next(s for p in plan.phases for s in p.steps if s.name == "copy-source")  # type: ignore[attr-defined]
        return str(step.command[-1])

    assert COPIED not in copy_command(plan_for(pytorch))
    kept = copy_command(plan_for(pytorch, work_name="pt"))
    assert f"[ -e /build/src/{COPIED} ] ||" in kept and f"touch /build/src/{COPIED}" in kept


def test_the_inputs_name_what_shapes_the_tree_not_how_it_runs(pytorch: Recipe) -> None:
    base = plan_inputs(plan_for(pytorch))
    assert base["arch list"] == "8.0;9.0" and base["python"] == "3.13"
    assert "nvidia-cudnn-cu13==9.*" in base["toolkit"]
    # the job count, the compiler cache: how this run compiles, not what
    assert plan_inputs(plan_for(pytorch, ccache_volume=None)) == base
    other = plan_inputs(plan_for(pytorch, arch="9.0"))
    assert [k for k in base if base[k] != other[k]] == ["arch list", "environment"]


def _edited(recipe: Recipe, table: str, key: str, value: object) -> Recipe:
    document = {k: dict(v) if isinstance(v, dict) else v for k, v in recipe.document.items()}
    document.setdefault(table, {})[key] = value
    return parse_recipe(document, origin=recipe.path, facts=FACTS)


def test_a_repair_pin_or_a_description_keeps_the_tree_what_compiles_does_not(
    pytorch: Recipe,
) -> None:
    base = plan_inputs(plan_for(pytorch))
    assert base["recipe"].startswith("pytorch-2.6.0-debian-cu130, what shapes the tree: sha256 ")
    for table, key, value in (
        ("repair", "rpath_folders", ["nvidia/cu13/lib"]),
        ("recipe", "description", "another description"),
        ("build", "memory_per_job_gib", 6.0),
        ("smoke", "snippet", "import torch"),
    ):
        assert plan_inputs(plan_for(_edited(pytorch, table, key, value))) == base, table
    more = _edited(pytorch, "build", "requirements", [*pytorch.build.requirements, "cmake"])
    assert [k for k, v in plan_inputs(plan_for(more)).items() if base[k] != v] == ["recipe"]
    depends = _edited(pytorch, "toolchain", "build_depends_exclude", ["libcub-dev"])
    assert plan_inputs(plan_for(depends))["recipe"] != base["recipe"]


def _plan(pytorch: Recipe, tmp_path: Path, arch: str = "8.0;9.0") -> object:
    return dataclasses.replace(plan_for(pytorch, arch=arch), build_user=(os.getuid(), os.getgid()))


def test_a_tree_is_made_resumed_and_refused_for_other_inputs(
    pytorch: Recipe, tmp_path: Path
) -> None:
    plan = _plan(pytorch, tmp_path)
    with kept_tree(tmp_path, "pt", plan) as made:  # type: ignore[arg-type]
        assert not made.resumed and made.tree == tmp_path / "work" / "pt" / "src"
        (made.tree / "build").mkdir()
    (tmp_path / "work" / "pt" / NVCC_HISTORY).write_text("row\n")
    recorded = json.loads((tmp_path / "work" / "pt" / "inputs.json").read_text())
    assert recorded == plan_inputs(plan)  # type: ignore[arg-type]
    with kept_tree(tmp_path, "pt", plan) as again:  # type: ignore[arg-type]
        assert again.resumed and (again.tree / "build").is_dir()
    other = _plan(pytorch, tmp_path, arch="9.0")
    refused = pytest.raises(UsageError, match="made for other inputs \\(changed: arch list, env")
    with refused, kept_tree(tmp_path, "pt", other):  # type: ignore[arg-type]
        pass
    assert (tmp_path / "work" / "pt" / "src" / "build").is_dir()  # refused: untouched
    assert kept_trees(tmp_path) == [tmp_path / "work" / "pt"]
    # a tree whose record is gone is made again, its history with it
    (tmp_path / "work" / "pt" / "inputs.json").unlink()
    with kept_tree(tmp_path, "pt", other) as remade:  # type: ignore[arg-type]
        assert not remade.resumed and not (remade.tree / "build").exists()
    assert not (tmp_path / "work" / "pt" / NVCC_HISTORY).exists()


def test_one_build_at_a_time_holds_a_name(pytorch: Recipe, tmp_path: Path) -> None:
    plan = _plan(pytorch, tmp_path)
    inside = threading.Event()
    leave = threading.Event()

    def hold() -> None:
        with kept_tree(tmp_path, "pt", plan):  # type: ignore[arg-type]
            inside.set()
            leave.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert inside.wait(10)
        busy = pytest.raises(UsageError, match="in use by a running build")
        with busy, kept_tree(tmp_path, "pt", plan):  # type: ignore[arg-type]
            pass
        with pytest.raises(UsageError, match="in use by a running build"):
            remove_kept(tmp_path, "pt")
    finally:
        leave.set()
        holder.join()
    assert remove_kept(tmp_path, "pt") == tmp_path / "work" / "pt"
    assert not (tmp_path / "work" / "pt").exists()
    with pytest.raises(UsageError, match="no kept build tree named 'pt'"):
        remove_kept(tmp_path, "pt")


@pytest.mark.parametrize("name", ["", "a b", "../x", ".hidden", "x" * 65, "a/b", "ä"])
def test_a_name_is_letters_digits_dot_underscore_dash(name: str) -> None:
    with pytest.raises(UsageError, match="is not a name"):
        check_name(name)


def test_a_linked_work_folder_is_refused(pytorch: Recipe, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "pt").symlink_to(tmp_path / "elsewhere")
    refused = pytest.raises(UsageError, match="not a folder archwheel made")
    with refused, kept_tree(tmp_path, "pt", _plan(pytorch, tmp_path)):  # type: ignore[arg-type]
        pass
    with pytest.raises(UsageError, match="no kept build tree named"):
        remove_kept(tmp_path, "pt")
    assert (tmp_path / "elsewhere").is_dir()
