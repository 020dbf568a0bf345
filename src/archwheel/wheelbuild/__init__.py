"""The build use case: a recipe and an arch list in, an audited wheel out, built in containers.

``build_wheel(BuildRequest(...)) -> BuildResult`` plans a build and runs it (``usecase.py``);
``compare_to_official``, ``list_recipes``, ``summarize_recipes`` and ``make_base_image`` are the
calls beside it. The names below are the floor's public entry points; they are bound lazily
(PEP 562), so that importing one module of the floor does not import the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from archwheel.effects.engine import ENGINES, EngineName
    from archwheel.wheelbuild.baseimage import DEFAULT_SUITE, MIRROR_ENV, BaseImage
    from archwheel.wheelbuild.jobs import MAX_JOBS, check_jobs
    from archwheel.wheelbuild.official import OfficialComparison
    from archwheel.wheelbuild.output import BuildOutput
    from archwheel.wheelbuild.plan import (
        DEFAULT_CCACHE_SIZE,
        DEFAULT_CCACHE_VOLUME,
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
_EXPORTS = {
    "ENGINES": "archwheel.effects.engine",  # the engines a build runs in (a request's engine)
    "EngineName": "archwheel.effects.engine",
    "DEFAULT_SUITE": "archwheel.wheelbuild.baseimage",
    "MIRROR_ENV": "archwheel.wheelbuild.baseimage",
    "BaseImage": "archwheel.wheelbuild.baseimage",
    "MAX_JOBS": "archwheel.wheelbuild.jobs",
    "check_jobs": "archwheel.wheelbuild.jobs",
    "OfficialComparison": "archwheel.wheelbuild.official",
    "BuildOutput": "archwheel.wheelbuild.output",
    "DEFAULT_CCACHE_SIZE": "archwheel.wheelbuild.plan",
    "DEFAULT_CCACHE_VOLUME": "archwheel.wheelbuild.plan",
    "BuildPlan": "archwheel.wheelbuild.plan",
    "CheckedArchList": "archwheel.wheelbuild.plan",
    "provenance_path": "archwheel.wheelbuild.provenance",
    "ListedRecipe": "archwheel.wheelbuild.recipe_summary",
    "RecipeSummary": "archwheel.wheelbuild.recipe_summary",
    "list_recipes": "archwheel.wheelbuild.recipe_summary",
    "summarize_recipes": "archwheel.wheelbuild.recipe_summary",
    "CACHE_URL_ENV": "archwheel.wheelbuild.remote_cache",
    "CacheUrl": "archwheel.wheelbuild.remote_cache",
    "parse_cache_url": "archwheel.wheelbuild.remote_cache",
    "RepairSpec": "archwheel.wheelbuild.repair",
    "BuiltWheel": "archwheel.wheelbuild.runner",
    "smoke_snippet_path": "archwheel.wheelbuild.runner",
    "BaseImageRequest": "archwheel.wheelbuild.usecase",
    "BuildReporter": "archwheel.wheelbuild.usecase",
    "BuildRequest": "archwheel.wheelbuild.usecase",
    "BuildResult": "archwheel.wheelbuild.usecase",
    "LogOnly": "archwheel.wheelbuild.usecase",
    "PipRequest": "archwheel.wheelbuild.usecase",
    "build_wheel": "archwheel.wheelbuild.usecase",
    "compare_to_official": "archwheel.wheelbuild.usecase",
    "log_header": "archwheel.wheelbuild.usecase",
    "make_base_image": "archwheel.wheelbuild.usecase",
    "with_git_mirrors": "archwheel.wheelbuild.usecase",
}

__all__ = [
    "CACHE_URL_ENV",
    "DEFAULT_CCACHE_SIZE",
    "DEFAULT_CCACHE_VOLUME",
    "DEFAULT_SUITE",
    "ENGINES",
    "MAX_JOBS",
    "MIRROR_ENV",
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
    "EngineName",
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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
