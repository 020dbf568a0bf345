"""The matrix use case in one call: ``matrix`` plans a matrix against its index, then exports a
CI workflow, stops at the plan, or builds each missing cell and publishes it;
``recheck_published`` runs ``--recheck`` over a published index; ``publish_wheels`` publishes
wheels built elsewhere.

The commands parse their flags into the frozen requests below, make one of these calls and
render what it returns; what they show while it runs comes through the callbacks they pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archwheel.effects.deadline import NetBudget
from archwheel.effects.engine import EngineName
from archwheel.effects.pipconfig import PipSettings
from archwheel.effects.settings import Settings
from archwheel.facts.arch import ArchList
from archwheel.matrix.cells import BuildWheel, build_cells, read_recipes
from archwheel.matrix.export import ExportOptions, export
from archwheel.matrix.index import (
    Candidate,
    Landing,
    PublishResult,
    candidates_from,
    publish,
    read_index,
)
from archwheel.matrix.layout import published_tree
from archwheel.matrix.plan import MatrixPlan, MatrixSpec, make_plan
from archwheel.matrix.recheck import RecheckReport, recheck_index
from archwheel.matrix.run import CellBuilder, CellResult, MatrixResult, run_matrix
from archwheel.matrix.variants import matrix_publisher, publish_variants, variant_preview
from archwheel.wheelbuild.compile.remote_cache import CacheUrl
from archwheel.wheelbuild.planning.plan import DEFAULT_CCACHE_VOLUME
from archwheel.wheelbuild.run.provenance import provenance_path
from archwheel.wheelbuild.usecase import (
    BuildReporter,
    BuildRequest,
    BuildResult,
    LogOnly,
    PipRequest,
    build_wheel,
)


@dataclass(frozen=True)
class MatrixRequest:
    """A matrix to plan, export, or build and publish into ``index``, with every cell's build
    options: what ``archwheel matrix`` asks of ``matrix``."""

    spec: MatrixSpec
    index: Path
    plan_only: bool
    work: Path
    engine: EngineName
    jobs: int | None
    cache: bool
    export: str | None = None
    cache_url: CacheUrl | None = None
    ccache_volume: str = DEFAULT_CCACHE_VOLUME
    export_options: ExportOptions = field(default_factory=ExportOptions)
    settings: Settings = field(default_factory=Settings)  # archwheel's (recipe folders, cache)
    variants: bool = False
    default_arch: str | None = None
    # a compile farm for every cell (archwheel build --dist-scheduler ...): the token file's
    # path, read by each cell's plan
    dist_scheduler: str | None = None
    dist_token_file: Path | None = None
    dist_required: bool = False

    def build_options(self) -> BuildRequest:
        """Every cell's build request before its recipe, torch, arch list and Python are set:
        the matrix's engine, jobs and compiler caches, pip configured from the host."""
        return BuildRequest(
            jobs=self.jobs,
            engine=self.engine,
            ccache_volume=self.ccache_volume if self.cache else None,
            cache_url=self.cache_url,
            dist_scheduler=self.dist_scheduler,
            dist_token_file=self.dist_token_file,
            dist_required=self.dist_required,
            pip=PipRequest(host_config=True),
            settings=self.settings,
        )


@dataclass(frozen=True)
class MatrixOutcome:
    """What ``matrix`` did: the plan always; with ``--export`` the workflow document; with
    ``--plan --variants`` the variant preview; after a build, each cell's verdict."""

    plan: MatrixPlan
    workflow: dict[str, Any] | None = None
    preview: list[dict[str, Any]] | None = None
    result: MatrixResult | None = None


@dataclass(frozen=True)
class MatrixShow:
    """Where ``matrix`` shows its progress: ``planned`` gets the plan before any cell builds,
    ``cell`` each cell's verdict; ``reporter`` and ``built`` are the default cell builder's
    (each build's output, each finished build's result)."""

    planned: Callable[[MatrixPlan], None] | None = None
    cell: Callable[[CellResult], None] | None = None
    reporter: BuildReporter = field(default_factory=LogOnly)
    built: Callable[[BuildResult], None] | None = None


