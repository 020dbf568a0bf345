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

from archwheel.errors import ToolError, UsageError
from archwheel.text import literal

MARKERS = ("recipes", "docker/Dockerfile")


def _is_root(path: Path) -> bool:
    return all((path / marker).exists() for marker in MARKERS)


def project_root(explicit: str | None) -> Path:
    """The archwheel checkout holding ``recipes/`` and ``docker/Dockerfile``: ``explicit`` (the
    ``ARCHWHEEL_ROOT`` setting), else found from the installed package or the current folder.
    A wrong ``explicit`` is the user's setting, a ``UsageError``; none found is a ``ToolError``
    (an installation without its checkout)."""
    if explicit:
        try:
            root = Path(explicit).resolve()
            found = _is_root(root)
        except (OSError, RuntimeError, ValueError) as exc:  # a loop of links, a NUL, too long
            raise UsageError(f"ARCHWHEEL_ROOT={literal(explicit, 200)}: {exc}") from None
        if not found:
            raise UsageError(
                f"ARCHWHEEL_ROOT={literal(explicit, 200)} does not hold recipes/ and "
                "docker/Dockerfile",
                hint="point it at the archwheel checkout, or unset it",
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
