"""Where archwheel finds its recipes, its builder image files and its caches.

Recipes (``recipes/*.toml``) and the builder image files (``docker/``) live in the archwheel
checkout, beside the example extension the example recipe points at. They are found through
``ARCHWHEEL_ROOT``, or by walking up from the installed package (an editable install, as every
nox session makes) or from the current folder. ``ARCHWHEEL_RECIPES`` adds recipe folders
(``os.pathsep``-separated) searched before the checkout's own. The variables are read once,
into ``settings.Settings``; these functions take their values.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from archwheel.errors import ToolError

MARKERS = ("recipes", "docker/Dockerfile")


def _is_root(path: Path) -> bool:
    return all((path / marker).exists() for marker in MARKERS)


def project_root(explicit: str | None) -> Path:
    """The archwheel checkout holding ``recipes/`` and ``docker/Dockerfile``: ``explicit`` (the
    ``ARCHWHEEL_ROOT`` setting), else found from the installed package or the current folder."""
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


def recipe_dirs(extra: Sequence[Path], root: str | None) -> list[Path]:
    """The recipe folders: ``extra`` (the ``ARCHWHEEL_RECIPES`` setting), then the checkout's
    ``recipes/`` (``root``: as ``project_root``), which may be missing when ``extra`` is not."""
    dirs = list(extra)
    try:
        dirs.append(project_root(root) / "recipes")
    except ToolError:
        if not dirs:
            raise
    return dirs


def docker_dir(root: str | None) -> Path:
    """The builder image files of the checkout (``root``: as ``project_root``)."""
    return project_root(root) / "docker"


def cache_dir(base: str | None) -> Path:
    """archwheel's own cache: ``BASE/archwheel``, else ``~/.cache/archwheel``. ``base`` is
    ``$ARCHWHEEL_CACHE``, else ``$XDG_CACHE_HOME`` (``settings.Settings`` chooses)."""
    root = Path(base) if base else Path.home() / ".cache"
    return (root / "archwheel").resolve()
