"""Build plans made without a container: a recipe, a stand-in source, fixed host resources."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from archwheel.effects.pipconfig import PipSettings
from archwheel.facts.catalog import load_facts
from archwheel.wheelbuild.compile.jobs import GIB, HostResources, choose_jobs
from archwheel.wheelbuild.planning.plan import BuildOptions, BuildPlan, check_arch_list, make_plan
from archwheel.wheelbuild.recipes.recipe_model import Recipe
from archwheel.wheelbuild.sources.source import ResolvedSource

FACTS = load_facts()


def fake_source(recipe: Recipe, epoch: int = 1_700_000_000) -> ResolvedSource:
    return ResolvedSource(
        spec=recipe.source,
        root=Path("/checkout/src"),
        commit="c" * 40,
        dirty=False,
        content_sha256="d" * 64,
        files=("a.cu", "pyproject.toml"),
        source_date_epoch=epoch,
        epoch_origin="test",
    )


def plan_for(recipe: Recipe, arch: str = "8.0;9.0", **options: object) -> BuildPlan:
    opts = replace(BuildOptions(out=Path("/out")), **options)  # type: ignore[arg-type]
    jobs = choose_jobs(HostResources(cpus=8, memory_bytes=6 * GIB), 2.0)
    pip = PipSettings(
        extra_index_urls=("file:///opt/pypi/simple", "https://mirror.example/simple"),
        find_links=("/opt/wheels",),
        ca_bundle=Path("/etc/ssl/certs/ca-certificates.crt"),
    )
    return make_plan(
        recipe,
        check_arch_list(recipe, arch, facts=FACTS),
        opts,
        fake_source(recipe),
        jobs=jobs,
        pip=pip,
        user=(1234, 567),
    )