def cell_builder(
    request: MatrixRequest,
    reporter: BuildReporter,
    *,
    on_built: Callable[[BuildResult], None] | None = None,
    build: BuildWheel = build_wheel,
) -> CellBuilder:
    """The matrix's cell builder with ``request``'s build options: ``build`` (the build use
    case, or a test's stand-in) of each cell, reporting to ``reporter``."""
    return build_cells(request.build_options(), reporter, on_built=on_built, build=build)


def matrix(
    request: MatrixRequest,
    *,
    builder: CellBuilder | None = None,
    show: MatrixShow | None = None,
    landing: Landing | None = None,
) -> MatrixOutcome:
    """Plan ``request``'s matrix against its index; unless it only plans or exports, build each
    missing cell with ``builder`` (None: the build use case) and publish each one that passes,
    rendering the index's landing page with ``landing``."""
    show = show or MatrixShow()
    recipes = read_recipes(request.spec, request.settings)
    plan = make_plan(
        request.spec,
        recipes,
        read_index(request.index),
        variants=request.variants,
        default_arch=request.default_arch,
    )
    if request.export is not None:
        return MatrixOutcome(plan, workflow=export(plan, request.export, request.export_options))
    if request.plan_only:
        preview = variant_preview(plan, request.default_arch) if request.variants else None
        return MatrixOutcome(plan, preview=preview)
    if show.planned is not None:
        show.planned(plan)
    if builder is None:
        builder = cell_builder(request, show.reporter, on_built=show.built)
    result = run_matrix(
        plan,
        builder,
        request.index,
        request.work,
        on_cell=show.cell,
        landing=landing,
        publisher=matrix_publisher(request.default_arch) if request.variants else None,
    )
    return MatrixOutcome(plan, result=result)


def recheck_published(
    index: Path,
    *,
    settings: Settings,
    budget: NetBudget,
    on_event: Callable[[str], None] | None = None,
) -> RecheckReport:
    """``matrix --recheck``: can-load of every published wheel of ``index`` against the torch
    releases that appeared since it was checked. A damaged index is refused before pip is
    asked anything."""
    published_tree(index)
    return recheck_index(
        index,
        pip=PipSettings.from_host().validated(),
        cache=settings.cache,
        on_event=on_event,
        budget=budget,
    )


@dataclass(frozen=True)
class PublishRequest:
    """Wheels built elsewhere to publish into ``index``: the files given (with the provenance
    beside each) and every wheel of the index trees under ``from_index``."""

    index: Path
    wheels: Sequence[Path] = ()
    from_index: Sequence[Path] = ()
    expect: ArchList | None = None
    torch: str | None = None
    cuda: str | None = None
    variants: bool = False
    defaults: Sequence[Path] = ()  # with variants: also published plain


def publish_wheels(request: PublishRequest, *, landing: Landing | None = None) -> PublishResult:
    """Audit ``request``'s wheels and publish those that pass into its index in one atomic
    step (as wheel variants where it asks), each with what its manifest or flags say."""
    candidates = [c for folder in request.from_index for c in candidates_from(folder)]
    for wheel in request.wheels:
        provenance = provenance_path(wheel)
        candidates.append(
            Candidate(
                wheel,
                provenance if provenance.exists() else None,
                expect=request.expect,
                torch=request.torch,
                cuda=request.cuda,
            )
        )
    if not request.variants:
        return publish(request.index, candidates, landing=landing)
    defaults = [
        Candidate(w, expect=request.expect, torch=request.torch, cuda=request.cuda)
        for w in request.defaults
    ]
    return publish_variants(request.index, candidates, defaults=defaults, landing=landing)
