"""The matrix use case: plan a build matrix, build the missing cells, and publish audited wheels.

``index`` publishes wheels into a PEP 503 simple index (plus find-links pages per torch+CUDA)
atomically, auditing each wheel itself; ``plan`` turns a matrix (recipes x torch x Python x arch
lists, less exclusions) into cells and says which are already in the index; ``run`` builds the
missing cells through a builder passed in (this floor never imports ``wheelbuild/``: the
interfaces floor injects the build use case) and publishes each one that passed; ``export``
writes a CI workflow of the cells. docs/matrix.md has the design.

The names below are the floor's public entry points, bound lazily (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from archwheel.matrix.export import EXPORTS, ExportOptions
    from archwheel.matrix.export import export as export_workflow
    from archwheel.matrix.index import (
        Candidate,
        IndexEntry,
        Landing,
        PublishResult,
        candidates_from,
        publish,
        read_index,
    )
    from archwheel.matrix.plan import (
        MAX_MATRIX_CELLS,
        Action,
        Cell,
        MatrixPlan,
        MatrixSpec,
        PlannedCell,
        RecipeFacts,
        load_matrix,
        make_plan,
        parse_exclusion,
    )
    from archwheel.matrix.run import (
        CellBuilder,
        CellOutput,
        CellResult,
        MatrixResult,
        Verdict,
        run_matrix,
    )

# name -> the module that defines it (``module:attribute`` where the name differs)
_EXPORTS = {
    "EXPORTS": "archwheel.matrix.export",
    "ExportOptions": "archwheel.matrix.export",
    # ``export`` is also the module's name (importing it binds the module here): an alias
    "export_workflow": "archwheel.matrix.export:export",
    "Candidate": "archwheel.matrix.index",
    "IndexEntry": "archwheel.matrix.index",
    "Landing": "archwheel.matrix.index",
    "PublishResult": "archwheel.matrix.index",
    "candidates_from": "archwheel.matrix.index",
    "publish": "archwheel.matrix.index",
    "read_index": "archwheel.matrix.index",
    "MAX_MATRIX_CELLS": "archwheel.matrix.plan",
    "Action": "archwheel.matrix.plan",
    "Cell": "archwheel.matrix.plan",
    "MatrixPlan": "archwheel.matrix.plan",
    "MatrixSpec": "archwheel.matrix.plan",
    "PlannedCell": "archwheel.matrix.plan",
    "RecipeFacts": "archwheel.matrix.plan",
    "load_matrix": "archwheel.matrix.plan",
    "make_plan": "archwheel.matrix.plan",
    "parse_exclusion": "archwheel.matrix.plan",
    "CellBuilder": "archwheel.matrix.run",
    "CellOutput": "archwheel.matrix.run",
    "CellResult": "archwheel.matrix.run",
    "MatrixResult": "archwheel.matrix.run",
    "Verdict": "archwheel.matrix.run",
    "run_matrix": "archwheel.matrix.run",
}

__all__ = [
    "EXPORTS",
    "MAX_MATRIX_CELLS",
    "Action",
    "Candidate",
    "Cell",
    "CellBuilder",
    "CellOutput",
    "CellResult",
    "ExportOptions",
    "IndexEntry",
    "Landing",
    "MatrixPlan",
    "MatrixResult",
    "MatrixSpec",
    "PlannedCell",
    "PublishResult",
    "RecipeFacts",
    "Verdict",
    "candidates_from",
    "export_workflow",
    "load_matrix",
    "make_plan",
    "parse_exclusion",
    "publish",
    "read_index",
    "run_matrix",
]


def __getattr__(name: str) -> Any:
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attribute = where.partition(":")
    value = getattr(importlib.import_module(module), attribute or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
