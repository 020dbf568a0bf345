"""Renderings of the verdict results: rich tables for people, Markdown for CI summaries, JSON.

Each result object owns its JSON (``to_json_dict``, with a ``schema_version``); this module turns
the same objects into text. Nothing here decides a verdict.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from archwheel import __version__
from archwheel.doctor.diagnose import DoctorReport
from archwheel.facts.arch import ArchList
from archwheel.facts.catalog import CudaFacts, load_facts
from archwheel.interfaces.render.common import console, dump_json
from archwheel.verdicts.compat.report import CanRunReport, InputGpuVerdict, Verdict
from archwheel.verdicts.recommend import Recommendation, arch_forms, natively_served

_STYLE = {
    Verdict.NATIVE: "green",
    Verdict.JIT: "yellow",
    Verdict.DRIVER_TOO_OLD: "red",
    Verdict.NO_KERNEL_IMAGE: "bold red",
    Verdict.LINK_ONLY: "dim",
    Verdict.NO_DEVICE_CODE: "dim",
}
_LABEL = {
    Verdict.NATIVE: "native",
    Verdict.JIT: "JIT",
    Verdict.DRIVER_TOO_OLD: "DRIVER TOO OLD",
    Verdict.NO_KERNEL_IMAGE: "NO KERNEL IMAGE",
    Verdict.LINK_ONLY: "link-only",
    Verdict.NO_DEVICE_CODE: "no device code",
}


class JsonResult(Protocol):
    def to_json_dict(self) -> dict[str, Any]: ...


def print_json(result: JsonResult) -> None:
    dump_json(result.to_json_dict())


def emit(
    fmt: str,
    result: JsonResult,
    table: Callable[[Console], None],
    markdown: Callable[[], str],
) -> None:
    """Print ``result`` in the requested format."""
    if fmt == "json":
        print_json(result)
    elif fmt == "markdown":
        sys.stdout.write(markdown())
    else:
        table(console())


def cite(rule_id: str, facts: CudaFacts | None = None) -> str:
    """``rule sass-same-major: A cubin ...`` on one line."""
    return f"rule {rule_id}: {(facts or load_facts()).rule(rule_id)}"


def _gpu_names(archs: Iterable[Any], facts: CudaFacts) -> str:
    names = [n for cc in archs for n in facts.gpus_for(cc)[:3]]
    return ", ".join(names)


# -- arch ---------------------------------------------------------------------------------------


class ArchForms:
    """The normalized forms of one arch list, optionally checked against a toolkit."""

    def __init__(self, archs: ArchList, cuda: str | None, buildable: list[str]) -> None:
        self.archs = archs
        self.cuda = cuda
        self.buildable = buildable

    def to_json_dict(self) -> dict[str, Any]:
        facts = load_facts()
        targets = []
        for spec in self.archs:
            served = natively_served(spec.target, facts) if spec.sass else []
            targets.append(
                {
                    "target": spec.target.dotted,
                    "sass": spec.sass,
                    "ptx": spec.ptx,
                    "runs_natively_on": [str(cc) for cc in served],
                }
            )
        return {
            "schema_version": 1,
            "kind": "arch-list",
            "tool": {"name": "archwheel", "version": __version__},
            **arch_forms(self.archs),
            "cuda": self.cuda,
            "buildable_with": self.buildable,
            "targets": targets,
        }


def arch_forms_table(result: ArchForms, out: Console) -> None:
    facts = load_facts()
    doc = result.to_json_dict()
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("canonical", escape(doc["canonical"]))
    torch = doc["torch_cuda_arch_list"] or f"(not expressible: {doc['torch_cuda_arch_list_error']})"
    table.add_row("TORCH_CUDA_ARCH_LIST", escape(torch))
    table.add_row("CMAKE_CUDA_ARCHITECTURES", escape(doc["cmake_cuda_architectures"]))
    table.add_row("nvcc flags", escape(" ".join(doc["gencode"])))
    if result.cuda:
        table.add_row(f"CUDA {result.cuda}", "every target can be compiled")
    table.add_row(
        "buildable with",
        "CUDA " + ", ".join(result.buildable) if result.buildable else "no single toolkit",
    )
    out.print(table)
    out.print()
    for spec in result.archs:
        if spec.sass:
            served = natively_served(spec.target, facts)
            ccs = " ".join(str(cc) for cc in served)
            out.print(
                f"  {spec.target.sm:<10} runs natively on {ccs} ({_gpu_names(served, facts)})"
            )
        if spec.ptx:
            out.print(
                f"  {spec.target.compute:<10} JIT-compiles on GPUs >= {spec.target.cc} "
                "(first launch compiles; the driver must know its PTX ISA)"
            )


def arch_forms_markdown(result: ArchForms) -> str:
    doc = result.to_json_dict()
    torch = doc["torch_cuda_arch_list"] or f"not expressible: {doc['torch_cuda_arch_list_error']}"
    lines = [
        "| form | value |",
        "|---|---|",
        f"| canonical | `{doc['canonical']}` |",
        f"| TORCH_CUDA_ARCH_LIST | `{torch}` |",
        f"| CMAKE_CUDA_ARCHITECTURES | `{doc['cmake_cuda_architectures']}` |",
        f"| nvcc flags | `{' '.join(doc['gencode'])}` |",
        f"| buildable with | CUDA {', '.join(result.buildable) or '(none)'} |",
    ]
    return "\n".join(lines) + "\n"


# -- recommendation -----------------------------------------------------------------------------


def recommendation_table(rec: Recommendation, out: Console) -> None:
    facts = load_facts()
    if rec.arch_list is not None:
        forms = arch_forms(rec.arch_list)
        out.print(f"[bold]Recommended arch list:[/bold] {escape(forms['canonical'])}")
        torch = (
            forms["torch_cuda_arch_list"]
            or f"(not expressible: {forms['torch_cuda_arch_list_error']})"
        )
        out.print(f"  TORCH_CUDA_ARCH_LIST={escape(torch)}")
        out.print(f"  CMAKE_CUDA_ARCHITECTURES={escape(forms['cmake_cuda_architectures'])}")
        out.print(f"  nvcc: {escape(' '.join(forms['gencode']))}")
        where = (
            f"CUDA {rec.toolkit}"
            if rec.toolkit
            else "CUDA " + ", ".join(str(v) for v in rec.buildable_with)
        )
        if rec.buildable_with:
            out.print(f"  builds with: {where}")
    else:
        out.print("[bold red]No arch list can be built for these GPUs.[/bold red]")
    table = Table(title="Coverage", title_justify="left")
    table.add_column("GPU")
    table.add_column("runs")
    table.add_column("image")
    table.add_column("why")
    for c in rec.coverage:
        style = {"native": "green", "jit": "yellow"}.get(c.mode, "bold red")
        table.add_row(
            escape(c.gpu.label),
            f"[{style}]{c.mode}[/{style}]",
            c.image or "-",
            escape(f"{c.reason.text} [{c.reason.rule_id}]"),
        )
    out.print(table)
    if rec.ptx and rec.arch_list is not None:
        ptx = sorted(rec.arch_list.ptx_targets)
        out.print(
            "PTX for future GPUs: "
            + ", ".join(t.compute for t in ptx)
            + f" (JIT-compiled by the driver on any newer GPU; {cite('ptx-jit', facts)})"
        )
    for problem in rec.problems:
        out.print(
            f"[bold red]problem:[/bold red] {escape(problem)} ({cite('toolkit-targets', facts)})"
        )
    if rec.size is not None:
        size = rec.size
        bound = " (lower bound)" if size.lower_bound else ""
        out.print(
            f"[bold]Estimated wheel size:[/bold] {_mb(size.estimated_bytes)}{bound}, "
            f"reference {_mb(size.reference_bytes)} ({escape(size.reference)}); "
            f"removes {_mb(size.removed_bytes)} of device code, adds {_mb(size.added_bytes)}"
        )
        out.print(f"  this is an estimate: {escape(size.method)}")
        for caveat in size.caveats:
            out.print(f"  - {escape(caveat)}")


def recommendation_markdown(rec: Recommendation) -> str:
    lines: list[str] = []
    if rec.arch_list is not None:
        forms = arch_forms(rec.arch_list)
        lines.append(f"**Recommended arch list:** `{forms['canonical']}`")
        lines.append("")
        lines.append(f"- TORCH_CUDA_ARCH_LIST: `{forms['torch_cuda_arch_list']}`")
        lines.append(f"- CMAKE_CUDA_ARCHITECTURES: `{forms['cmake_cuda_architectures']}`")
    lines += ["", "| GPU | runs | image | rule |", "|---|---|---|---|"]
    for c in rec.coverage:
        lines.append(f"| {c.gpu.label} | {c.mode} | {c.image or '-'} | {c.reason.rule_id} |")
    lines += [f"- problem: {p}" for p in rec.problems]
    if rec.size is not None:
        lines.append(
            f"\nEstimated wheel size: {_mb(rec.size.estimated_bytes)} (estimate; {rec.size.method})"
        )
    return "\n".join(lines) + "\n"


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


# -- can-run ------------------------------------------------------------------------------------


def _cell(v: InputGpuVerdict, library: str) -> str:
    for lib in v.libraries:
        if lib.library == library:
            style = _STYLE[lib.verdict]
            images = [a for a, _ in lib.native_archs()] or [a for a, _ in lib.jit_archs()]
            detail = (
                f" {', '.join(images)}"
                if images and lib.verdict is not Verdict.NO_KERNEL_IMAGE
                else ""
            )
            return f"[{style}]{_LABEL[lib.verdict]}[/{style}]{escape(detail)}"
    return "-"


def can_run_table(report: CanRunReport, out: Console) -> None:
    facts = load_facts()
    for item in report.inputs:
        title = item.source if not item.name else f"{item.name} {item.version} ({item.source})"
        table = Table(title=escape(title), title_justify="left")
        table.add_column("library")
        for gpu in report.gpus:
            table.add_column(escape(gpu.label))
        libraries = [lib.library for lib in item.per_gpu[0].libraries] if item.per_gpu else []
        for library in libraries:
            table.add_row(escape(library), *(_cell(v, library) for v in item.per_gpu))
        verdict_row = []
        for v in item.per_gpu:
            style = _STYLE[v.verdict]
            verdict_row.append(f"[{style}]{_LABEL[v.verdict]}[/{style}]")
        table.add_row("[bold]wheel verdict[/bold]", *verdict_row)
        out.print(table)
        for problem in item.problems:
            out.print(f"[red]incomplete:[/red] {escape(problem)}")
        if item.per_gpu:
            runtime = item.per_gpu[0].runtime
            out.print(escape(f"runtime: {runtime.reason.text} [{runtime.reason.rule_id}]"))
        for v in item.per_gpu:
            out.print(f"[bold]{escape(v.gpu.label)}[/bold]: {escape(v.headline())}")
            for lib in v.libraries:
                if lib.verdict in (Verdict.NATIVE, Verdict.LINK_ONLY):
                    continue
                out.print(f"  {escape(lib.library)}: {escape(lib.summary())}")
                for reason in lib.reasons:
                    out.print(escape(f"    - {reason.text} [{reason.rule_id}]"))
                for fix in lib.fixes:
                    out.print(f"    fix: {escape(fix)}")
                if not lib.exact_modules:
                    out.print("    (module boundaries unclear: judged per section)")
        out.print()
    if report.rules:
        out.print("[bold]Rules cited[/bold]")
        for rule_id in report.rules:
            out.print(f"  {escape(cite(rule_id, facts))}")
    out.print(f"verdict: {_LABEL[report.verdict]} (exit {report.exit_code})")


def can_run_markdown(report: CanRunReport) -> str:
    lines: list[str] = []
    for item in report.inputs:
        lines.append(f"### {item.name or item.source} {item.version or ''}".rstrip())
        lines.append("")
        lines.append("| library | " + " | ".join(g.label for g in report.gpus) + " |")
        lines.append("|---|" + "---|" * len(report.gpus))
        libraries = [lib.library for lib in item.per_gpu[0].libraries] if item.per_gpu else []
        for library in libraries:
            cells = []
            for v in item.per_gpu:
                lib = next(x for x in v.libraries if x.library == library)
                cells.append(lib.summary())
            lines.append(f"| `{library}` | " + " | ".join(cells) + " |")
        lines.append(
            "| **wheel** | " + " | ".join(f"**{_LABEL[v.verdict]}**" for v in item.per_gpu) + " |"
        )
        lines.append("")
        for v in item.per_gpu:
            lines.append(f"- **{v.gpu.label}**: {v.headline()}")
            for lib in v.libraries:
                lines.extend(f"  - fix ({lib.library}): {fix}" for fix in lib.fixes)
        if item.per_gpu:
            lines.append(f"- runtime: {item.per_gpu[0].runtime.reason.text}")
        lines.append("")
    lines.append(f"Verdict: **{_LABEL[report.verdict]}** (exit {report.exit_code})")
    lines.extend(f"- rule `{rid}`: {text}" for rid, text in report.rules.items())
    return "\n".join(lines) + "\n"


# -- doctor -------------------------------------------------------------------------------------


def doctor_table(report: DoctorReport, out: Console) -> None:
    facts = load_facts()
    host = report.host
    out.print("[bold]GPUs[/bold]")
    if not host.has_driver:
        out.print("  no NVIDIA GPU or driver found on this machine")
        for error in host.errors:
            out.print(f"  - {escape(error.one_line())}")
    else:
        cuda = host.cuda_driver_version
        source = " (derived from the driver branch)" if host.cuda_driver_source == "facts" else ""
        out.print(
            f"  driver {host.driver}, CUDA driver version {cuda or 'unknown'}{source}, "
            f"via {host.source}"
        )
        for gpu in host.gpus:
            out.print(f"  GPU {gpu.index}: {escape(gpu.name)}, compute capability {gpu.cc or '?'}")
    env = report.environment
    torch = env.torch
    out.print(f"[bold]Python[/bold] {escape(env.python)} ({env.python_version or '?'})")
    if env.errors:
        out.print("  [red]the environment could not be inspected[/red]")
        for error in env.errors:
            out.print(f"  - {escape(error.one_line())}")
    elif not torch.installed:
        out.print("  torch: not installed")
    elif torch.import_error:
        out.print(
            f"  torch {escape(str(torch.version))}: import fails: {escape(torch.import_error)}"
        )
    else:
        out.print(
            f"  torch {escape(str(torch.version))}, CUDA {torch.cuda or 'none (CPU build)'}, "
            f"cuDNN {torch.cudnn or '-'}, NCCL {torch.nccl or '-'}"
        )
        if torch.arch_flags:
            out.print(
                f"  built for: {' '.join(torch.arch_flags)} (from {torch.arch_flags_source}; "
                "the build flags, not an audit)"
            )
        for error in torch.errors:
            out.print(f"  - {escape(error.one_line())}")
    nvidia = {k: v for k, v in env.distributions.items() if k.startswith(("nvidia-", "cuda-"))}
    if nvidia:
        out.print(
            "  CUDA packages: " + escape(", ".join(f"{k} {v}" for k, v in sorted(nvidia.items())))
        )
    summary = report.audit_summary()
    if summary is not None:
        out.print("[bold]Audit of the installed torch[/bold]")
        for lib in summary["libraries"]:
            ptx = f"; PTX {' '.join(lib['ptx'])}" if lib["ptx"] else ""
            out.print(f"  {escape(lib['path'])}: {' '.join(lib['sass'])}{ptx}")
        for problem in summary["problems"]:
            out.print(f"  [red]incomplete:[/red] {escape(problem)}")
    if report.runtime is not None:
        out.print(
            escape(f"runtime: {report.runtime.reason.text} [{report.runtime.reason.rule_id}]")
        )
    if report.diagnoses:
        out.print("[bold]Verdict per GPU[/bold]")
    for d in report.diagnoses:
        label = _LABEL[d.verdict] if d.verdict else "not judged"
        style = _STYLE[d.verdict] if d.verdict else "dim"
        out.print(
            f"  GPU {d.gpu.index} {escape(d.gpu.name)} ({d.gpu.cc}): [{style}]{label}[/{style}] - "
            f"{escape(d.headline)}"
        )
        out.print(f"    basis: {escape(d.basis)}")
        for reason in d.reasons:
            if d.verdict is not Verdict.NATIVE:
                out.print(escape(f"    - {reason.text} [{reason.rule_id}]"))
        for fix in d.fixes:
            out.print(f"    [bold]fix:[/bold] {escape(fix)}")
    if report.findings:
        out.print("[bold]Findings[/bold]")
        for finding in report.findings:
            out.print(f"  - {escape(finding)}")
    cited = sorted(
        {r.rule_id for d in report.diagnoses for r in d.reasons if d.verdict is not Verdict.NATIVE}
    )
    for rule_id in cited:
        out.print(f"  {escape(cite(rule_id, facts))}")


def doctor_markdown(report: DoctorReport) -> str:
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
        label = _LABEL[d.verdict] if d.verdict else "not judged"
        lines.append(f"- **GPU {d.gpu.index} {d.gpu.name}**: {label} - {d.headline}")
        lines.extend(f"  - fix: {fix}" for fix in d.fixes)
    lines.extend(f"- {finding}" for finding in report.findings)
    return "\n".join(lines) + "\n"
