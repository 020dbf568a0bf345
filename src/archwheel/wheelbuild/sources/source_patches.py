"""``[[source.patches]]``: unified diffs applied to a resolved source on the host, before any
container sees it.

A team steers a project that hard-codes its archs (or needs a fix) without forking it: the
recipe names each diff and its sha256 (checked when the recipe loads), and the build mounts a
patched copy of the source instead of the source. The copy is made once per (source content,
patches) under the cache folder (``sources/patched/<key>/tree``), in a temporary folder renamed
into place when every patch applied, so a failed or killed run never leaves a half-patched tree
that a later build would trust. The diffs are applied in order by ``git apply -p1`` (all or
nothing per patch; paths outside the tree and paths through symbolic links are refused by git
itself), with ``GIT_CEILING_DIRECTORIES`` so that git never takes a repository above the copy
(the cache may lie inside a checkout) for the tree to patch. A hunk that does not apply is a
``RecipeError`` (exit 2) naming the patch and git's own words.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from archwheel.effects.owner import owned_tempdir, remove_owned
from archwheel.effects.process import Echo, last_line, run_program
from archwheel.errors import RecipeError
from archwheel.wheelbuild.recipes.recipe_model import SourcePatch

PATCHED = "patched"
_COMPLETE = ".archwheel-complete"


def patch_key(content_sha256: str, patches: Sequence[SourcePatch]) -> str:
    """The cache key of a patched tree: the source's content hash and each patch's sha256."""
    identity = content_sha256 + "".join(f"\n{p.sha256}" for p in patches)
    return hashlib.sha256(identity.encode()).hexdigest()[:24]


def _copy_files(root: Path, files: Sequence[str], target: Path) -> None:
    for relative in files:
        source = root / relative
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            destination.symlink_to(source.readlink())
        else:
            shutil.copy2(source, destination)


def listing(tree: Path) -> list[str]:
    """Every file and symbolic link under ``tree`` (links to folders are not followed)."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(tree):
        base = Path(dirpath)
        for name in list(dirnames):
            if (base / name).is_symlink():
                found.append((base / name).relative_to(tree).as_posix())
                dirnames.remove(name)
        dirnames.sort()
        found.extend((base / name).relative_to(tree).as_posix() for name in filenames)
    return sorted(found)


def patched_tree(
    root: Path,
    files: Sequence[str],
    content_sha256: str,
    patches: Sequence[SourcePatch],
    *,
    cache: Path,
    echo: Echo | None,
) -> tuple[Path, list[str]]:
    """The patched copy of ``root``'s ``files`` (made here the first time): its folder and its
    files. ``RecipeError`` when a patch does not apply."""
    final = cache / "sources" / PATCHED / patch_key(content_sha256, patches)
    tree = final / "tree"
    if (final / _COMPLETE).is_file() and tree.is_dir():
        return tree, listing(tree)
    final.parent.mkdir(parents=True, exist_ok=True)
    staged = owned_tempdir("archwheel-patch-", final.parent)
    try:
        _copy_files(root, files, staged / "tree")
        for patch in patches:
            result = run_program(
                ["git", "apply", "--verbose", "-p1", str(patch.path)],
                cwd=staged / "tree",
                env={"GIT_CEILING_DIRECTORIES": str(staged)},
                echo=echo,
                check=False,
                what=f"git apply {patch.path.name}",
            )
            if result.returncode != 0:
                why = last_line(result.stderr or result.stdout)
                raise RecipeError(
                    f"patch {patch.path.name} does not apply to the source: {why}",
                    hint="make it against the source the recipe names (diff -u, or git diff "
                    "in a checkout of that release), paths one folder deep (-p1)",
                )
        (staged / _COMPLETE).write_text("complete\n")
        try:
            staged.rename(final)
            (staged.parent / (staged.name + ".owner")).unlink(missing_ok=True)
        except OSError:
            if not (final / _COMPLETE).is_file():
                raise
    finally:
        if staged.exists():
            remove_owned(staged)
    return tree, listing(tree)
