"""The text of ``archwheel audit``: a rich table for terminals, Markdown for CI summaries, the
--quiet lines and the scan progress bar (the JSON is ``verdicts.audit.audit_document``)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from archwheel.binary.model import ImageRow, LibraryInventory, Origin, Severity
from archwheel.facts.arch import CodeKind
from archwheel.interfaces.render.common import (
    MAX_DETAIL_ROWS,
    MAX_LIBRARY_ROWS,
    bounded,
    compact,
    err_console,
    human_bytes,
    literal,
    markdown_table,
    md_code,
    md_text,
    more_rows,
    plain,
    safe,
)
from archwheel.interfaces.render.variant_claims import variant_lines
from archwheel.verdicts.audit import AuditReport, LibraryVerdict, overall_exit_code

if TYPE_CHECKING:
    from rich.progress import Progress


def _arch_cells(lib: LibraryInventory, kind: CodeKind) -> list[str]:
    """Arch names of one kind; a count in parentheses where an arch is only in some kernels."""
    counts: Counter[str] = Counter()
    order: dict[str, object] = {}
    for e in lib.entries:
        if e.kind is kind:
            counts[e.arch] += 1
            order.setdefault(e.arch, e.target)
    if not counts:
        return []
    full = max(counts.values())
    names = sorted(counts, key=lambda a: order[a])  # type: ignore[arg-type, return-value]
    return [a if counts[a] == full or full == 1 else f"{a}({counts[a]})" for a in names]


def shown_libraries(report: AuditReport) -> tuple[list[LibraryInventory], int]:
    """The libraries with device code that the text, Markdown and HTML tables list (failing
    ones first when there are too many) and how many are left out (``MAX_LIBRARY_ROWS``)."""
    libraries = report.inventory.device_libraries
    if report.expect is None:
        return bounded(libraries, MAX_LIBRARY_ROWS)
    failing = {v.library.path for v in report.failing}
    return bounded(libraries, MAX_LIBRARY_ROWS, first=lambda lib: lib.path in failing)


def _detail_rows(
    libraries: Sequence[LibraryInventory],
) -> tuple[list[tuple[LibraryInventory, ImageRow]], int]:
    rows = [(lib, r) for lib in libraries for r in lib.images()]
    return bounded(rows, MAX_DETAIL_ROWS)


def _device_bytes(lib: LibraryInventory) -> int:
    return sum(e.stored_bytes for e in lib.entries)


def verdict_line(reports: Sequence[AuditReport]) -> str:
    """The one-line verdict of an audit (OK, inventory only, FAIL or INCOMPLETE with the reasons):
    the last line of every text rendering."""
    code = overall_exit_code(reports)
    failing = [v for r in reports for v in r.failing]
    unbacked = sum(len(r.variant.unbacked) for r in reports if r.variant is not None)
    empty = [r for r in reports if r.no_device_code]
    errors = sum(1 for r in reports for p in r.inventory.problems if p.severity is Severity.ERROR)
    parts: list[str] = []
    if failing:
        shown = "; ".join(f"{_short(v.library.path)}: {' '.join(v.missing)}" for v in failing[:6])
        more = f"; and {len(failing) - 6} more" if len(failing) > 6 else ""
        parts.append(f"{len(failing)} libraries lack requested images ({shown}{more})")
    if empty:
        parts.append(
            f"{len(empty)} input(s) carry no device code at all although archs were requested"
        )
    if unbacked:
        parts.append(f"{unbacked} variant.json claims the device code does not back")
    if errors:
        parts.append(f"{errors} read errors: the result is incomplete")
    if code == 0:
        if reports and reports[0].expect is None:
            return "verdict: inventory only (give --expect to compare with an arch list)"
        return "verdict: OK, every library with device code carries every requested image"
    label = "INCOMPLETE" if code == 3 else "FAIL"
    return f"verdict: {label}: " + "; ".join(parts)


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def render_table(reports: Sequence[AuditReport], console: Console, *, detail: bool) -> None:
    """Print each audited input's libraries, images and problems on a terminal (``--detail``: images
    per section too); the default ``audit`` output."""
    for report in reports:
        inv = report.inventory
        console.print(
            Text.assemble(
                (literal(inv.source), "bold"),
                f"  ({inv.input_kind}, {inv.members_scanned} binaries scanned, "
                f"{len(inv.device_libraries)} with device code, "
                f"{human_bytes(inv.bytes_scanned)} read)",
            )
        )
        if report.expect is not None:
            console.print(plain(f"expected: {report.expect}"))
        if inv.device_libraries:
            libraries, hidden = shown_libraries(report)
            console.print(_library_table(report, libraries))
            if hidden:
                console.print(plain(more_rows(hidden, "libraries", MAX_LIBRARY_ROWS)))
            if detail:
                rows, more = _detail_rows(libraries)
                console.print(_detail_table(rows))
                if more:
                    console.print(plain(more_rows(more, "rows", MAX_DETAIL_ROWS)))
            console.print(_cost_table(report))
        else:
            console.print("no device code found")
        _problems(report, console)
        console.print()
    code = overall_exit_code(reports)
    style = "green" if code == 0 else ("yellow" if code == 3 else "red")
    console.print(plain(verdict_line(reports), style=f"bold {style}"))


def _library_table(report: AuditReport, libraries: Sequence[LibraryInventory]) -> Table:
    with_expect = report.expect is not None
    table = Table(title="device code per library", title_justify="left", show_lines=False)
    table.add_column("library", overflow="fold", ratio=3)
    table.add_column("SASS", ratio=4)
    table.add_column("PTX", ratio=1)
    if with_expect:
        table.add_column("missing", style="red", ratio=2)
        table.add_column("extra", ratio=2)
    table.add_column("device code", justify="right")
    # What strip --strip-debug would remove ([repair] strip; docs/building-extensions.md)
    with_debug = any(lib.debug_bytes for lib in libraries)
    if with_debug:
        table.add_column("debug sections", justify="right")
    verdicts = {v.library.path: v for v in report.libraries}
    for lib in libraries:
        row = [
            safe(lib.path),
            compact(_arch_cells(lib, CodeKind.SASS)),
            compact(_arch_cells(lib, CodeKind.PTX) + _arch_cells(lib, CodeKind.LTOIR)),
        ]
        if with_expect:
            v = verdicts.get(lib.path) or LibraryVerdict(lib)
            row += [compact(v.missing), compact(v.extra)]
        row.append(_stored_and_uncompressed(lib))
        if with_debug:
            row.append(human_bytes(lib.debug_bytes) if lib.debug_bytes else "-")
        table.add_row(*row)
    return table


def _stored_and_uncompressed(lib: LibraryInventory) -> str:
    """The device code's stored bytes, and what compression saved where it did."""
    stored = _device_bytes(lib)
    uncompressed = sum(r.uncompressed_bytes for r in lib.images())
    if uncompressed > stored:
        return f"{human_bytes(stored)} ({human_bytes(uncompressed)} uncompressed)"
    return human_bytes(stored)


