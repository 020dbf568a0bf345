"""The text of ``archwheel can-run``: a table per input (library x GPU) and its Markdown."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from archwheel.facts.catalog import load_facts
from archwheel.interfaces.render.common import (
    MAX_LIBRARY_ROWS,
    bounded,
    cite,
    md_code,
    md_text,
    more_rows,
    safe,
)
from archwheel.interfaces.render.variant_claims import variant_lines
from archwheel.interfaces.render.verdict_labels import VERDICT_LABEL, VERDICT_STYLE
from archwheel.verdicts.compat.report import CanRunReport, InputVerdicts, LibraryVerdict
from archwheel.verdicts.vocabulary import Verdict

_FINE = (Verdict.NATIVE, Verdict.LINK_ONLY)


def _cell(lib: LibraryVerdict | None) -> str:
    if lib is None:
        return "-"
    style = VERDICT_STYLE[lib.verdict]
    images = [a for a, _ in lib.native_archs()] or [a for a, _ in lib.jit_archs()]
    detail = (
        f" {', '.join(images)}" if images and lib.verdict is not Verdict.NO_KERNEL_IMAGE else ""
    )
    return f"[{style}]{VERDICT_LABEL[lib.verdict]}[/{style}]{safe(detail)}"


def _rows(item: InputVerdicts) -> tuple[list[str], int, list[dict[str, LibraryVerdict]]]:
    """The libraries listed (at most ``MAX_LIBRARY_ROWS``, those not fine on some GPU first),
    how many are left out, and each GPU's verdicts by library (one lookup per cell: a wheel of
    20000 libraries was a scan of every library per cell)."""
    per_gpu = [{lib.library: lib for lib in v.libraries} for v in item.per_gpu]
    libraries = [lib.library for lib in item.per_gpu[0].libraries] if item.per_gpu else []
    unfine = {lib.library for v in item.per_gpu for lib in v.libraries if lib.verdict not in _FINE}
    shown, hidden = bounded(libraries, MAX_LIBRARY_ROWS, first=lambda name: name in unfine)
    return shown, hidden, per_gpu


def can_run_table(report: CanRunReport, out: Console) -> None:
    """Print can-run's answer: per input, a table of library x GPU (how each runs: native, PTX JIT
    or not at all) and the verdict."""
    facts = load_facts()
    for item in report.inputs:
        title = item.source if not item.name else f"{item.name} {item.version} ({item.source})"
        table = Table(title=safe(title), title_justify="left")
        table.add_column("library")
        for gpu in report.gpus:
            table.add_column(safe(gpu.label))
        libraries, hidden, per_gpu = _rows(item)
        for library in libraries:
            table.add_row(safe(library), *(_cell(by_name.get(library)) for by_name in per_gpu))
        verdict_row = []
        for v in item.per_gpu:
            style = VERDICT_STYLE[v.verdict]
            verdict_row.append(f"[{style}]{VERDICT_LABEL[v.verdict]}[/{style}]")
        table.add_row("[bold]wheel verdict[/bold]", *verdict_row)
        out.print(table)
        if hidden:
            out.print(safe(more_rows(hidden, "libraries", MAX_LIBRARY_ROWS)))
        for problem in item.problems:
            out.print(f"[red]incomplete:[/red] {safe(problem)}")
        for line in variant_lines(item.variant):
            out.print(f"[{'green' if item.variant_ok else 'red'}]{safe(line)}[/]")
        if item.per_gpu:
            runtime = item.per_gpu[0].runtime
            out.print(safe(f"runtime: {runtime.reason.text} [{runtime.reason.rule_id}]"))
        listed = set(libraries)
        for v in item.per_gpu:
            out.print(f"[bold]{safe(v.gpu.label)}[/bold]: {safe(v.headline())}")
            for lib in v.libraries:
                if lib.verdict in _FINE or lib.library not in listed:
                    continue
                out.print(f"  {safe(lib.library)}: {safe(lib.summary())}")
                for reason in lib.reasons:
                    out.print(safe(f"    - {reason.text} [{reason.rule_id}]"))
                for fix in lib.fixes:
                    out.print(f"    fix: {safe(fix)}")
                if not lib.exact_modules:
                    out.print("    (module boundaries unclear: judged per section)")
        out.print()
    if report.rules:
        out.print("[bold]Rules cited[/bold]")
        for rule_id in report.rules:
            out.print(f"  {safe(cite(rule_id, facts))}")
    verdict = f"{VERDICT_LABEL[report.verdict]}{safe(_unbacked(report))}"
    out.print(f"verdict: {verdict} (exit {report.exit_code})")


def _unbacked(report: CanRunReport) -> str:
    """``; 2 variant.json claims the device code does not back`` (empty: none)."""
    count = sum(len(i.variant.unbacked) for i in report.inputs if i.variant is not None)
    return f"; {count} variant.json claims the device code does not back" if count else ""


def can_run_markdown(report: CanRunReport) -> str:
    """can-run's answer as Markdown tables (library x GPU per input) for a CI job summary."""
    lines: list[str] = []
    for item in report.inputs:
        lines.append(md_text(f"### {item.name or item.source} {item.version or ''}".rstrip()))
        lines.append("")
        lines.append("| library | " + " | ".join(g.label for g in report.gpus) + " |")
        lines.append("|---|" + "---|" * len(report.gpus))
        libraries, hidden, per_gpu = _rows(item)
        for library in libraries:
            cells = [
                by_name[library].summary() if library in by_name else "-" for by_name in per_gpu
            ]
            cells = [md_text(c).replace("|", "\\|") for c in cells]
            name = md_code(library).replace("|", "\\|")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append(
            "| **wheel** | "
            + " | ".join(f"**{VERDICT_LABEL[v.verdict]}**" for v in item.per_gpu)
            + " |"
        )
        lines.append("")
        if hidden:
            lines.extend([md_text(more_rows(hidden, "libraries", MAX_LIBRARY_ROWS)), ""])
        listed = set(libraries)
        for v in item.per_gpu:
            lines.append(f"- **{v.gpu.label}**: {v.headline()}")
            for lib in (x for x in v.libraries if x.library in listed):
                lines.extend(f"  - fix ({md_code(lib.library)}): {fix}" for fix in lib.fixes)
        if item.per_gpu:
            lines.append(f"- runtime: {item.per_gpu[0].runtime.reason.text}")
        lines.extend(f"- {md_text(line)}" for line in variant_lines(item.variant))
        lines.append("")
    lines.append(
        f"Verdict: **{VERDICT_LABEL[report.verdict]}**{md_text(_unbacked(report))} "
        f"(exit {report.exit_code})"
    )
    lines.extend(f"- rule `{rid}`: {text}" for rid, text in report.rules.items())
    return "\n".join(lines) + "\n"
