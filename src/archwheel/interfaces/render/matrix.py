"""The text of ``archwheel matrix`` and ``archwheel publish``: the plan, one line per finished
cell, the summary of every cell with its verdict, and what a publish did."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from archwheel.interfaces.render.common import safe
from archwheel.matrix.index import PublishResult, simple_url
from archwheel.matrix.plan import Action, MatrixPlan
from archwheel.matrix.recheck import Action as RecheckAction
from archwheel.matrix.recheck import RecheckReport, rebuild_lines
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
    """Print the matrix plan: one row per cell with its base, key, action and why (or the wheels the
    index holds)."""
    table = Table(title="matrix plan", show_lines=False)
    for column in ("recipe", "torch", "python", "base", "arch", "key", "action", "why / wheels"):
        table.add_column(column, overflow="fold")
    for c in plan.cells:
        style = ACTION_STYLE[c.action]
        detail = c.reason or ""
        if c.existing:
            detail = f"{detail}: {', '.join(c.existing)}"
        serves = f" (serves {', '.join(c.cell.serves)})" if c.cell.serves else ""
        table.add_row(
            c.cell.recipe,
            (c.cell.torch or "-") + serves,
            c.cell.python,
            safe(c.base or "-"),
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


def print_variant_preview(out: Console, rows: list[dict[str, Any]]) -> None:
    """``matrix --variants --plan``: each cell's label and expected properties."""
    out.print("variants (properties expected from the arch list; proven by the audit at publish):")
    for row in rows:
        if row["plain"]:
            what = "plain wheel (the default for installers without variants)"
        elif row["label"] is None:
            what = "label unknown until built (no toolkit known)"
        else:
            nvidia = row["properties"]["nvidia"]
            what = (
                f"{row['label']}: sm_arch {', '.join(nvidia['sm_arch'])}; "
                f"cuda_version_lower_bound {nvidia['cuda_version_lower_bound'][0]}"
            )
        published = f" (published: {', '.join(row['published'])})" if row["published"] else ""
        out.print(f"  {safe(row['cell'])} -> {safe(what)}{safe(published)}")


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
    """Print every cell's verdict after a matrix run, the counts, and the ``pip install`` line of
    the index when it holds wheels."""
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
    """Print what a publish did: stale trees removed, wheels published (with their find-links page),
    unchanged and refused."""
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


RECHECK_STYLE = {
    RecheckAction.COVERED: "green",
    RecheckAction.BROKEN: "bold red",
    RecheckAction.CLAIMABLE: "yellow",
    RecheckAction.NEEDS_BUILD: "bold",
    RecheckAction.UNKNOWN: "dim",
}


def print_recheck(out: Console, report: RecheckReport) -> None:
    """``matrix --recheck``: per wheel, each new torch release and what it means."""
    table = Table(title=f"recheck of {safe(str(report.index))}", show_lines=False)
    for column in ("wheel", "Requires-Dist torch", "checked before", "new release", "answer"):
        table.add_column(column, overflow="fold")
    for wheel in report.wheels:
        rows = [
            (r.version, f"[{RECHECK_STYLE[r.action]}]{r.action.value}[/]: {safe(r.summary)}")
            for r in wheel.releases
        ] or [("-", safe(wheel.problem) if wheel.problem else "[dim]no newer release[/]")]
        for i, (version, answer) in enumerate(rows):
            table.add_row(
                safe(wheel.file) if i == 0 else "",
                safe(wheel.requirement or "any") if i == 0 else "",
                ", ".join(wheel.checked) if i == 0 else "",
                version,
                answer,
            )
    out.print(table)
    lines = rebuild_lines(report)
    if lines:
        out.print(f"[bold]{len(lines)} wheels must be rebuilt:[/]")
        for line in lines:
            out.print(f"  {safe(line)}")
    else:
        out.print("no wheel must be rebuilt")
