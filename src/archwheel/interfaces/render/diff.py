"""Human renderings of ``archwheel diff``: a plain report and Markdown for CI job summaries."""

from __future__ import annotations

from rich.console import Console

from archwheel.interfaces.render.common import (
    MAX_LIBRARY_ROWS,
    bounded,
    compact,
    human_bytes,
    markdown_table,
    md_code,
    md_text,
    more_rows,
    safe,
)
from archwheel.verdicts.diff import DiffReport, LibraryChange


def _changes(report: DiffReport) -> tuple[list[LibraryChange], int]:
    """The changed libraries listed (at most ``MAX_LIBRARY_ROWS``, those that dropped an arch
    first) and how many changed ones are left out."""
    changed = [c for c in report.libraries if c.status != "same"]
    return bounded(changed, MAX_LIBRARY_ROWS, first=lambda c: bool(c.dropped))


def _text(value: str | None) -> str:
    return "-" if value is None else value


def _size(n: int | None) -> str:
    return "-" if n is None else human_bytes(n)


def _size_line(change: LibraryChange) -> str:
    return ", ".join(
        f"{arch} {_size(before)} -> {_size(after)}"
        for arch, before, after in change.sizes
        if before != after
    )


def verdict_line(report: DiffReport) -> str:
    """The diff's one-line verdict: REGRESSION (archs OLD had are missing in NEW), incomplete, or no
    arch lost."""
    if report.regression:
        gone = (
            f" ({compact(report.archs_gone)} gone from the whole build)"
            if report.archs_gone
            else ""
        )
        return f"REGRESSION: archs OLD had are missing in NEW{gone}"
    if not (report.old.complete and report.new.complete):
        return "incomplete: an input could not be read completely"
    return "no arch lost"


def render_table(report: DiffReport, out: Console) -> None:
    """Print what NEW gained and lost against OLD (versions, archs per library) and the verdict
    line, on a terminal."""
    out.print(f"[bold]{safe(report.old.label)}[/] -> [bold]{safe(report.new.label)}[/]")
    for key, before, after in report.version_changes:
        out.print(f"  {safe(key)}: {safe(_text(before))} -> {safe(_text(after))}")
    for name, before, after in report.pin_changes:
        out.print(f"  pin {safe(name)}: {safe(_text(before))} -> {safe(_text(after))}")
    changes, hidden = _changes(report)
    for change in changes:
        out.print(f"  {safe(change.path)}: {change.status}")
        if change.added:
            out.print(f"      added:   {compact(change.added)}")
        if change.dropped:
            out.print(f"      [red]dropped: {compact(change.dropped)}[/]")
        sizes = _size_line(change)
        if sizes:
            out.print(f"      sizes:   {safe(sizes)}")
    if hidden:
        out.print(f"  {safe(more_rows(hidden, 'changed libraries', MAX_LIBRARY_ROWS))}")
    same = sum(1 for c in report.libraries if c.status == "same")
    if same:
        out.print(f"  {same} libraries unchanged")
    style = "bold red" if report.regression else "green"
    out.print(f"verdict: [{style}]{safe(verdict_line(report))}[/]")


def render_markdown(report: DiffReport) -> str:
    """The diff as Markdown for a CI job summary: the verdict, then the changes per library."""
    parts = [f"### archwheel diff: {md_code(report.old.label)} -> {md_code(report.new.label)}", ""]
    parts.append(f"**{verdict_line(report)}**")
    parts.append("")
    changes = [*report.version_changes, *(("pin " + n, b, a) for n, b, a in report.pin_changes)]
    if changes:
        parts.append(
            markdown_table(
                ("what", "before", "after"), [(k, _text(b), _text(a)) for k, b, a in changes]
            )
        )
        parts.append("")
    listed, hidden = _changes(report)
    rows = [
        (
            md_code(c.path),
            c.status,
            compact(c.added),
            compact(c.dropped),
            _size_line(c) or "-",
        )
        for c in listed
    ]
    if rows:
        parts.append(markdown_table(("library", "change", "added", "dropped", "sizes"), rows))
    if hidden:
        parts.append("\n" + md_text(more_rows(hidden, "changed libraries", MAX_LIBRARY_ROWS)))
    same = sum(1 for c in report.libraries if c.status == "same")
    if same:
        parts.append(f"\n{same} libraries unchanged.")
    return "\n".join(parts) + "\n"
