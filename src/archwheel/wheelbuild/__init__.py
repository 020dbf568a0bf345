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
    from archwheel.wheelbuild.baseimage import DEFAULT_SUITE, MIRROR_ENV, BaseImage
    from archwheel.wheelbuild.jobs import MAX_JOBS, check_jobs
    from archwheel.wheelbuild.official import OfficialComparison
    from archwheel.wheelbuild.output import BuildOutput
    from archwheel.wheelbuild.plan import (
        DEFAULT_CCACHE_SIZE,
        DEFAULT_CCACHE_VOLUME,
        OLD_CCACHE_VOLUME,
        BuildPlan,
        CheckedArchList,
    )
    from archwheel.wheelbuild.provenance import provenance_path
    from archwheel.wheelbuild.recipe_summary import (
        ListedRecipe,
        RecipeSummary,
        list_recipes,
        summarize_recipes,
    )
    from archwheel.wheelbuild.remote_cache import CACHE_URL_ENV, CacheUrl, parse_cache_url
    from archwheel.wheelbuild.repair import RepairSpec
    from archwheel.wheelbuild.runner import BuiltWheel, smoke_snippet_path
    from archwheel.wheelbuild.usecase import (
        BaseImageRequest,
        BuildReporter,
        BuildRequest,
        BuildResult,
        LogOnly,
        PipRequest,
        build_wheel,
        compare_to_official,
        log_header,
        make_base_image,
        with_git_mirrors,
    )

# name -> the module that defines it
_WHERE = {
    "DEFAULT_SUITE": "baseimage",
    "MIRROR_ENV": "baseimage",
    "BaseImage": "baseimage",
    "MAX_JOBS": "jobs",
    "check_jobs": "jobs",
    "OfficialComparison": "official",
    "BuildOutput": "output",
    "DEFAULT_CCACHE_SIZE": "plan",
    "DEFAULT_CCACHE_VOLUME": "plan",
    "OLD_CCACHE_VOLUME": "plan",
    "BuildPlan": "plan",
    "CheckedArchList": "plan",
    "provenance_path": "provenance",
    "ListedRecipe": "recipe_summary",
    "RecipeSummary": "recipe_summary",
    "list_recipes": "recipe_summary",
    "summarize_recipes": "recipe_summary",
    "CACHE_URL_ENV": "remote_cache",
    "CacheUrl": "remote_cache",
    "parse_cache_url": "remote_cache",
    "RepairSpec": "repair",
    "BuiltWheel": "runner",
    "smoke_snippet_path": "runner",
    "BaseImageRequest": "usecase",
    "BuildReporter": "usecase",
    "BuildRequest": "usecase",
    "BuildResult": "usecase",
    "LogOnly": "usecase",
    "PipRequest": "usecase",
    "build_wheel": "usecase",
    "compare_to_official": "usecase",
    "log_header": "usecase",
    "make_base_image": "usecase",
    "with_git_mirrors": "usecase",
}

__all__ = [
    "CACHE_URL_ENV",
    "DEFAULT_CCACHE_SIZE",
    "DEFAULT_CCACHE_VOLUME",
    "DEFAULT_SUITE",
    "MAX_JOBS",
    "MIRROR_ENV",
    "OLD_CCACHE_VOLUME",
    "BaseImage",
    "BaseImageRequest",
    "BuildOutput",
    "BuildPlan",
    "BuildReporter",
    "BuildRequest",
    "BuildResult",
    "BuiltWheel",
    "CacheUrl",
    "CheckedArchList",
    "ListedRecipe",
    "LogOnly",
    "OfficialComparison",
    "PipRequest",
    "RecipeSummary",
    "RepairSpec",
    "build_wheel",
    "check_jobs",
    "compare_to_official",
    "list_recipes",
    "log_header",
    "make_base_image",
    "parse_cache_url",
    "provenance_path",
    "smoke_snippet_path",
    "summarize_recipes",
    "with_git_mirrors",
]


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
