"""A wheel's ``METADATA`` (and ``WHEEL``) text read as pip reads it.

pip reads a distribution's metadata with ``email.parser`` under the ``compat32`` policy
(``importlib.metadata``'s ``email.message_from_string``; ``packaging.metadata.parse_email``
does the same): RFC 822 headers, each ``Name: value`` line followed by its continuation lines
(any line that starts with a space or a tab, a whitespace-only one included: setuptools folds a
long ``License`` text so, with ``"        "`` for each empty line of the text), up to the first
empty line or the first line that is no header; what follows is the body (the
``Description``). A field may appear many times (``Requires-Dist``, ``Classifier``,
``Provides-Extra``).

``parse_core_metadata`` gives the same headers and body as ``email.parser.HeaderParser(
policy=compat32).parsestr(text)``, field for field and byte for byte (the tests check it on
generated input against the standard library). It is written out here, not imported:
``email.parser`` costs about 25 ms of imports (sockets, dates, calendars, locales) on the
audit's path, and walks the body line by line, where this reads the header lines only and takes
the body as one slice.

What it follows from ``email.feedparser`` (Python 3.11-3.13 alike):

- lines end at ``\\r\\n``, ``\\r`` or ``\\n`` only (not at the form feeds, ``\\x1c``-``\\x1e``,
  ``\\x85`` or ``\\u2028`` that ``str.splitlines`` breaks at: license texts hold form feeds);
- a header line is one that starts with ``From ``, a space or a tab, or printable ASCII other
  than ``:`` up to a ``:``; the first other line ends the headers: an empty one is dropped, any
  other begins the body;
- a value is its first line after the colon with the leading spaces and tabs dropped, then its
  continuation lines as written (line ends kept), then the trailing ``\\r``/``\\n`` dropped:
  a folded value keeps its inner line ends, as pip sees it (pip strips the ends of a
  ``Requires-Dist`` before reading it);
- a ``From `` line first is the envelope, not a header; last, it begins the body; elsewhere it
  is dropped; a line starting with ``:`` is dropped, and so are continuation lines with no
  header before them.

The text is a ``str`` as decoded from UTF-8 with replacement (no lone surrogates: from bytes,
``email`` would hand back ``Header`` objects). Its size is bounded by whoever read it
(``wheelmeta.MAX_METADATA_BYTES``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# email.feedparser's own patterns.
_HEADER = re.compile(r"(From |[\041-\071\073-\176]*:|[\t ])")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")


@dataclass(frozen=True)
class CoreMetadata:
    """The headers of a metadata file, in order, as (name as written, value), and its body."""

    headers: tuple[tuple[str, str], ...]
    body: str

    def get_all(self, name: str) -> list[str]:
        """Every value of field ``name`` (any case), in order; ``[]`` when it has none."""
        wanted = name.lower()
        return [value for key, value in self.headers if key.lower() == wanted]

    def get(self, name: str) -> str | None:
        """The first value of field ``name`` (any case), as ``Message.get`` gives it."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)

    def fields(self) -> dict[str, list[str]]:
        """Every field by its lower-case name, with its values in order."""
        out: dict[str, list[str]] = {}
        for key, value in self.headers:
            out.setdefault(key.lower(), []).append(value)
        return out


def parse_core_metadata(text: str) -> CoreMetadata:
    """The headers and body of ``text`` as ``email.parser`` (``compat32``) reads them."""
    lines: list[str] = []
    pos = 0
    end = len(text)
    body_start = end
    while pos < end:
        match = _LINE.match(text, pos)
        assert match is not None  # some character remains: one of the two branches matches
        line = match.group()
        if not _HEADER.match(line):
            # An empty line separates headers from the body and is dropped; any other line
            # is the body's first.
            body_start = match.end() if line[0] in "\r\n" else pos
            break
        lines.append(line)
        pos = match.end()
    headers, pushed_back = _headers(lines)
    return CoreMetadata(tuple(headers), pushed_back + text[body_start:])


def _headers(lines: list[str]) -> tuple[list[tuple[str, str]], str]:
    """``FeedParser._parse_headers``: the (name, value) pairs, and a line handed back to the
    body ("" when none)."""
    headers: list[tuple[str, str]] = []
    current: list[str] = []
    last = len(lines) - 1
    for number, line in enumerate(lines):
        if line[0] in " \t":
            if current:
                current.append(line)
            continue  # a continuation with no header before it is dropped
        if current:
            headers.append(_field(current))
            current = []
        if line.startswith("From "):
            if number == last and number != 0:
                return headers, line
            continue  # the envelope line, or one misplaced: not a header
        if line[0] == ":":
            continue  # no name
        current = [line]
    if current:
        headers.append(_field(current))
    return headers, ""


def _field(lines: list[str]) -> tuple[str, str]:
    """``compat32.header_source_parse``."""
    name, value = lines[0].split(":", 1)
    return name, (value.lstrip(" \t") + "".join(lines[1:])).rstrip("\r\n")
