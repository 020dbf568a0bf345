"""Finding recipes: the recipe files of the recipe folders, and one recipe by name or path
(or the newest PyTorch recipe when none is named)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path

from archwheel.errors import UsageError
from archwheel.facts.catalog import CudaFacts
from archwheel.facts.pytorch_official import load_official
from archwheel.wheelbuild.recipes.recipe import load_recipe
from archwheel.wheelbuild.recipes.recipe_model import Recipe


def _pins_known(recipe: Recipe) -> bool:
    if recipe.repair is None or recipe.repair.pins != "official":
        return True
    return load_official().variant(recipe.version, str(recipe.toolchain.cuda)) is not None


def recipe_files(directories: Iterable[Path]) -> list[Path]:
    """The ``*.toml`` files of each existing folder, sorted per folder, in the folders' order."""
    files: list[Path] = []
    for directory in directories:
        if directory.is_dir():
            files.extend(sorted(directory.glob("*.toml")))
    return files


def find_recipe(name_or_path: str | None, directories: Iterable[Path], facts: CudaFacts) -> Recipe:
    """A recipe by name (file stem or ``[recipe] name``) or path; None picks the newest PyTorch."""
    dirs = list(directories)
    if name_or_path and (name_or_path.endswith(".toml") or "/" in name_or_path):
        return load_recipe(Path(name_or_path), facts)
    files = recipe_files(dirs)
    if not files:
        where = ", ".join(str(d) for d in dirs) or "(none)"
        raise UsageError(f"no recipes found in {where}", hint="set ARCHWHEEL_RECIPES to a folder")
    if name_or_path is None:
        recipes = [load_recipe(f, facts) for f in files]
        # Not a recipe whose [repair] pins = "official" has no pin table yet (it cannot build).
        pytorch = [r for r in recipes if r.kind == "pytorch" and _pins_known(r)]
        if not pytorch:
            raise UsageError("no PyTorch recipe found; pass --recipe NAME")
        return max(pytorch, key=lambda r: r.sort_key())
    for f in files:
        if f.stem == name_or_path:
            return load_recipe(f, facts)
    for f in files:
        recipe = load_recipe(f, facts)
        if recipe.name == name_or_path:
            return recipe
    names = sorted(f.stem for f in files)
    close = difflib.get_close_matches(name_or_path, names, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}?" if close else f"known recipes: {', '.join(names)}"
    raise UsageError(f"unknown recipe {name_or_path!r}", hint=hint)
