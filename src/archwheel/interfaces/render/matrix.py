"""The text of ``archwheel matrix`` and ``archwheel publish``: the plan, one line per finished
cell, the summary of every cell with its verdict, and what a publish did."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from archwheel.interfaces.render.common import safe
from archwheel.matrix.index import PublishResult, simple_url
from archwheel.matrix.plan import Action, MatrixPlan
from archwheel.matrix.run import CellResult, MatrixResult, Verdict

ACTION_STYLE = {Action.BUILD: "bold", Action.SKIP: "dim", Action.EXCLUDED: "dim"}
VERDICT_STYLE = {
    Verdict.PUBLISHED: "green",
    Verdict.SKIPPED: "dim green",
    Verdict.EXCLUDED: "dim",
    Verdict.BUILD_FAILED: "bold red",
    Verdict.REFUSED: "bold red",
}


def print_plan(out: Console, plan: MatrixPlan) -> None:
    table = Table(title="matrix plan", show_lines=False)
    for column in ("recipe", "torch", "python", "arch", "key", "action", "why / wheels"):
        table.add_column(column, overflow="fold")
    for c in plan.cells:
        style = ACTION_STYLE[c.action]
        detail = c.reason or ""
        if c.existing:
            detail = f"{detail}: {', '.join(c.existing)}"
        table.add_row(
            c.cell.recipe,
            c.cell.torch or "-",
            c.cell.python,
            safe(c.cell.arch),
            c.key[:12],
            f"[{style}]{c.action.value}[/]",
            safe(detail),
        )
    out.print(table)
    out.print(
        f"{len(plan.of(Action.BUILD))} to build, {len(plan.of(Action.SKIP))} already in the "
        f"index, {len(plan.of(Action.EXCLUDED))} excluded"
    )


def print_cell(out: Console, result: CellResult) -> None:
    """One line as each cell finishes (standard error)."""
    if result.verdict in (Verdict.SKIPPED, Verdict.EXCLUDED):
        return
    style = VERDICT_STYLE[result.verdict]
    out.print(
        f"[{style}]{result.verdict.value}[/] {safe(result.planned.cell.label)} "
        f"({result.seconds:.1f} s): {safe(result.message)}"
    )


def print_summary(out: Console, result: MatrixResult) -> None:
    table = Table(title="matrix summary")
    for column in ("cell", "verdict", "wheel / reason", "s"):
        table.add_column(column, overflow="fold")
    for c in result.cells:
        style = VERDICT_STYLE[c.verdict]
        detail = ", ".join(c.wheels) if c.wheels else c.message
        table.add_row(
            safe(c.planned.cell.label),
            f"[{style}]{c.verdict.value}[/]",
            safe(detail),
            f"{c.seconds:.1f}",
        )
    out.print(table)
    counts = ", ".join(f"{result.count(v)} {v.value}" for v in Verdict if result.count(v))
    out.print(f"{counts}; index {safe(str(result.index))}")
    if any(c.wheels for c in result.cells):
        out.print(f"pip install --index-url {simple_url(result.index)} NAME")


def print_publish(out: Console, result: PublishResult) -> None:
    for stale in result.stale_removed:
        out.print(f"removed {safe(stale)}, left by a publish that did not finish")
    for entry in result.published:
        page = f" ({entry.find_links_page})" if entry.find_links_page else ""
        out.print(f"[green]published[/] {safe(entry.file)}{safe(page)}")
    for entry in result.unchanged:
        out.print(f"[dim]unchanged[/] {safe(entry.file)} (already published, same bytes)")
    for refusal in result.refused:
        out.print(f"[bold red]refused[/] {safe(refusal.wheel)}: {safe(refusal.reason)}")
    out.print(f"{len(result.entries)} wheels in {safe(str(result.index))}")
    out.print(f"pip install --index-url {simple_url(result.index)} NAME")
