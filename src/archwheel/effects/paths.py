"""Where archwheel finds its recipes, its builder image files and its caches.

Recipes (``recipes/*.toml``) and the builder image files (``docker/``) live in the archwheel
checkout, beside the example extension the example recipe points at. They are found through
``ARCHWHEEL_ROOT``, or by walking up from the installed package (an editable install, as every
nox session makes) or from the current folder. ``ARCHWHEEL_RECIPES`` adds recipe folders
(``os.pathsep``-separated) searched before the checkout's own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from archwheel.errors import ToolError

MARKERS = ("recipes", "docker/Dockerfile")


def _is_root(path: Path) -> bool:
    return all((path / marker).exists() for marker in MARKERS)


def project_root(environ: Mapping[str, str] | None = None) -> Path:
    """The archwheel checkout holding ``recipes/`` and ``docker/Dockerfile``."""
    environ = os.environ if environ is None else environ
    explicit = environ.get("ARCHWHEEL_ROOT")
    if explicit:
        root = Path(explicit).resolve()
        if not _is_root(root):
            raise ToolError(
                f"ARCHWHEEL_ROOT={explicit} does not hold recipes/ and docker/Dockerfile"
            )
        return root
    for start in (Path(__file__).resolve().parent, Path.cwd().resolve()):
        for candidate in (start, *start.parents):
            if _is_root(candidate):
                return candidate
    raise ToolError(
        "cannot find the archwheel checkout (recipes/ and docker/Dockerfile)",
        hint="run from the archwheel repository (nox -s build) or set ARCHWHEEL_ROOT",
    )


def recipe_dirs(environ: Mapping[str, str] | None = None) -> list[Path]:
    environ = os.environ if environ is None else environ
    dirs = [Path(p) for p in environ.get("ARCHWHEEL_RECIPES", "").split(os.pathsep) if p]
    try:
        dirs.append(project_root(environ) / "recipes")
    except ToolError:
        if not dirs:
            raise
    return dirs


def docker_dir(environ: Mapping[str, str] | None = None) -> Path:
    return project_root(environ) / "docker"


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """archwheel's own cache: ``$ARCHWHEEL_CACHE/archwheel``, else ``~/.cache/archwheel``."""
    environ = os.environ if environ is None else environ
    base = environ.get("ARCHWHEEL_CACHE") or environ.get("XDG_CACHE_HOME")
    root = Path(base) if base else Path.home() / ".cache"
    return (root / "archwheel").resolve()
