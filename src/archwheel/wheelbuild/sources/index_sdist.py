"""An sdist named by project and version, found on the package index pip is configured with.

A recipe's ``[source] project = "torch-scatter"``, ``version = "2.1.2"``, ``sha256 = "..."``
writes no index host: the sdist is looked up through the simple API (PEP 691 JSON, else the
PEP 503 HTML page) of the indexes of the host's pip configuration (``pip config list``, the
``--index-url``/``--extra-index-url`` options; pip's own default index when none is set), in
that order, and the first file named ``<project>-<version>.tar.gz`` (or ``.zip``) whose
sha256 is the recipe's is taken. ``pip download`` is not used: it would run the sdist's
metadata step, which for a torch extension imports torch.

The download itself, the sha256 check and the safe unpacking are ``build/source.py``'s.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from packaging.utils import canonicalize_name

from archwheel.effects.pipconfig import PipSettings
from archwheel.effects.process import Echo
from archwheel.effects.simple_index import IndexFile, fetch_page, index_urls
from archwheel.errors import InputError, RecipeError, ToolError
from archwheel.wheelbuild.recipes.recipe_model import SourceSpec


def sdist_names(project: str, version: str) -> tuple[str, ...]:
    """File names an sdist of ``project`` ``version`` may have (PEP 625 and older forms)."""
    forms = {project, re.sub(r"[-.]+", "_", project), canonicalize_name(project)}
    forms |= {f.lower() for f in forms}
    return tuple(f"{f}-{version}{ext}" for f in sorted(forms) for ext in (".tar.gz", ".zip"))


def locate_sdist(
    spec: SourceSpec,
    pip: PipSettings,
    *,
    recipe: Path,
    echo: Echo | None = None,
) -> SourceSpec:
    """``spec`` with ``sdist`` set to the URL of the project's sdist with the recipe's sha256."""
    if not spec.project or spec.sdist:
        return spec
    assert spec.project_version is not None and spec.sha256 is not None
    names = sdist_names(spec.project, spec.project_version)
    wanted = {n.lower() for n in names}
    seen: list[str] = []
    wrong: list[IndexFile] = []
    failures: list[ToolError] = []
    for index in index_urls(pip):
        try:
            files = fetch_page(index, spec.project, pip)
        except ToolError as exc:  # one unreachable index does not hide the others
            failures.append(exc)
            continue
        if echo:
            echo(f"index {index}: {'no ' + spec.project if files is None else len(files)} files")
        if files is None:
            continue
        seen.append(index)
        for f in files:
            if f.filename.lower() not in wanted:
                continue
            if f.sha256 is None or f.sha256.lower() == spec.sha256:
                return dataclasses.replace(spec, sdist=f.url)
            wrong.append(f)
    if wrong:
        raise InputError(
            f"{recipe}: the package index serves {wrong[0].filename} with sha256 "
            f"{wrong[0].sha256}, the recipe says {spec.sha256}",
            hint="the file changed on the index or the recipe is wrong; never build an "
            "unverified source",
        )
    if failures:
        raise failures[0]
    where = ", ".join(seen) if seen else "none of the configured indexes has the project"
    raise RecipeError(
        f"{recipe}: no sdist of {spec.project} {spec.project_version} on the package index "
        f"({where})",
        hint="check [source] project and version, or pip's index settings (`pip config list`, "
        "--index-url, --extra-index-url)",
    )