def _detail_table(rows: Sequence[tuple[LibraryInventory, ImageRow]]) -> Table:
    table = Table(title="images per section", title_justify="left")
    for col in ("library", "section", "kind", "arch", "count", "stored", "uncompressed", "codec"):
        table.add_column(
            col, justify="right" if col in ("count", "stored", "uncompressed") else "left"
        )
    for lib, r in rows:
        table.add_row(
            safe(_short(lib.path)),
            safe(r.section) + (" (raw cubin)" if r.origin is Origin.RAW_CUBIN else ""),
            r.kind.value,
            r.arch + (f" (PTX {','.join(map(str, r.ptx_isa))})" if r.ptx_isa else ""),
            str(r.count),
            human_bytes(r.stored_bytes),
            human_bytes(r.uncompressed_bytes),
            ",".join(c.value for c in r.compressions),
        )
    return table


def _cost_table(report: AuditReport) -> Table:
    costs = report.costs()
    total = sum(c.stored_bytes for c in costs) or 1
    table = Table(title="what each arch costs", title_justify="left")
    for col in ("arch", "libraries", "entries", "stored", "share", "uncompressed"):
        table.add_column(col, justify="left" if col == "arch" else "right")
    for c in costs:
        table.add_row(
            c.arch,
            str(c.libraries),
            str(c.entries),
            human_bytes(c.stored_bytes),
            f"{100 * c.stored_bytes / total:.1f}%",
            human_bytes(c.uncompressed_bytes),
        )
    return table


def _problems(report: AuditReport, console: Console) -> None:
    for p in report.inventory.problems:
        style = "red" if p.severity is Severity.ERROR else "yellow"
        console.print(plain(f"{p.severity.value}: {p.one_line()}", style=style))
    for line in variant_lines(report.variant):
        console.print(plain(line, style="green" if report.variant_ok else "red"))


