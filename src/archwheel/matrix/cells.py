"""The matrix's cells, built by the build use case, and the recipes it plans with, read by it.

``read_recipes`` reads and checks the recipes of a matrix (``wheelbuild.summarize_recipes``:
each arch list against each toolkit, each Python's base image, the recipe file's and its
source's digests); the plan is
made from those summaries. ``build_cells`` is the matrix's cell builder: ``wheelbuild``'s
``build_wheel`` of one cell's recipe, torch, arch list and Python, every other option the
matrix's own (``build``: another callable of the same shape, for tests).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from archwheel.effects.settings import Settings
from archwheel.matrix.plan import Cell, MatrixSpec
from archwheel.matrix.run import CellBuilder, CellOutput
from archwheel.wheelbuild.planning.recipe_summary import RecipeSummary, summarize_recipes
from archwheel.wheelbuild.usecase import BuildReporter, BuildRequest, BuildResult, build_wheel

BuildWheel = Callable[[BuildRequest, BuildReporter], BuildResult]


def read_recipes(spec: MatrixSpec, settings: Settings) -> dict[str, RecipeSummary]:
    """The recipes of ``spec``, read from the recipe folders of ``settings`` and checked
    against every torch, arch list and Python of its axes (a list a toolkit cannot build, a
    Python no base image offers: exit 2), each Python's base image chosen."""
    return summarize_recipes(
        spec.recipes, settings, torch=spec.torch, arch=spec.arch, python=spec.python
    )


def build_cells(
    options: BuildRequest,
    reporter: BuildReporter,
    *,
    on_built: Callable[[BuildResult], None] | None = None,
    build: BuildWheel = build_wheel,
) -> CellBuilder:
    """The cell builder of a matrix: ``build`` of ``options`` with the cell's recipe, torch,
    arch list and Python, into the cell's folder, reporting to ``reporter``; ``on_built`` gets
    each finished build's result. A failed build raises its own error: that message is the
    cell's."""

    def build_cell(cell: Cell, out: Path) -> CellOutput:
        request = dataclasses.replace(
            options,
            recipe=cell.recipe,
            torch=cell.torch,
            arch=cell.arch,
            python=cell.python,
            out=out,
            plan_only=False,
        )
        result = build(request, reporter)
        assert result.built is not None and result.log is not None  # not a plan-only request
        if on_built is not None:
            on_built(result)
        return CellOutput(result.built.wheel, result.built.provenance)

    return build_cell
