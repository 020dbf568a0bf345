"""The matrix's own cell builder (``build_cells``): the build use case of each cell, with the
matrix's options; a stand-in for ``build_wheel`` records what it is asked (a real wheel, made
without a container, is its answer)."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from archwheel.effects.settings import Settings
from archwheel.errors import InputError
from archwheel.matrix.cells import build_cells, read_recipes
from archwheel.matrix.plan import Cell, MatrixSpec, make_plan
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
from archwheel.wheelbuild.gate import GateVerdict
from tests.support.matrix_fakes import FakeCellBuilder

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