def render_markdown(reports: Sequence[AuditReport], *, detail: bool) -> str:
    """The audit as Markdown (a section per input, a table per library) for ``--format markdown``: a
    CI job summary."""
    out: list[str] = ["## archwheel audit", ""]
    for report in reports:
        inv = report.inventory
        out.append(f"### {md_code(inv.source)}")
        out.append("")
        out.append(
            f"{inv.input_kind}, {inv.members_scanned} binaries scanned, "
            f"{len(inv.device_libraries)} with device code"
            + (f"; expected {md_code(report.expect)}" if report.expect is not None else "")
        )
        out.append("")
        verdicts = {v.library.path: v for v in report.libraries}
        headers = ["library", "SASS", "PTX"]
        if report.expect is not None:
            headers += ["missing", "extra"]
        headers.append("device code")
        rows = []
        libraries, hidden = shown_libraries(report)
        for lib in libraries:
            row = [
                md_code(lib.path),
                compact(_arch_cells(lib, CodeKind.SASS)),
                compact(_arch_cells(lib, CodeKind.PTX) + _arch_cells(lib, CodeKind.LTOIR)),
            ]
            if report.expect is not None:
                v = verdicts.get(lib.path) or LibraryVerdict(lib)
                row += [f"**{compact(v.missing)}**" if v.missing else "-", compact(v.extra)]
            row.append(human_bytes(_device_bytes(lib)))
            rows.append(row)
        if rows:
            out.append(markdown_table(headers, rows))
            out.append("")
        if hidden:
            out.extend([md_text(more_rows(hidden, "libraries", MAX_LIBRARY_ROWS)), ""])
        if detail:
            shown_rows, more = _detail_rows(libraries)
            detail_rows = [
                [
                    md_code(_short(lib.path)),
                    md_text(r.section),
                    r.kind.value,
                    r.arch,
                    str(r.count),
                    human_bytes(r.stored_bytes),
                    human_bytes(r.uncompressed_bytes),
                ]
                for lib, r in shown_rows
            ]
            out.append(
                markdown_table(
                    ["library", "section", "kind", "arch", "count", "stored", "uncompressed"],
                    detail_rows,
                )
            )
            out.append("")
            if more:
                out.extend([md_text(more_rows(more, "rows", MAX_DETAIL_ROWS)), ""])
        costs = report.costs()
        if costs:
            out.append(
                markdown_table(
                    ["arch", "libraries", "entries", "stored", "uncompressed"],
                    [
                        [
                            c.arch,
                            str(c.libraries),
                            str(c.entries),
                            human_bytes(c.stored_bytes),
                            human_bytes(c.uncompressed_bytes),
                        ]
                        for c in costs
                    ],
                )
            )
            out.append("")
        for p in inv.problems:
            out.append(f"- **{p.severity.value}**: {md_text(p.one_line())}")
        out.extend(f"- {md_text(line)}" for line in variant_lines(report.variant))
        if inv.problems or report.variant is not None:
            out.append("")
    out.append(f"**{md_text(verdict_line(reports))}**")
    return "\n".join(out) + "\n"


def render_quiet(reports: Sequence[AuditReport], console: Console) -> None:
    """``--quiet``: the problems, one line each, then the verdict line."""
    for r in reports:
        for p in r.inventory.problems:
            console.print(plain(f"{p.severity.value}: {p.one_line()}"))
        for line in variant_lines(r.variant) if not r.variant_ok else []:
            console.print(plain(line))
    console.print(plain(verdict_line(reports)))


def scan_progress() -> tuple[Callable[[int, int, str], None], Progress]:
    """A transient progress bar on standard error and the scanner's callback that drives it."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

    progress = Progress(
        TextColumn("[bold]scanning"),
        BarColumn(),
        DownloadColumn(binary_units=True),
        TextColumn("{task.description}"),
        console=err_console(),
        transient=True,
        # No refresh thread: the scanner forks workers only while this process has one thread.
        auto_refresh=False,
    )
    task = progress.add_task("", total=None)
    last = [0.0]

    def update(done: int, total: int, name: str) -> None:
        progress.update(
            task, completed=done, total=total, description=safe(name.rsplit("/", 1)[-1], 200)
        )
        now = time.monotonic()
        if now - last[0] >= 0.1:
            last[0] = now
            progress.refresh()

    return update, progress
