"""Shared rendering helpers: consoles, the output formats, JSON, Markdown tables, byte sizes,
compact arch lists and rule citations (``verdict_labels`` has the compatibility verdicts' labels).

Each command's own text lives in its module beside this one (``render/<command>.py``).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TextIO, TypeVar

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from archwheel.facts.catalog import CudaFacts, load_facts
from archwheel.interfaces.render.formats import FORMATS as FORMATS  # noqa: PLC0414 - re-exported
from archwheel.interfaces.render.formats import dump_json as dump_json  # noqa: PLC0414 - re-exported
from archwheel.text import MAX_SHOWN as MAX_SHOWN  # noqa: PLC0414 - re-exported
from archwheel.text import literal as literal  # noqa: PLC0414 - re-exported
from archwheel.text import whole_number

_MARKDOWN_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*[]<>"})
# Rows of one input's per-library tables in text, Markdown and HTML (JSON lists every library):
# a wheel of 200000 tiny libraries must not take minutes and gigabytes to print. Real wheels are
# far below: torch 2.14.1 has 3 libraries with device code.
MAX_LIBRARY_ROWS = 500
MAX_DETAIL_ROWS = 2000  # rows of ``audit --detail``'s images-per-section table


class JsonResult(Protocol):
    """A result that renders itself as JSON: what ``print_json``, ``emit`` and ``emit_result``
    take."""

    def to_json_dict(self) -> dict[str, Any]:
        """The result as its command's JSON document."""


R = TypeVar("R", bound=JsonResult)
T = TypeVar("T")


def bounded(
    items: Sequence[T], limit: int, *, first: Callable[[T], bool] | None = None
) -> tuple[list[T], int]:
    """At most ``limit`` of ``items``, in their order, and how many were left out. Over the
    limit, the items ``first`` picks (the failing ones, say) are kept before the others."""
    if len(items) <= limit:
        return list(items), 0
    if first is None:
        return list(items[:limit]), len(items) - limit
    chosen = [first(item) for item in items]
    picked = [i for i, yes in enumerate(chosen) if yes][:limit]
    others = [i for i, yes in enumerate(chosen) if not yes][: limit - len(picked)]
    kept = sorted(picked + others)
    return [items[i] for i in kept], len(items) - len(kept)


def more_rows(hidden: int, what: str, limit: int) -> str:
    """The line that stands for the rows ``bounded`` left out."""
    return f"... and {hidden} more {what} (at most {limit} shown; --format json lists all)"


def safe(text: object, limit: int = MAX_SHOWN) -> str:
    """``literal`` text, with rich markup escaped: for f-strings that ``Console.print`` parses
    and for table cells (``[bold]`` in a member name is shown, never applied)."""
    return escape(literal(text, limit))


def echo_to(out: Console, style: str = "", *, soft_wrap: bool = False) -> Callable[[str], None]:
    """A line sink that prints each line ``literal``: a command line from a recipe or a line of
    build output may hold ESC/OSC sequences or rich markup; neither reaches the terminal."""

    def echo(line: str) -> None:
        shown = literal(line)
        out.print(shown, markup=False, highlight=False, style=style or None, soft_wrap=soft_wrap)

    return echo


def plain(text: object, style: str = "") -> Text:
    """``literal`` text as a rich ``Text`` (no markup is parsed in it)."""
    return Text(literal(text), style=style)


def md_text(text: object) -> str:
    """``literal`` text for Markdown prose: Markdown's special characters backslash-escaped."""
    return literal(text).translate(_MARKDOWN_SPECIAL)


def md_code(text: object) -> str:
    """``literal`` text as a Markdown code span, whatever backticks it holds."""
    shown = literal(text)
    runs = re.findall("`+", shown)
    if not runs:
        return f"`{shown}`"
    fence = "`" * (max(len(r) for r in runs) + 1)
    return f"{fence} {shown} {fence}"


PIPED_COLUMNS = 160  # columns of piped output, where COLUMNS gives none
MAX_COLUMNS = 4096  # the widest COLUMNS read


def piped_width(text: str) -> int:
    """The columns of piped output: ``COLUMNS`` where it is a whole number in ASCII digits
    (``text.whole_number``) from 20 to ``MAX_COLUMNS``, else ``PIPED_COLUMNS``."""
    try:
        columns = whole_number(text.strip())
    except ValueError:
        return PIPED_COLUMNS
    return columns if 20 <= columns <= MAX_COLUMNS else PIPED_COLUMNS


def console(stream: TextIO | None = None) -> Console:
    """A rich console on stdout (or ``stream``) that degrades to plain text when piped.

    Piped output gets 160 columns (or $COLUMNS) so that logs keep one library per line; a
    ``COLUMNS`` that is not a whole number in ASCII digits from 20 to ``MAX_COLUMNS`` is not
    read (``abc`` ended every command with an internal error).
    """
    out = stream or sys.stdout
    width = None if out.isatty() else piped_width(os.environ.get("COLUMNS", ""))
    return Console(file=out, highlight=False, soft_wrap=False, width=width)


def err_console() -> Console:
    """A console on standard error for messages and progress, so that standard output holds the
    answer alone."""
    return Console(file=sys.stderr, highlight=False)


def human_bytes(n: int) -> str:
    """1536 -> '1.5 KiB'."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def compact(names: Iterable[str]) -> str:
    """A space-separated list, or '-' when empty."""
    items = list(names)
    return " ".join(items) if items else "-"


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table; pipes inside cells are escaped."""

    def cell(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = [
        "| " + " | ".join(cell(h) for h in headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines.extend("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)
    return "\n".join(lines)


def print_json(result: JsonResult) -> None:
    """Print ``result``'s JSON document on standard output (``--format json``)."""
    dump_json(result.to_json_dict())


def emit(
    fmt: str,
    result: JsonResult,
    table: Callable[[Console], None],
    markdown: Callable[[], str],
) -> None:
    """Print ``result`` in the requested format."""
    if fmt == "json":
        print_json(result)
    elif fmt == "markdown":
        sys.stdout.write(markdown())
    else:
        table(console())


def emit_result(
    fmt: str,
    result: R,
    table: Callable[[R, Console], None],
    markdown: Callable[[R], str],
) -> None:
    """Print ``result`` in the requested format with its command's table and Markdown renderers."""
    emit(fmt, result, lambda out: table(result, out), lambda: markdown(result))


def cite(rule_id: str, facts: CudaFacts | None = None) -> str:
    """``rule sass-same-major: A cubin ...`` on one line."""
    return f"rule {rule_id}: {(facts or load_facts()).rule(rule_id)}"
