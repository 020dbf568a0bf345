"""The text of ``archwheel manifest`` and ``archwheel verify``."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from archwheel.verdicts.manifest import VerifyReport


def wrote_manifest(path: Path, wheels: int) -> str:
    """The line ``manifest -o FILE`` prints after writing FILE."""
    return f"wrote {path} ({wheels} wheel{'s' if wheels != 1 else ''})"


def verify_table(report: VerifyReport, out: Console) -> None:
    what = []
    if report.files_checked:
        what.append(f"{len(report.files_checked)} file(s)")
    if report.environment:
        what.append(f"the environment of {report.environment}")
    checked = " and ".join(what) or "nothing found to check"
    if report.ok:
        out.print(f"[green]OK[/green]: {escape(checked)} match {escape(report.manifest)}")
        return
    out.print(
        f"[bold red]{len(report.mismatches)} mismatch(es)[/bold red] between "
        f"{escape(checked)} and {escape(report.manifest)}:"
    )
    for m in report.mismatches:
        out.print(f"  - [{m.what}] {escape(m.message)}".replace("[", r"\[", 1))


def verify_markdown(report: VerifyReport) -> str:
    if report.ok:
        return f"**OK**: matches `{report.manifest}`\n"
    lines = [f"**{len(report.mismatches)} mismatch(es)** with `{report.manifest}`:", ""]
    lines.extend(f"- {m.what}: {m.message}" for m in report.mismatches)
    return "\n".join(lines) + "\n"
