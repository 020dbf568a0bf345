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
import ssl
import sys
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlparse

from packaging.utils import canonicalize_name

from archwheel.effects.files import read_regular
from archwheel.effects.net import TooLarge, paced_blocks
from archwheel.effects.pipconfig import PipSettings
from archwheel.effects.process import Echo, run_program
from archwheel.errors import InputError, RecipeError, ToolError
from archwheel.facts.documents import load_document
from archwheel.wheelbuild.recipe_model import SourceSpec

JSON_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
MAX_PAGE_BYTES = 64 << 20
MAX_PAGE_NESTING = 16  # a PEP 691 page nests 4 deep


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href") or ""
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            self._href = None


def _is_index_file(entry: object) -> bool:
    """A PEP 691 file entry: a dict with a string filename and url (hashes: a dict, if any)."""
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("filename"), str)
        and isinstance(entry.get("url"), str)
        and isinstance(entry.get("hashes") or {}, dict)
    )


def _sha256_of(entry: dict[str, Any]) -> str | None:
    digest = (entry.get("hashes") or {}).get("sha256")
    return digest if isinstance(digest, str) else None


def parse_simple_page(body: bytes, content_type: str, page_url: str) -> list[IndexFile]:
    """The files of one project page of a simple index, JSON (PEP 691) or HTML (PEP 503)."""
    if "json" in content_type:
        where = f"the package index page {page_url} is unreadable"
        data = load_document(body, origin=where, nesting=MAX_PAGE_NESTING, error=ToolError)
        files = data.get("files", []) if isinstance(data, dict) else None
        if not isinstance(files, list) or not all(_is_index_file(f) for f in files):
            raise ToolError(f"the package index page {page_url} is not a PEP 691 project page")
        return [
            IndexFile(
                f["filename"],
                urljoin(page_url, f["url"]),
                sha256
                if isinstance(sha256 := (f.get("hashes") or {}).get("sha256"), str)
                else None,
            )
            for f in files
        ]
    parser = _Anchors()
    parser.feed(body.decode("utf-8", "replace"))
    files = []
    for href, text in parser.links:
        url, _, fragment = href.partition("#")
        digest = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
        name = text or unquote(Path(urlparse(url).path).name)
        files.append(IndexFile(name, urljoin(page_url, url), digest))
    return files


def default_index_url() -> str:
    """pip's own default index (used when pip is configured with no ``index-url``)."""
    proc = run_program(
        [
            sys.executable,
            "-c",
            "from pip._internal.models.index import PyPI; print(PyPI.simple_url)",
        ],
        echo=None,
        check=False,
        timeout=60,
        what="asking pip for its default index",
    )
    url = proc.stdout.strip()
    if proc.returncode != 0 or not url:
        raise ToolError(
            "cannot tell pip's default package index",
            hint="set one with --index-url or pip's index-url setting",
        )
    return url


def index_urls(pip: PipSettings) -> tuple[str, ...]:
    primary = pip.index_url or default_index_url()
    return (primary, *pip.extra_index_urls)


def fetch_page(index: str, project: str, pip: PipSettings) -> list[IndexFile] | None:
    """The project's files on one index; None when the index has no such project."""
    name = canonicalize_name(project)
    base = index.rstrip("/") + "/"
    page = urljoin(base, f"{name}/")
    if page.startswith("file://") or "://" not in page:
        folder = Path(unquote(urlparse(page).path)) if "://" in page else Path(page)
        html = folder / "index.html"
        if not html.is_file():
            return None
        try:
            body = read_regular(html, MAX_PAGE_BYTES)
        except OSError as exc:
            raise ToolError(f"cannot read the package index page {html}: {exc}") from None
        return parse_simple_page(body, "text/html", html.as_uri())
    request = urllib.request.Request(page, headers={"Accept": JSON_ACCEPT})  # noqa: S310
    cafile = str(pip.ca_bundle) if pip.ca_bundle else None
    context = ssl.create_default_context(cafile=cafile)
    try:
        with urllib.request.urlopen(request, timeout=60, context=context) as response:  # noqa: S310
            # A server that trickles bytes is given up; so is a page past the bound.
            body = b"".join(paced_blocks(response, limit=MAX_PAGE_BYTES))
            return parse_simple_page(body, response.headers.get("Content-Type", ""), page)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise ToolError(f"the package index answered {exc.code} for {page}") from None
    except TooLarge:
        raise ToolError(f"{page} is larger than {MAX_PAGE_BYTES} bytes") from None
    except OSError as exc:
        raise ToolError(f"cannot read the package index page {page}: {exc}") from None


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
