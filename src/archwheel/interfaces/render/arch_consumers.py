"""``archwheel arch LIST``: who reads the list, and what each reader makes of it."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from archwheel.facts.arch_grammars import ConsumerView
from archwheel.interfaces.render.common import safe


def _setting(view: ConsumerView) -> str:
    if view.value is not None:
        return f'{view.variable}="{view.value}"'
    return f"{view.variable}: {view.refusal}"


def _as_written(view: ConsumerView) -> str:
    reading = view.as_written
    if reading is None:
        return ""
    if reading.ok:
        return "as written: " + " ".join(reading.images)
    text = "as written: " + reading.describe()
    return text + (f" [{reading.error}]" if reading.error else "")


def consumers_table(views: Sequence[ConsumerView], torch: str, out: Console) -> None:
    """Print, after an arch list's forms, what each tool that reads it (torch, CMake, nvcc) is set
    to and makes of the list as written."""
    out.print()
    out.print(f"[bold]Who reads it[/bold] (grammars of torch {safe(torch)}):")
    table = Table("consumer", "set", show_header=False, box=None, pad_edge=False)
    for view in views:
        table.add_row(safe(view.consumer), safe(_setting(view)))
        written = _as_written(view)
        if written:
            table.add_row("", safe(written))
    out.print(table)


def consumers_markdown(views: Sequence[ConsumerView], torch: str) -> str:
    """The readers of an arch list and what each makes of it, as Markdown rows appended to
    ``arch_forms_markdown``."""
    lines = [
        "",
        f"Who reads it (grammars of torch {torch}):",
        "",
        "| consumer | set | the list as written |",
        "|---|---|---|",
    ]
    for view in views:
        setting = _setting(view).replace("|", "\\|")
        written = _as_written(view).removeprefix("as written: ").replace("|", "\\|")
        lines.append(f"| {view.consumer} | `{setting}` | {written} |")
    return "\n".join(lines) + "\n"
