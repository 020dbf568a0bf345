"""The pages of an index tree: the PEP 503 simple pages, the find-links pages, the landing page.

Pure text from the index's entries (``entry.IndexEntry``); ``index`` writes them into a tree.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import quote

from archwheel.binary.variantname import split_label

if TYPE_CHECKING:
    from archwheel.matrix.entry import IndexEntry

WHEELS = "wheels"  # the tree's folder of wheels, which the pages link into


def _page(title: str, body: list[str], *, meta: str = "") -> str:
    return (
        "<!DOCTYPE html>\n<html>\n<head>\n"
        f'<meta charset="utf-8">\n{meta}<title>{html.escape(title)}</title>\n</head>\n<body>\n'
        f"<h1>{html.escape(title)}</h1>\n" + "".join(body) + "</body>\n</html>\n"
    )


def _link(prefix: str, entry: IndexEntry) -> str:
    href = f"{prefix}{quote(entry.file)}#sha256={entry.sha256}"
    attrs = f'href="{html.escape(href)}"'
    if entry.requires_python:
        attrs += f' data-requires-python="{html.escape(entry.requires_python)}"'
    if entry.metadata_sha256:
        # PEP 714's name and PEP 658's (older pip): resolvers read METADATA without the wheel
        value = f"sha256={entry.metadata_sha256}"
        attrs += f' data-core-metadata="{value}" data-dist-info-metadata="{value}"'
    return f"<a {attrs}>{html.escape(entry.file)}</a><br>\n"


def variants_json_name(file: str) -> str | None:
    """``{name}-{version}-variants.json`` of a variant wheel's file name (PEP 825 draft: the
    index serves it beside the wheels); None for a plain wheel."""
    plain, label = split_label(file)
    if label is None:
        return None
    name, version = plain.split("-")[:2]
    return f"{name}-{version}-variants.json"


def _variants_links(prefix: str, rows: Sequence[IndexEntry]) -> list[str]:
    names = sorted({n for n in (variants_json_name(e.file) for e in rows) if n is not None})
    return [f'<a href="{html.escape(prefix + quote(n))}">{html.escape(n)}</a><br>\n' for n in names]


def simple_root_page(entries: Sequence[IndexEntry]) -> str:
    """The PEP 503 root page (``simple/index.html``): a link to each project's page, so pip's
    ``--index-url`` finds them."""
    projects = sorted({e.project for e in entries})
    body = [f'<a href="{quote(p)}/">{html.escape(p)}</a><br>\n' for p in projects]
    return _page("Simple index", body, meta='<meta name="pypi:repository-version" content="1.0">\n')


def project_page(project: str, entries: Sequence[IndexEntry]) -> str:
    """The PEP 503 page of ``project``: a link to each of its wheels with its hashes and Requires-
    Python (and its variants JSON), as pip reads it."""
    rows = sorted((e for e in entries if e.project == project), key=lambda e: e.file)
    return _page(
        f"Links for {project}",
        [_link(f"../../{WHEELS}/", e) for e in rows] + _variants_links(f"../../{WHEELS}/", rows),
        meta='<meta name="pypi:repository-version" content="1.0">\n',
    )


def find_links_page(page: str, entries: Sequence[IndexEntry]) -> str:
    """The find-links page ``page`` (one torch+CUDA, e.g. ``torch-2.14.1+cu130.html``): the wheels
    built for or serving that torch, for ``pip --find-links``."""
    rows = sorted((e for e in entries if page in e.find_links_pages), key=lambda e: e.file)
    links = [_link(f"{WHEELS}/", e) for e in rows] + _variants_links(f"{WHEELS}/", rows)
    return _page(page.removesuffix(".html"), links)


def link_page(page: str, entries: Sequence[IndexEntry], prefix: str) -> str:
    """A find-links page of ``entries`` under ``prefix`` (one arch list's plain wheels)."""
    rows = sorted(entries, key=lambda e: e.file)
    return _page(page.removesuffix(".html"), [_link(prefix, e) for e in rows])


def landing_page(entries: Sequence[IndexEntry]) -> str:
    """The plain landing page of an index tree: where the simple index is and a link to each find-
    links page, for a person browsing it."""
    pages = sorted({p for e in entries for p in e.find_links_pages})
    body = ['<p><a href="simple/">simple/</a> (PEP 503)</p>\n', "<h2>find-links pages</h2>\n"]
    body += [f'<a href="{quote(p)}">{html.escape(p)}</a><br>\n' for p in pages]
    return _page("archwheel wheel index", body)
