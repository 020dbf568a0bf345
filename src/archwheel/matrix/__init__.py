"""The matrix use case: plan a build matrix, build the missing cells, and publish audited wheels.

``index`` publishes wheels into a PEP 503 simple index (plus find-links pages per torch+CUDA)
atomically, auditing each wheel itself; ``plan`` turns a matrix (recipes x torch x Python x arch
lists, less exclusions) into cells and says which are already in the index; ``cells`` reads the
recipes it plans with and builds each cell with the build use case (``wheelbuild.build_wheel``,
the floor below; another builder may be passed in, as the tests do); ``run`` builds the missing
cells with a cell builder and publishes each one that passed; ``export`` writes a CI workflow of
the cells. docs/matrix.md has the design.

The names below are the floor's public entry points, bound lazily (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archwheel._lazy import lazy_exports

if TYPE_CHECKING:
    from archwheel.matrix.cells import BuildWheel, build_cells, read_recipes
    from archwheel.matrix.entry import IndexEntry
    from archwheel.matrix.export import (
        DIST_TOKEN_FILE_ENV,
        DIST_TOKEN_SECRET,
        EXPORTS,
        ExportOptions,
    )
    from archwheel.matrix.export import export as export_workflow
    from archwheel.matrix.index import (
        Candidate,
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
    from archwheel.matrix.usecase import (
        MatrixOutcome,
        MatrixRequest,
        MatrixShow,
        PublishRequest,
        cell_builder,
        matrix,
        publish_wheels,
        recheck_published,
    )
    from archwheel.matrix.variants import (
        expected_properties,
        matrix_publisher,
        publish_variants,
        variant_preview,
    )


__all__, __getattr__, __dir__ = lazy_exports(__name__)
