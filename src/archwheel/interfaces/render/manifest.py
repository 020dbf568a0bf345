"""The text of ``archwheel manifest`` and ``archwheel verify``."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from archwheel.interfaces.render.common import (
    bounded,
    literal,
    md_code,
    md_text,
    more_rows,
    safe,
)
from archwheel.verdicts.manifest import Mismatch, VerifyReport

# Mismatch lines of ``verify`` in text and Markdown (JSON lists every one): a manifest naming
# 30000 wheels that are all missing must not print 30000 lines.
MAX_MISMATCH_ROWS = 500


def _shown(report: VerifyReport) -> tuple[list[Mismatch], int]:
    return bounded(report.mismatches, MAX_MISMATCH_ROWS)


def manifest_warning(wheel: str, text: str) -> str:
    """The stderr line of a warning about one wheel while its manifest is made."""
    return f"archwheel: warning: {literal(wheel)}: {literal(text)}"


def wrote_manifest(path: Path, wheels: int) -> str:
    """The line ``manifest -o FILE`` prints after writing FILE."""
    return f"wrote {literal(path)} ({wheels} wheel{'s' if wheels != 1 else ''})"


def verify_table(report: VerifyReport, out: Console) -> None:
    """Print ``verify``'s answer: OK with what was checked, or each mismatch with the manifest
    (bounded)."""
    what = []
    if report.files_checked:
        what.append(f"{len(report.files_checked)} file(s)")
    if report.environment:
        what.append(f"the environment of {report.environment}")
    checked = " and ".join(what) or "nothing found to check"
    if report.ok:
        out.print(f"[green]OK[/green]: {safe(checked)} match {safe(report.manifest)}")
        return
    out.print(
        f"[bold red]{len(report.mismatches)} mismatch(es)[/bold red] between "
        f"{safe(checked)} and {safe(report.manifest)}:"
    )
    shown, hidden = _shown(report)
    for m in shown:
        out.print(f"  - {safe(f'[{m.what}]')} {safe(m.message)}")
    if hidden:
        out.print(f"  {safe(more_rows(hidden, 'mismatches', MAX_MISMATCH_ROWS))}")


def verify_markdown(report: VerifyReport) -> str:
    """``verify``'s answer as Markdown, for a CI job summary."""
    if report.ok:
        return f"**OK**: matches {md_code(report.manifest)}\n"
    lines = [f"**{len(report.mismatches)} mismatch(es)** with {md_code(report.manifest)}:", ""]
    shown, hidden = _shown(report)
    lines.extend(f"- {m.what}: {md_text(m.message)}" for m in shown)
    if hidden:
        lines.extend(["", md_text(more_rows(hidden, "mismatches", MAX_MISMATCH_ROWS))])
    return "\n".join(lines) + "\n"
