"""The matrix's own cell builder (``build_cells``): the build use case of each cell, with the
matrix's options; a stand-in for ``build_wheel`` records what it is asked (a real wheel, made
without a container, is its answer)."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import jsonschema
import pytest

from archwheel.effects.settings import Settings
from archwheel.errors import InputError, RecipeError
from archwheel.interfaces.cli import build_parser
from archwheel.interfaces.commands.matrix import MatrixCommand, run_request
from archwheel.matrix.cells import build_cells, read_recipes
from archwheel.matrix.index import read_index
from archwheel.matrix.plan import Action, Cell, MatrixSpec, make_plan, parse_exclusion
from archwheel.matrix.run import Verdict, run_matrix
from archwheel.wheelbuild import (
    BuildReporter,
    BuildRequest,
    BuildResult,
    BuiltWheel,
    LogOnly,
    PipRequest,
    build_wheel,
    provenance_path,
)
from archwheel.wheelbuild.wheel.gate import GateVerdict
from tests.support.cli import CliRun
from tests.support.matrix_fakes import FakeCellBuilder
from tests.support.paths import ROOT
from tests.support.schemas import matrix_plan_schema, matrix_result_schema

CELL = Cell("example", None, "3.11", "8.0;9.0")


def _result(request: BuildRequest) -> BuildResult:
    wheel = FakeCellBuilder()(CELL, request.out).wheel
    provenance_path(wheel).write_text("{}")
    plan = build_wheel(BuildRequest(recipe="example", plan_only=True)).plan
    built = BuiltWheel(
        wheel, provenance_path(wheel), "0" * 64, GateVerdict(True, "ok"), MappingProxyType({})
    )
    return BuildResult(plan, None, built, request.out / "logs" / "cell.log")


def test_each_cell_is_built_with_the_matrix_options_and_the_cells_own_axes(
    tmp_path: Path,
) -> None:
    asked: list[BuildRequest] = []
    shown: list[BuildResult] = []
    reporter = LogOnly()

    def build(request: BuildRequest, given: BuildReporter) -> BuildResult:
        assert given is reporter
        asked.append(request)
        return _result(request)

    options = BuildRequest(jobs=3, ccache_volume=None, pip=PipRequest(host_config=True))
    builder = build_cells(options, reporter, on_built=shown.append, build=build)
    made = builder(Cell("example", "2.14.1", "3.12", "9.0"), tmp_path / "cell")
    (request,) = asked
    assert (request.recipe, request.torch, request.python, request.arch, request.out) == (
        "example", "2.14.1", "3.12", "9.0", tmp_path / "cell",
    )  # fmt: skip
    assert (request.jobs, request.ccache_volume, request.pip) == (3, None, options.pip)
    assert not request.plan_only
    assert made.wheel.parent == tmp_path / "cell" and made.provenance == provenance_path(made.wheel)
    (result,) = shown  # each finished build is handed on once
    assert result.built is not None and result.built.wheel == made.wheel


def test_a_failed_build_is_the_cells_verdict_with_its_message(tmp_path: Path) -> None:
    def build(request: BuildRequest, reporter: BuildReporter) -> BuildResult:
        raise InputError(f"sdist of {request.recipe}: sha256 is not the recipe's")

    spec = MatrixSpec(recipes=("example", "libtorch-ops"), python=("3.11",))
    plan = make_plan(spec, read_recipes(spec, Settings()), ())
    builder = build_cells(BuildRequest(), LogOnly(), build=build)
    result = run_matrix(plan, builder, tmp_path / "index", tmp_path / "work")
    assert [c.verdict for c in result.cells] == [Verdict.BUILD_FAILED, Verdict.BUILD_FAILED]
    assert [c.message for c in result.cells] == [
        "sdist of example: sha256 is not the recipe's",
        "sdist of libtorch-ops: sha256 is not the recipe's",
    ]


# -- each Python on the base that has it ---------------------------------------------------------

# The example for each Python a fleet runs, as tests/integration/docker/test_build.py builds it
# for real: 3.11 (8.0;9.0) on the recipe's bookworm base, 3.13 (9.0) on trixie.
FLEET = MatrixSpec(
    recipes=("example",),
    python=("3.11", "3.13"),
    arch=("8.0;9.0", "9.0"),
    exclude=(parse_exclusion("python=3.11,arch=9.0"), parse_exclusion("python=3.13,arch=8.0;9.0")),
)


def test_each_python_of_the_axis_is_planned_and_published_on_the_base_that_has_it(
    tmp_path: Path,
) -> None:
    plan = make_plan(FLEET, read_recipes(FLEET, Settings()), ())
    built = {(c.cell.python, c.cell.arch): c.base for c in plan.of(Action.BUILD)}
    assert built == {
        ("3.11", "8.0;9.0"): "archwheel/debian:bookworm",
        ("3.13", "9.0"): "archwheel/debian:trixie",
    }
    document = plan.to_json_dict()
    jsonschema.validate(document, matrix_plan_schema())
    assert {c["python"]: c["base"] for c in document["cells"]} == {
        "3.11": "archwheel/debian:bookworm",
        "3.13": "archwheel/debian:trixie",
    }
    builder = FakeCellBuilder()
    result = run_matrix(plan, builder, tmp_path / "index", tmp_path / "work")
    assert [(c.python, c.arch) for c in builder.calls] == [("3.11", "8.0;9.0"), ("3.13", "9.0")]
    summary = result.to_json_dict()
    jsonschema.validate(summary, matrix_result_schema())
    published = [c for c in summary["cells"] if c["verdict"] == "published"]
    assert [(c["python"], c["base"]) for c in published] == [
        ("3.11", "archwheel/debian:bookworm"),
        ("3.13", "archwheel/debian:trixie"),
    ]
    assert len(read_index(tmp_path / "index")) == 2


def test_a_python_no_base_offers_is_refused_before_any_cell_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli_run: CliRun
) -> None:
    """A recipe listing 3.12 (no Debian suite packages it): the matrix stops at its plan with
    exit 2, naming the Pythons the bases offer, instead of building the 3.11 cell and failing
    the 3.12 one in its container."""
    example = (ROOT / "recipes" / "example.toml").read_text()
    recipe = example.replace('versions = ["3.11", "3.13"]', 'versions = ["3.11", "3.12"]')
    recipe = recipe.replace('path = "../examples/cuda-kernels"', f'path = "{tmp_path}"')
    recipe = recipe.replace('name = "example"', 'name = "py312"')
    assert 'versions = ["3.11", "3.12"]' in recipe and "py312" in recipe
    (tmp_path / "py312.toml").write_text(recipe)
    monkeypatch.setenv("ARCHWHEEL_RECIPES", str(tmp_path))
    argv = ["matrix", "--recipe", "py312", "--python", "3.11", "--python", "3.12",
            "--index", str(tmp_path / "index"), "--work", str(tmp_path / "work")]  # fmt: skip
    request = MatrixCommand.from_args(build_parser("matrix").parse_args(argv))
    builder = FakeCellBuilder()
    with pytest.raises(RecipeError, match=r"no base archwheel makes offers Python 3\.12"):
        run_request(request, builder)
    assert builder.calls == []
    assert not (tmp_path / "index").exists()
    for extra in ((), ("--plan",)):
        code, out, err = cli_run(*argv, *extra)
        assert code == 2, err
        (line,) = [x for x in err.splitlines() if x.strip()]
        assert "py312.toml: [python] 3.12: no base archwheel makes offers Python 3.12" in line
        assert "3.11 (bookworm)" in line and "3.13 (trixie)" in line
    # Python 3.11 alone (the axis leaves 3.12 out) plans: only the Pythons built are checked.
    code, out, err = cli_run("matrix", "--recipe", "py312", "--python", "3.11",
                             "--index", str(tmp_path / "index"), "--plan")  # fmt: skip
    assert code == 0, err
