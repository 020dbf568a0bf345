"""Build the missing cells of a plan, one after the other, and publish each that passes.

The builder is passed in (``cells.build_cells``: the build use case; the tests pass their own):
it gets the cell and an empty folder, and returns the wheel (and its provenance) it left there,
or raises. A cell that fails (its build raises, or the index refuses
its wheel because archwheel's audit does not pass it) publishes nothing and does not stop the
cells after it. Each passing cell is published at once, in its own atomic step, so a matrix
stopped halfway keeps what it finished and a rerun skips it.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from archwheel.errors import ArchwheelError
from archwheel.exit_codes import EXIT_BUILD, EXIT_OK
from archwheel.facts.arch import ArchList
from archwheel.matrix.index import Candidate, Landing, PublishResult, publish
from archwheel.matrix.plan import Action, Cell, MatrixPlan, PlannedCell


@dataclass(frozen=True)
class CellOutput:
    """What a builder made for one cell."""

    wheel: Path
    provenance: Path | None = None


class Publisher(Protocol):
    """Publishes a cell's wheel: the plain index's ``publish``, or ``publish_variants``."""

    def __call__(
        self, index: Path, candidates: list[Candidate], *, landing: Landing | None
    ) -> PublishResult: ...


class CellBuilder(Protocol):
    """Builds one cell into ``out``; raises ``ArchwheelError`` when the build fails."""

    def __call__(self, cell: Cell, out: Path) -> CellOutput: ...


class Verdict(str, Enum):
    """What became of one cell of a matrix run: published, skipped, excluded, failed to build, or
    refused by the index's audit."""

    PUBLISHED = "published"
    SKIPPED = "skipped"  # already in the index with the same inputs
    EXCLUDED = "excluded"
    BUILD_FAILED = "build failed"
    REFUSED = "refused"  # built, but the index's audit refused the wheel

    @property
    def passed(self) -> bool:
        """True for the verdicts that do not fail the matrix (published, skipped, excluded)."""
        return self in (Verdict.PUBLISHED, Verdict.SKIPPED, Verdict.EXCLUDED)


@dataclass(frozen=True)
class CellResult:
    """One cell's outcome: its verdict with the message to show, the wheels it published or found,
    and how long it took."""

    planned: PlannedCell
    verdict: Verdict
    message: str = ""
    wheels: tuple[str, ...] = ()
    seconds: float = 0.0

    def to_json_dict(self) -> dict[str, Any]:
        """The cell's outcome as ``matrix --format json`` lists it (the matrix-result schema)."""
        return {
            **self.planned.to_json_dict(),
            "verdict": self.verdict.value,
            "message": self.message,
            "wheels": list(self.wheels),
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True)
class MatrixResult:
    """Every cell's outcome of one matrix run into ``index``: what ``matrix`` prints and
    exits with."""

    index: Path
    cells: tuple[CellResult, ...]

    @property
    def ok(self) -> bool:
        """True when every cell passed (published, skipped or excluded)."""
        return all(c.verdict.passed for c in self.cells)

    @property
    def exit_code(self) -> int:
        """0 when every cell passed, 5 when one failed to build or was refused
        (docs/exit-codes.md)."""
        return int(EXIT_OK if self.ok else EXIT_BUILD)

    def count(self, verdict: Verdict) -> int:
        """How many cells got ``verdict``: the summary line's figures."""
        return sum(1 for c in self.cells if c.verdict is verdict)

    def to_json_dict(self) -> dict[str, Any]:
        """The run as ``matrix --format json`` prints it (the matrix-result schema)."""
        return {
            "schema_version": 1,
            "index": str(self.index),
            "ok": self.ok,
            "exit_code": self.exit_code,
            "cells": [c.to_json_dict() for c in self.cells],
        }


def _build_one(
    planned: PlannedCell,
    builder: CellBuilder,
    index: Path,
    work: Path,
    *,
    cuda: str | None,
    landing: Landing | None,
    publisher: Publisher | None = None,
) -> CellResult:
    out = work / planned.key[:16]
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    started = time.monotonic()
    try:
        made = builder(planned.cell, out)
    except ArchwheelError as exc:
        return CellResult(planned, Verdict.BUILD_FAILED, exc.one_line(),
                          seconds=time.monotonic() - started)  # fmt: skip
    except Exception as exc:  # a builder bug must not stop the other cells
        return CellResult(
            planned, Verdict.BUILD_FAILED, f"internal error: {type(exc).__name__}: {exc}",
            seconds=time.monotonic() - started,
        )  # fmt: skip
    candidate = Candidate(
        made.wheel,
        made.provenance,
        expect=ArchList.parse(planned.cell.arch),
        cell_key=planned.key,
        torch=planned.cell.torch,
        cuda=cuda,
    )
    result = (publisher or publish)(index, [candidate], landing=landing)
    seconds = time.monotonic() - started
    if result.refused:
        return CellResult(planned, Verdict.REFUSED, result.refused[0].reason, seconds=seconds)
    files = tuple(e.file for e in (*result.published, *result.unchanged))
    return CellResult(planned, Verdict.PUBLISHED, "audited and published", files, seconds)


def run_matrix(
    plan: MatrixPlan,
    builder: CellBuilder,
    index: Path,
    work: Path,
    *,
    on_cell: Callable[[CellResult], None] | None = None,
    landing: Landing | None = None,
    publisher: Publisher | None = None,
) -> MatrixResult:
    """Build every cell the plan builds; report every cell with its verdict (each published
    by ``publisher``: default, the plain index's ``publish``)."""
    results: list[CellResult] = []
    for planned in plan.cells:
        if planned.action is Action.SKIP:
            result = CellResult(planned, Verdict.SKIPPED, planned.reason, planned.existing)
        elif planned.action is Action.EXCLUDED:
            result = CellResult(planned, Verdict.EXCLUDED, planned.reason)
        else:
            recipe = plan.recipes.get(planned.cell.recipe)
            cuda = recipe.cuda if recipe else None
            result = _build_one(
                planned, builder, index, work, cuda=cuda, landing=landing, publisher=publisher
            )
        results.append(result)
        if on_cell is not None:
            on_cell(result)
    return MatrixResult(index, tuple(results))
