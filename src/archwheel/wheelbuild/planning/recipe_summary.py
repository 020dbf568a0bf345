"""The recipes, read for a listing or for a plan of many builds (a matrix), without building.

``list_recipes`` reads every recipe of the recipe folders (``build --list-recipes``);
``summarize_recipes`` reads the named recipes and checks each against every torch, arch list and
Python it will be built with (a list its toolkit cannot build, or a Python no base image offers,
fails here, exit 2), says which base image each Python builds on, and what identifies each
recipe before a build: the recipe's sha256 and its source's digest. The matrix use
case plans with these summaries (``matrix.read_recipes``); it never reads a recipe itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from archwheel.effects.settings import Settings
from archwheel.facts.catalog import load_facts
from archwheel.wheelbuild.images.python_base import choose_base
from archwheel.wheelbuild.planning.plan import check_arch_list
from archwheel.wheelbuild.recipes.recipe import load_recipe
from archwheel.wheelbuild.recipes.recipe_lookup import find_recipe, recipe_files
from archwheel.wheelbuild.recipes.recipe_model import Recipe
from archwheel.wheelbuild.recipes.recipe_torch import with_torch
from archwheel.wheelbuild.sources.source import resolve_source


@dataclass(frozen=True)
class ListedRecipe:
    """One recipe file of the recipe folders, read."""

    path: Path  # as found in its folder
    recipe: Recipe


def list_recipes(settings: Settings) -> tuple[ListedRecipe, ...]:
    """Every recipe of the recipe folders (``settings.recipes``, then the shipped ones)."""
    facts = load_facts()
    found = recipe_files(settings.recipe_dirs())
    return tuple(ListedRecipe(p, load_recipe(p, facts)) for p in found)


@dataclass(frozen=True)
class RecipeSummary:
    """What a plan of many builds (the matrix) needs to know of a recipe, read and checked."""

    name: str
    sha256: str  # of the recipe file
    python_versions: tuple[str, ...]
    default_arch: str
    cuda: str | None = None  # "13.0"
    source_digest: str | None = None  # of the source, when known before building
    # The torch the recipe pins ("2.14.1"); None: it is not built against torch, and a matrix's
    # torch axis does not apply to it (one cell per Python and arch list, torch None).
    torch: str | None = None
    # Whether the wheel's file name carries the torch version (a local label such as
    # +pt2.14.1cu130); without it two torch cells of one Python make one file name.
    torch_in_name: bool = True
    # [torch] loads_with: the releases one wheel of the recipe should serve (its build checks
    # each with can-load and claims those that pass); a matrix's torch axis values among them
    # (and the recipe's own torch) make one cell, built against the recipe's own torch.
    loads_with: tuple[str, ...] = ()
    # The base image each Python the plan builds runs on (python_base.choose_base: the one
    # the build itself will choose, e.g. archwheel/debian:trixie for 3.13 of a bookworm recipe).
    bases: Mapping[str, str] = field(default_factory=dict)


def summarize_recipes(
    names: Sequence[str],
    settings: Settings,
    *,
    torch: Sequence[str] = (),
    arch: Sequence[str] = (),
    python: Sequence[str] = (),
) -> dict[str, RecipeSummary]:
    """The recipes ``names``, each checked against each torch of ``torch`` (for a recipe that
    pins one: it replaces the pin, and its CUDA must be the recipe's), each arch list of
    ``arch`` (none: the recipe's default) and each Python of ``python`` that it lists (none:
    its first), whose base image is chosen here as the build will choose it (a Python no base
    offers: ``RecipeError``, exit 2, before any container); the recipe folders and the cache
    of ``settings``."""
    facts = load_facts()
    found: dict[str, RecipeSummary] = {}
    for name in names:
        recipe = find_recipe(name, settings.recipe_dirs(), facts)
        pin = recipe.torch.pin
        variants = [with_torch(recipe, t) for t in torch] if pin is not None else []
        lists: list[str | None] = [*arch] or [None]
        for variant in variants or [recipe]:
            for text in lists:
                check_arch_list(variant, text, facts)  # a list it cannot build: exit 2
        # A Python it does not list is the plan's excluded cell; the others need a base.
        pythons = [p for p in python if p in recipe.python_versions] or (
            [] if python else list(recipe.python_versions[:1])
        )
        bases = {p: choose_base(recipe, p).image for p in pythons}
        found[name] = RecipeSummary(
            name=name,
            sha256=recipe.sha256,
            python_versions=recipe.python_versions,
            default_arch=str(recipe.arch.default),
            cuda=str(recipe.toolchain.cuda),
            source_digest=source_digest(recipe, settings.cache),
            torch=str(pin.version) if pin is not None else None,
            torch_in_name=recipe.torch.local_version is not None,
            loads_with=recipe.torch.loads_with,
            bases=bases,
        )
    return found


def source_digest(recipe: Recipe, cache: Path) -> str | None:
    """What identifies the source before a build: a path's content hash (the one provenance
    records: git-tracked plus untracked-not-ignored files), an sdist's sha256; None for a git
    ref (resolving it needs the network; the ref itself is in the recipe's hash)."""
    if recipe.source.kind == "path":
        resolved = resolve_source(
            recipe.source, cache, recipe_epoch=recipe.source_date_epoch, echo=None
        )
        return f"path:{resolved.content_sha256}"
    if recipe.source.kind == "sdist" and recipe.source.sha256:
        return f"sdist:{recipe.source.sha256}"
    return None
