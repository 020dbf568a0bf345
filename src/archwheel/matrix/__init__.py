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

from typing import TYPE_CHECKING

from archwheel._lazy import lazy_exports

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
    from archwheel.matrix.layout import published_tree, unfinished_publishes
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
    from archwheel.matrix.recheck import RecheckReport, recheck_index
    from archwheel.matrix.run import (
        CellBuilder,
        CellOutput,
        CellResult,
        MatrixResult,
        Verdict,
        run_matrix,
    )

# name -> the module that defines it (``module:attribute`` where the name differs)
_WHERE = {
    "EXPORTS": "export",
    "ExportOptions": "export",
    # ``export`` is also the module's name (importing it binds the module here): an alias
    "export_workflow": "export:export",
    "Candidate": "index",
    "IndexEntry": "index",
    "Landing": "index",
    "PublishResult": "index",
    "candidates_from": "index",
    "publish": "index",
    "unfinished_publishes": "layout",
    "published_tree": "layout",
    "read_index": "index",
    "MAX_MATRIX_CELLS": "plan",
    "Action": "plan",
    "Cell": "plan",
    "MatrixPlan": "plan",
    "MatrixSpec": "plan",
    "PlannedCell": "plan",
    "RecipeFacts": "plan",
    "load_matrix": "plan",
    "make_plan": "plan",
    "parse_exclusion": "plan",
    "RecheckReport": "recheck",
    "recheck_index": "recheck",
    "CellBuilder": "run",
    "CellOutput": "run",
    "CellResult": "run",
    "MatrixResult": "run",
    "Verdict": "run",
    "run_matrix": "run",
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
    "RecheckReport",
    "RecipeFacts",
    "Verdict",
    "candidates_from",
    "export_workflow",
    "load_matrix",
    "make_plan",
    "parse_exclusion",
    "publish",
    "published_tree",
    "read_index",
    "recheck_index",
    "run_matrix",
    "unfinished_publishes",
]


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
