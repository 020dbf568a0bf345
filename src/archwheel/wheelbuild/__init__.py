"""The build use case: a recipe and an arch list in, an audited wheel out, built in containers.

``build_wheel(BuildRequest(...)) -> BuildResult`` plans a build and runs it (``usecase.py``);
``compare_to_official``, ``list_recipes``, ``summarize_recipes`` and ``make_base_image`` are the
calls beside it. The names below are the floor's public entry points; they are bound lazily
(PEP 562), so that importing one module of the floor does not import the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archwheel._lazy import lazy_exports

if TYPE_CHECKING:
    from archwheel.wheelbuild.compile.dist_farm import dist_farm_option, parse_scheduler_url
    from archwheel.wheelbuild.compile.jobs import MAX_JOBS, check_jobs
    from archwheel.wheelbuild.compile.nvcc_progress import CompileProgress
    from archwheel.wheelbuild.compile.remote_cache import CACHE_URL_ENV, CacheUrl, parse_cache_url
    from archwheel.wheelbuild.images.baseimage import DEFAULT_SUITE, MIRROR_ENV, BaseImage
    from archwheel.wheelbuild.planning.plan import (
        DEFAULT_CCACHE_SIZE,
        DEFAULT_CCACHE_VOLUME,
        OLD_CCACHE_VOLUME,
        BuildPlan,
        CheckedArchList,
    )
    from archwheel.wheelbuild.planning.recipe_summary import (
        ListedRecipe,
        RecipeSummary,
        list_recipes,
        summarize_recipes,
    )
    from archwheel.wheelbuild.run.kept_tree import kept_trees, remove_kept
    from archwheel.wheelbuild.run.output import BuildOutput
    from archwheel.wheelbuild.run.provenance import provenance_path
    from archwheel.wheelbuild.runner import BuiltWheel, smoke_snippet_path
    from archwheel.wheelbuild.usecase import (
        BaseImageRequest,
        BuildReporter,
        BuildRequest,
        BuildResult,
        ConfiguredBuild,
        LogOnly,
        PipRequest,
        build_wheel,
        compare_to_official,
        log_header,
        make_base_image,
        with_git_mirrors,
    )
    from archwheel.wheelbuild.wheel.official import OfficialComparison
    from archwheel.wheelbuild.wheel.repair import RepairSpec


__all__, __getattr__, __dir__ = lazy_exports(__name__)
