"""A project's files on a package index, through its simple API (PEP 691 JSON, else PEP 503 HTML).

The indexes are those of the host's pip configuration (``pip config list`` and the
``--index-url``/``--extra-index-url`` options; pip's own default index when none is set), so no
index host is written in the code. A page is read with a size bound, against a server that
trickles (``effects.net.paced_blocks``) and within the time bounds of ``effects.deadline``
(redirects to http(s) URLs only), and a local folder or ``file://`` index is read from disk.

What a page says is data, never a path or an authority: a stated sha256 is lower-cased when it
is one (64 hex digits) and kept as stated otherwise, for the reader to refuse
(``effects.net.is_sha256``); a page read over http(s) lists only its http(s) links (a
``file://`` link there would make archwheel open a local file the user never named), while a
local index the user named may link local files. Used to find an sdist named by project and
version (``wheelbuild.sources.index_sdist``) and the torch wheels of a release range (``can-load
--torch``).
"""

from __future__ import annotations

import re
import ssl
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from archwheel.effects.deadline import NetBudget
from archwheel.effects.files import read_regular
from archwheel.effects.http import Answered, Client
from archwheel.effects.net import TooLarge, paced_blocks
from archwheel.effects.pipconfig import PipSettings
from archwheel.effects.process import run_program
from archwheel.errors import ToolError
from archwheel.facts.documents import load_document

JSON_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
MAX_PAGE_BYTES = 64 << 20
MAX_PAGE_NESTING = 16  # a PEP 691 page nests 4 deep
MAX_STATED_HASH = 100  # characters of a malformed stated sha256 kept (to be named, refused)
_SHA256 = re.compile(r"[0-9a-fA-F]{64}\Z")


@dataclass(frozen=True)
class IndexFile:
    """One file of a project page: its name, absolute URL, sha256 and size where the page says."""

    filename: str
    url: str
    sha256: str | None
    size: int | None = None


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


def _stated(digest: object) -> str | None:
    """A stated sha256, lower-cased when it is one, else as stated (cut): never trusted as a
    name (``effects.net.is_sha256`` says which)."""
    if not isinstance(digest, str):
        return None
    return digest.lower() if _SHA256.match(digest) else digest[:MAX_STATED_HASH]


def _readable_link(url: str, page_url: str) -> bool:
    """An http(s) link; on a local page (``file://``, a folder the user named) a local one
    too. Anything else (``ftp:``, ``data:``, a ``file://`` link on a remote page) is dropped."""
    scheme = urlparse(url).scheme
    if scheme in ("http", "https"):
        return True
    return scheme == "file" and urlparse(page_url).scheme == "file"


def parse_simple_page(body: bytes, content_type: str, page_url: str) -> list[IndexFile]:
    """The files of one project page of a simple index, JSON (PEP 691) or HTML (PEP 503): of
    its links only those archwheel may read (``_readable_link``), each stated sha256 as
    ``_stated`` keeps it."""
    return [f for f in _parse_page(body, content_type, page_url) if _readable_link(f.url, page_url)]


def _parse_page(body: bytes, content_type: str, page_url: str) -> list[IndexFile]:
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
                _stated((f.get("hashes") or {}).get("sha256")),
                size if isinstance(size := f.get("size"), int) and size > 0 else None,
            )
            for f in files
        ]
    parser = _Anchors()
    parser.feed(body.decode("utf-8", "replace"))
    files = []
    for href, text in parser.links:
        url, _, fragment = href.partition("#")
        stated = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
        digest = _stated(stated)
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
    """The indexes pip would ask, in order: the index URL (pip's default when none is set),
    then the extra ones."""
    primary = pip.index_url or default_index_url()
    return (primary, *pip.extra_index_urls)


def fetch_page(
    index: str, project: str, pip: PipSettings, *, budget: NetBudget | None = None
) -> list[IndexFile] | None:
    """The project's files on one index; None when the index has no such project. ``budget``:
    the run's network time (None: a budget of the default limits for this page alone)."""
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
    cafile = str(pip.ca_bundle) if pip.ca_bundle else None
    context = ssl.create_default_context(cafile=cafile)
    budget = budget or NetBudget()
    try:
        with (
            Client(context) as client,
            budget.request(page),
            client.opened(page, {"Accept": JSON_ACCEPT}) as response,
        ):
            # A server that trickles bytes is given up; so is a page past the bound.
            body = b"".join(paced_blocks(response, limit=MAX_PAGE_BYTES))
            kind = response.headers.get("Content-Type", "")
        return parse_simple_page(body, kind, page)
    except Answered as exc:
        if exc.status == 404:
            return None
        raise ToolError(f"the package index answered {exc.status} for {page}") from None
    except TooLarge:
        raise ToolError(f"{page} is larger than {MAX_PAGE_BYTES} bytes") from None
    except OSError as exc:
        raise ToolError(f"cannot read the package index page {page}: {exc}") from None


def project_versions(project: str, pip: PipSettings) -> list[str] | None:
    """The versions of ``project`` that the configured indexes and find-links folders hold a
    wheel or sdist of (as the file names say), oldest first; None when some index could not be
    asked (what it holds is unknown)."""
    found: set[Version] = set()
    answered = False
    for index in index_urls(pip):
        try:
            files = fetch_page(index, project, pip)
        except ToolError:  # an index that cannot be asked: nobody can say what is not there
            return None
        answered = True
        for f in files or []:
            try:
                if f.filename.endswith(".whl"):
                    found.add(parse_wheel_filename(f.filename)[1])
                else:
                    found.add(parse_sdist_filename(f.filename)[1])
            except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
                continue
    for link in pip.find_links:  # pip's local find-links folders hold releases too
        folder = Path(unquote(urlparse(link).path)) if link.startswith("file://") else Path(link)
        if ("://" in link and not link.startswith("file://")) or not folder.is_dir():
            continue
        answered = True
        prefix = canonicalize_name(project).replace("-", "_") + "-"
        for path in folder.iterdir():
            if not path.name.lower().startswith(prefix) or not path.name.endswith(".whl"):
                continue
            try:
                found.add(parse_wheel_filename(path.name)[1])
            except (InvalidWheelFilename, InvalidVersion):
                continue
    return [str(v) for v in sorted(found)] if answered else None
