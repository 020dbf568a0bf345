"""The text of ``archwheel smoke``: progress lines, the report table and the verdict line."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from archwheel.interfaces.render.common import plain, safe
from archwheel.verdicts.smoke import SmokeReport
from archwheel.verdicts.vocabulary import SmokeVerdict, StepVerdict

VERDICT_STYLES = {
    StepVerdict.NATIVE: "green",
    StepVerdict.JIT_ONLY: "yellow",
    StepVerdict.SKIPPED: "dim",
    StepVerdict.NO_KERNEL_IMAGE: "red",
    StepVerdict.WRONG_RESULT: "bold red",
    StepVerdict.ERROR: "red",
    StepVerdict.HANG: "bold red",
    StepVerdict.CRASH: "bold red",
}


def progress_line(message: str) -> str:
    """A progress message on standard error (rich markup)."""
    return f"[dim]smoke: {safe(message)}[/dim]"


def render(report: SmokeReport, console: Console) -> None:
    """Print the smoke report: the environment and software, a row per step with its verdict, and
    the verdict line."""
    data = report.to_json_dict()
    software = data["software"]
    console.print(f"[bold]archwheel smoke[/bold]  {safe(', '.join(report.inputs))}")
    console.print(plain(f"environment: {report.environment}"))
    facts = [
        ("torch", software["torch"]),
        ("CUDA", software["torch_cuda"]),
        ("cuDNN", software["cudnn"]),
        ("NCCL", software["nccl"]),
        ("driver", software["driver"]),
        ("python", software["python"]),
    ]
    shown = "  ".join(f"{k} {v}" for k, v in facts if v)
    if shown:
        console.print(plain(shown))
    if software["arch_list"]:
        console.print(plain(f"compiled arch list: {' '.join(software['arch_list'])}"))
    for stage in report.stages:
        if not stage.ok:
            console.print(f"[red]{safe(stage.name)} failed[/red]: {safe(stage.detail)}")
            for line in stage.log_tail[-6:]:
                console.print(plain(f"    {line}", style="dim"))
    if report.devices:
        table = Table(title="devices", title_justify="left")
        for col in ("#", "name", "cc", "memory", "compiled arch list vs device"):
            table.add_column(col)
        for d in report.devices:
            memory = f"{d.total_memory / 2**30:.0f} GiB" if d.total_memory else "?"
            check = d.arch_check.one_line() if d.arch_check else "?"
            table.add_row(str(d.index), safe(d.name), safe(d.cc), memory, safe(check))
        console.print(table)
    if report.steps:
        table = Table(title="kernels", title_justify="left")
        for col in ("dev", "step", "verdict", "evidence"):
            table.add_column(col)
        for s in report.steps:
            evidence = safe(s.detail)
            if s.explanation:
                explanation = safe(s.explanation)
                evidence = f"{evidence}\n{explanation}" if evidence else explanation
            table.add_row(
                str(s.device),
                safe(s.step),
                Text(s.verdict.value, style=VERDICT_STYLES.get(s.verdict, "")),
                evidence,
            )
        console.print(table)
    if report.cpu_part is not None:
        part = report.cpu_part
        detail = f": {part.detail}" if part.detail else ""
        console.print(plain(f"CPU part (snippet, CUDA hidden): {part.verdict.value}{detail}"))
    style = "green" if report.verdict is SmokeVerdict.PASSED else "bold red"
    if report.verdict in (SmokeVerdict.JIT_ONLY, SmokeVerdict.CPU_ONLY):
        style = "yellow"
    console.print(
        plain(f"verdict: {report.verdict.value}: {report.message}", style=style),
        Text(f"(exit {report.exit_code})", style="dim"),
    )
