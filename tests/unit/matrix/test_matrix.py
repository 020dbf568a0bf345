"""The matrix plan (cells, keys, exclusions, skips) and the run's failure handling, with a fake
builder (tests/support/matrix_fakes.py) that makes real wheels without containers."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from archwheel.errors import UsageError
from archwheel.exit_codes import EXIT_BUILD, EXIT_OK
from archwheel.matrix.index import MANIFEST, read_index
from archwheel.matrix.plan import (
    Action,
    MatrixSpec,
    load_matrix,
    make_plan,
    parse_exclusion,
)
from archwheel.matrix.run import Verdict, run_matrix
from archwheel.matrix.variants import matrix_publisher
from archwheel.wheelbuild.planning.recipe_summary import RecipeSummary
from tests.support.matrix_fakes import FakeCellBuilder

RECIPES = {
    "kern": RecipeSummary(
        "kern", "a" * 64, ("3.11", "3.12"), "8.0;9.0", cuda="13.0", torch="2.14.1"
    ),
    "other": RecipeSummary("other", "b" * 64, ("3.11",), "9.0", cuda="12.8"),
}

MATRIX_TOML = """\
schema_version = 1
[matrix]
recipes = ["kern", "other"]
python = ["3.11", "3.12"]
arch = ["8.0;9.0", "9.0;12.0+PTX"]
[[matrix.exclude]]
recipe = "kern"
python = "3.12"
arch = "sm_80,sm_90"
[[matrix.exclude]]
python = "3.11"
arch = "9.0;12.0+PTX"
"""


def test_matrix_file_and_flags(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text(MATRIX_TOML)
    spec = load_matrix(path)
    assert spec.recipes == ("kern", "other") and spec.python == ("3.11", "3.12")
    assert spec.arch == ("8.0;9.0", "9.0;12.0+PTX") and len(spec.exclude) == 2
    flagged = spec.override(recipes=["kern"], python=[])
    assert flagged.recipes == ("kern",) and flagged.python == ("3.11", "3.12")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[matrix]\nrecipe = ['x']\n", "unknown key matrix.recipe"),
        ("[matrix]\npython = 3.11\n", "matrix.python must be a string or a list"),
        ("[matrix]\nrecipes=['k']\n[[matrix.exclude]]\ncuda = '12.8'\n", "matrix.exclude[0]"),
        ("[matrx]\n", "unknown table or key 'matrx'"),
        ("[matrix\n", "not TOML"),
    ],
)
def test_bad_matrix_files_name_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "m.toml"
    path.write_text(text)
    with pytest.raises(UsageError) as err:
        load_matrix(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_plan_cells_exclusions_and_unbuildable_pythons(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text(MATRIX_TOML)
    plan = make_plan(load_matrix(path), RECIPES, ())
    assert len(plan.cells) == 2 * 2 * 2
    by_label = {c.cell.label: c for c in plan.cells}
    excluded = by_label["kern torch 2.14.1 py3.12 [8.0;9.0]"]
    assert excluded.action is Action.EXCLUDED and "excluded by" in excluded.reason
    unbuildable = by_label["other py3.12 [9.0;12.0+PTX]"]
    assert (
        unbuildable.action is Action.EXCLUDED and "does not list Python 3.12" in unbuildable.reason
    )
    # kern: 3.11 with 8.0;9.0, 3.12 with 9.0;12.0+PTX; other: 3.11 with 8.0;9.0
    assert len(plan.of(Action.BUILD)) == 8 - 2 - 1 - 2
    assert len({c.key for c in plan.cells}) == len(plan.cells)


def test_cells_that_would_make_one_file_name_are_refused_before_any_build() -> None:
    # Real wheels of one recipe, torch and Python carry no arch list in their name.
    spec = MatrixSpec(recipes=("kern",), arch=("8.0", "8.0;9.0"))
    with pytest.raises(UsageError) as err:
        make_plan(spec, RECIPES, ())
    message = str(err.value)
    assert "kern torch 2.14.1 py3.11 [8.0]" in message and "[8.0;9.0]" in message
    assert "differ only in their arch list" in message
    assert "index of its own" in (err.value.hint or "")
    # excluding one of them, or giving each Python its own list, is a matrix that builds
    excluded = MatrixSpec(
        recipes=("kern",), arch=("8.0", "8.0;9.0"), exclude=(parse_exclusion("arch=8.0"),)
    )
    assert len(make_plan(excluded, RECIPES, ()).of(Action.BUILD)) == 1
    # a recipe whose name does not carry torch: two torch cells collide as well
    unlabelled = {"kern": dataclasses.replace(RECIPES["kern"], torch_in_name=False)}
    with pytest.raises(UsageError, match="differ only in their torch and would"):
        make_plan(MatrixSpec(recipes=("kern",), torch=("2.13.0", "2.14.1")), unlabelled, ())


def test_a_torch_axis_applies_to_recipes_built_against_torch() -> None:
    spec = MatrixSpec(recipes=("kern", "other"), torch=("2.13.0", "2.14.1"))
    plan = make_plan(spec, RECIPES, ())
    assert [c.cell.label for c in plan.cells] == [
        "kern torch 2.13.0 py3.11 [8.0;9.0]",
        "kern torch 2.14.1 py3.11 [8.0;9.0]",
        "other py3.11 [9.0]",
    ]


def test_one_cell_spelled_twice_is_one_cell() -> None:
    spec = MatrixSpec(recipes=("kern",), arch=("8.0;9.0", "sm_80,sm_90"))
    assert len(make_plan(spec, RECIPES, ()).cells) == 1


def test_defaults_are_the_recipes() -> None:
    plan = make_plan(MatrixSpec(recipes=("kern",)), RECIPES, ())
    assert [c.cell.label for c in plan.cells] == ["kern torch 2.14.1 py3.11 [8.0;9.0]"]


def test_a_matrix_spanning_too_many_cells_is_refused_before_any_is_planned() -> None:
    # Once, a 9 KB file of 200 torch x 200 Python x 150 arch values planned six million cells
    # (minutes, gigabytes) before saying anything; the product is checked first.
    from archwheel.matrix import plan

    torches = tuple(f"2.14.{i}" for i in range(200))
    pythons = tuple(f"3.{i}" for i in range(200))
    archs = tuple(f"{a};{b}" for a in ("8.0", "8.6", "8.9") for b in ("9.0", "10.0", "12.0"))
    spec = MatrixSpec(recipes=("kern", "other"), torch=torches, python=pythons, arch=archs)
    spanned = 200 * 200 * 9 + 1 * 200 * 9  # "other" is not built against torch
    with pytest.raises(UsageError, match=f"spans {spanned} cells, above the limit of 10000"):
        make_plan(spec, RECIPES, ())
    fits = MatrixSpec(recipes=("kern",), torch=torches[:10], python=pythons[:2], arch=archs)
    assert plan.MAX_MATRIX_CELLS >= 10 * 2 * 9
    assert len(make_plan(fits, RECIPES, ()).cells) == 10 * 2 * 9


def test_too_many_exclusions_are_refused_before_any_cell_is_planned() -> None:
    """Each cell is matched against each exclusion: a 1 MiB file holds 30000 of them, and with
    10000 cells that was minutes of planning. More than 1000 is a usage error."""
    many = tuple(parse_exclusion(f"python=3.{n}") for n in range(1001))
    spec = MatrixSpec(recipes=("kern",), exclude=many)
    with pytest.raises(UsageError, match="has 1001 exclusions, above the limit of 1000"):
        make_plan(spec, RECIPES, ())
    assert len(make_plan(MatrixSpec(recipes=("kern",), exclude=many[:1000]), RECIPES, ()).cells)


def test_unknown_recipe_and_bad_exclusion() -> None:
    with pytest.raises(UsageError, match="unknown recipe 'nope'"):
        make_plan(MatrixSpec(recipes=("nope",)), RECIPES, ())
    with pytest.raises(UsageError, match="not AXIS=VALUE"):
        parse_exclusion("cuda=12.8")
    assert parse_exclusion("python=3.12,arch=8.0;9.0").values == {
        "python": "3.12",
        "arch": "8.0;9.0",
    }


def test_failed_cells_publish_nothing_and_stop_nothing(tmp_path: Path) -> None:
    spec = MatrixSpec(recipes=("kern",), torch=("2.13.0", "2.14.1"), python=("3.11", "3.12"))
    plan = make_plan(spec, RECIPES, ())
    assert len(plan.of(Action.BUILD)) == 4
    builder = FakeCellBuilder(
        fail={"kern torch 2.13.0 py3.11 [8.0;9.0]"},
        drop_arch={"kern torch 2.14.1 py3.12 [8.0;9.0]"},
    )
    index = tmp_path / "index"
    result = run_matrix(plan, builder, index, tmp_path / "work")
    verdicts = {c.planned.cell.label: c.verdict for c in result.cells}
    assert verdicts == {
        "kern torch 2.13.0 py3.11 [8.0;9.0]": Verdict.BUILD_FAILED,
        "kern torch 2.13.0 py3.12 [8.0;9.0]": Verdict.PUBLISHED,
        "kern torch 2.14.1 py3.11 [8.0;9.0]": Verdict.PUBLISHED,
        "kern torch 2.14.1 py3.12 [8.0;9.0]": Verdict.REFUSED,
    }
    assert len(builder.calls) == 4  # the failure stopped nothing
    refused = next(c for c in result.cells if c.verdict is Verdict.REFUSED)
    assert "lacks sm_90" in refused.message
    failed = next(c for c in result.cells if c.verdict is Verdict.BUILD_FAILED)
    assert "as the test asked" in failed.message
    assert not result.ok and result.exit_code == EXIT_BUILD
    published = {e.cell_key for e in read_index(index)}
    assert published == {c.planned.key for c in result.cells if c.verdict is Verdict.PUBLISHED}
    pages = sorted(p.name for p in (index / "current").glob("torch-*.html"))
    assert pages == ["torch-2.13.0+cu130.html", "torch-2.14.1+cu130.html"]

    # The rerun builds only what is not in the index; once those pass, everything passes.
    again = make_plan(spec, RECIPES, read_index(index))
    assert len(again.of(Action.SKIP)) == 2 and len(again.of(Action.BUILD)) == 2
    fixed = FakeCellBuilder()
    second = run_matrix(again, fixed, index, tmp_path / "work")
    assert len(fixed.calls) == 2 and second.ok and second.exit_code == EXIT_OK
    assert second.count(Verdict.SKIPPED) == 2 and second.count(Verdict.PUBLISHED) == 2
    assert len(read_index(index)) == 4


def test_a_changed_recipe_rebuilds_its_cells(tmp_path: Path) -> None:
    spec = MatrixSpec(recipes=("kern",))
    index = tmp_path / "index"
    run_matrix(make_plan(spec, RECIPES, ()), FakeCellBuilder(), index, tmp_path / "w")
    changed = {"kern": RecipeSummary("kern", "c" * 64, ("3.11",), "8.0;9.0", cuda="13.0")}
    plan = make_plan(spec, changed, read_index(index))
    assert [c.action for c in plan.cells] == [Action.BUILD]


def test_a_rebuild_with_another_arch_list_never_replaces_a_published_file(
    tmp_path: Path,
) -> None:
    # One matrix cannot hold both lists (refused above); two runs into one index can: the
    # second cell builds (its inputs are new) and the index refuses its wheel, whose name is
    # already published with other bytes.
    index = tmp_path / "i"
    first = MatrixSpec(recipes=("kern",), arch=("8.0",))
    second = MatrixSpec(recipes=("kern",), arch=("8.0;9.0",))
    builder = FakeCellBuilder(same_name=True)
    one = run_matrix(make_plan(first, RECIPES, ()), builder, index, tmp_path / "w")
    two = run_matrix(make_plan(second, RECIPES, read_index(index)), builder, index, tmp_path / "w")
    assert [c.verdict for c in (*one.cells, *two.cells)] == [Verdict.PUBLISHED, Verdict.REFUSED]
    assert "with other bytes" in two.cells[0].message
    assert [e.expect for e in read_index(index)] == ["8.0"]


def test_the_index_manifest_records_which_cells_a_grown_arch_axis_built_and_reused(
    tmp_path: Path,
) -> None:
    # Per-arch cells published as variants; adding 12.0 builds only its cell, and the manifest
    # of the tree that publish made says so: the new wheel added, the two published kept.
    index, work = tmp_path / "index", tmp_path / "work"
    wheel = "kern-1.0+1-cp311-none-linux_x86_64"
    first = MatrixSpec(recipes=("kern",), python=("3.11",), arch=("8.0", "9.0"))
    publisher = matrix_publisher(None)
    run_matrix(make_plan(first, RECIPES, (), variants=True), FakeCellBuilder(same_name=True),
               index, work, publisher=publisher)  # fmt: skip
    before = json.loads((index / "current" / MANIFEST).read_text())["publish"]
    assert before["added"] == [f"{wheel}-sm90.whl"]  # each cell is its own publish
    assert before["kept"] == [f"{wheel}-sm80.whl"]
    grown = dataclasses.replace(first, arch=("8.0", "9.0", "12.0"))
    plan = make_plan(grown, RECIPES, read_index(index), variants=True)
    builder = FakeCellBuilder(same_name=True)
    result = run_matrix(plan, builder, index, work, publisher=publisher)
    assert [c.arch for c in builder.calls] == ["12.0"]
    assert [c.verdict for c in result.cells] == [Verdict.SKIPPED] * 2 + [Verdict.PUBLISHED]
    tree = (index / "current").resolve()
    record = json.loads((tree / MANIFEST).read_text())["publish"]
    assert record["added"] == [f"{wheel}-sm120.whl"]
    assert record["kept"] == [f"{wheel}-sm80.whl", f"{wheel}-sm90.whl"]
    assert record["from_tree"] != tree.name and (index / "trees" / record["from_tree"]).is_dir()
    added = next(e for e in read_index(index) if e.file == record["added"][0])
    assert record["at"] == added.published_at != ""

    # The first publish into an index kept nothing and came from no tree.
    alone = tmp_path / "alone"
    one = MatrixSpec(recipes=("kern",), python=("3.11",), arch=("8.0",))
    run_matrix(make_plan(one, RECIPES, ()), FakeCellBuilder(), alone, work)
    record = json.loads((alone / "current" / MANIFEST).read_text())["publish"]
    assert record["from_tree"] is None and record["kept"] == [] and len(record["added"]) == 1


# -- range cells: a recipe whose one wheel serves several torches ([torch] loads_with) ----------


def _stable_facts() -> RecipeSummary:
    return RecipeSummary(
        name="stable", sha256="b" * 64, python_versions=("3.11",), default_arch="9.0",
        cuda="13.0", torch="2.14.1", torch_in_name=False,
        loads_with=("2.12.1", "2.13.0", "2.14.1"),
    )  # fmt: skip


def test_a_recipe_that_loads_across_its_range_gets_one_cell_for_it() -> None:
    spec = MatrixSpec(recipes=("stable",), torch=("2.12.1", "2.13.0", "2.14.1", "2.15.0"))
    with pytest.raises(UsageError, match="would publish the same wheel file name"):
        # 2.15.0 is outside the range: a cell of its own, with the same file name (no label)
        make_plan(spec, {"stable": _stable_facts()}, [])
    spec = MatrixSpec(recipes=("stable",), torch=("2.12.1", "2.14.1"))
    plan = make_plan(spec, {"stable": _stable_facts()}, [])
    (cell,) = [p.cell for p in plan.cells]
    assert (cell.torch, cell.serves) == ("2.14.1", ("2.12.1", "2.14.1"))
    assert "serves 2.12.1, 2.14.1" in cell.label
    assert plan.to_json_dict()["cells"][0]["serves"] == ["2.12.1", "2.14.1"]


def test_without_a_torch_axis_the_range_cell_serves_all_its_releases() -> None:
    plan = make_plan(MatrixSpec(recipes=("stable",)), {"stable": _stable_facts()}, [])
    (cell,) = [p.cell for p in plan.cells]
    assert cell.serves == ("2.12.1", "2.13.0", "2.14.1")


def test_a_labelled_range_recipe_builds_torches_outside_its_range_as_cells_of_their_own() -> None:
    facts = dataclasses.replace(_stable_facts(), torch_in_name=True)
    spec = MatrixSpec(recipes=("stable",), torch=("2.13.0", "2.15.0"))
    cells = [p.cell for p in make_plan(spec, {"stable": facts}, []).cells]
    assert [(c.torch, c.serves) for c in cells] == [("2.14.1", ("2.13.0",)), ("2.15.0", ())]
