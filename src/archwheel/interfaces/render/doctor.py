"""The text of ``archwheel doctor``: the host, the environment, the audit and a verdict per GPU."""

from __future__ import annotations

from rich.console import Console

from archwheel.doctor.diagnose import DoctorReport
from archwheel.facts.catalog import load_facts
from archwheel.interfaces.render.common import cite, safe
from archwheel.interfaces.render.verdict_labels import VERDICT_LABEL, VERDICT_STYLE
from archwheel.verdicts.vocabulary import Verdict


def doctor_table(report: DoctorReport, out: Console) -> None:
    """Print doctor's findings on a terminal: the GPUs and driver, the installed torch, the audit,
    and a verdict per GPU citing its rule."""
    facts = load_facts()
    host = report.host
    out.print("[bold]GPUs[/bold]")
    if not host.has_driver:
        out.print("  no NVIDIA GPU or driver found on this machine")
        for error in host.errors:
            out.print(f"  - {safe(error.one_line())}")
    else:
        cuda = host.cuda_driver_version
        source = " (derived from the driver branch)" if host.cuda_driver_source == "facts" else ""
        out.print(
            f"  driver {host.driver}, CUDA driver version {cuda or 'unknown'}{source}, "
            f"via {host.source}"
        )
        for gpu in host.gpus:
            out.print(f"  GPU {gpu.index}: {safe(gpu.name)}, compute capability {gpu.cc or '?'}")
    env = report.environment
    torch = env.torch
    out.print(f"[bold]Python[/bold] {safe(env.python)} ({env.python_version or '?'})")
    if env.errors:
        out.print("  [red]the environment could not be inspected[/red]")
        for error in env.errors:
            out.print(f"  - {safe(error.one_line())}")
    elif not torch.installed:
        out.print("  torch: not installed")
    elif torch.import_error:
        out.print(f"  torch {safe(str(torch.version))}: import fails: {safe(torch.import_error)}")
    else:
        out.print(
            f"  torch {safe(str(torch.version))}, CUDA {torch.cuda or 'none (CPU build)'}, "
            f"cuDNN {torch.cudnn or '-'}, NCCL {torch.nccl or '-'}"
        )
        if torch.arch_flags:
            out.print(
                f"  built for: {' '.join(torch.arch_flags)} (from {torch.arch_flags_source}; "
                "the build flags, not an audit)"
            )
        for error in torch.errors:
            out.print(f"  - {safe(error.one_line())}")
    nvidia = {k: v for k, v in env.distributions.items() if k.startswith(("nvidia-", "cuda-"))}
    if nvidia:
        out.print(
            "  CUDA packages: " + safe(", ".join(f"{k} {v}" for k, v in sorted(nvidia.items())))
        )
    summary = report.audit_summary()
    if summary is not None:
        out.print("[bold]Audit of the installed torch[/bold]")
        for lib in summary["libraries"]:
            ptx = f"; PTX {' '.join(lib['ptx'])}" if lib["ptx"] else ""
            out.print(f"  {safe(lib['path'])}: {' '.join(lib['sass'])}{ptx}")
        for problem in summary["problems"]:
            out.print(f"  [red]incomplete:[/red] {safe(problem)}")
    if report.runtime is not None:
        out.print(safe(f"runtime: {report.runtime.reason.text} [{report.runtime.reason.rule_id}]"))
    if report.diagnoses:
        out.print("[bold]Verdict per GPU[/bold]")
    for d in report.diagnoses:
        label = VERDICT_LABEL[d.verdict] if d.verdict else "not judged"
        style = VERDICT_STYLE[d.verdict] if d.verdict else "dim"
        out.print(
            f"  GPU {d.gpu.index} {safe(d.gpu.name)} ({d.gpu.cc}): [{style}]{label}[/{style}] - "
            f"{safe(d.headline)}"
        )
        out.print(f"    basis: {safe(d.basis)}")
        for reason in d.reasons:
            if d.verdict is not Verdict.NATIVE:
                out.print(safe(f"    - {reason.text} [{reason.rule_id}]"))
        for fix in d.fixes:
            out.print(f"    [bold]fix:[/bold] {safe(fix)}")
    if report.findings:
        out.print("[bold]Findings[/bold]")
        for finding in report.findings:
            out.print(f"  - {safe(finding)}")
    cited = sorted(
        {r.rule_id for d in report.diagnoses for r in d.reasons if d.verdict is not Verdict.NATIVE}
    )
    for rule_id in cited:
        out.print(f"  {safe(cite(rule_id, facts))}")


def doctor_markdown(report: DoctorReport) -> str:
    """doctor's findings as Markdown, for a CI job summary or a bug report."""
    torch = report.environment.torch
    lines = ["## archwheel doctor", ""]
    if report.host.has_driver:
        lines.append(f"- driver {report.host.driver} (CUDA {report.host.cuda_driver_version})")
        lines.extend(f"- GPU {g.index}: {g.name} ({g.cc})" for g in report.host.gpus)
    else:
        lines.append("- no NVIDIA GPU or driver found")
    if torch.installed:
        lines.append(
            f"- torch {torch.version}, CUDA {torch.cuda}, cuDNN {torch.cudnn}, NCCL {torch.nccl}"
        )
    else:
        lines.append("- torch: not installed")
    for d in report.diagnoses:
        label = VERDICT_LABEL[d.verdict] if d.verdict else "not judged"
        lines.append(f"- **GPU {d.gpu.index} {d.gpu.name}**: {label} - {d.headline}")
        lines.extend(f"  - fix: {fix}" for fix in d.fixes)
    lines.extend(f"- {finding}" for finding in report.findings)
    return "\n".join(lines) + "\n"
