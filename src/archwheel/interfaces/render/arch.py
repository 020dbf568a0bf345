"""The text of ``archwheel arch`` and ``archwheel gpus``: arch-list forms, recommendations and
the GPU catalog, as tables and Markdown (the JSON is each result's own ``to_json_dict``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table

from archwheel.facts.catalog import CudaFacts, load_facts
from archwheel.facts.versions import CudaVersion
from archwheel.interfaces.render.common import cite, safe
from archwheel.verdicts.recommend import (
    ArchForms,
    GpuCatalog,
    Recommendation,
    arch_forms,
    natively_served,
)


def _gpu_names(archs: Iterable[Any], facts: CudaFacts) -> str:
    names = [n for cc in archs for n in facts.gpus_for(cc)[:3]]
    return ", ".join(names)


# -- arch ---------------------------------------------------------------------------------------


def arch_forms_table(result: ArchForms, out: Console) -> None:
    """Print an arch list's forms (canonical, TORCH_CUDA_ARCH_LIST, CMake, nvcc flags) and the GPUs
    it serves: ``archwheel arch LIST`` on a terminal."""
    facts = load_facts()
    doc = result.to_json_dict()
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("canonical", safe(doc["canonical"]))
    torch = doc["torch_cuda_arch_list"] or f"(not expressible: {doc['torch_cuda_arch_list_error']})"
    table.add_row("TORCH_CUDA_ARCH_LIST", safe(torch))
    table.add_row("CMAKE_CUDA_ARCHITECTURES", safe(doc["cmake_cuda_architectures"]))
    table.add_row("nvcc flags", safe(" ".join(doc["gencode"])))
    if result.cuda:
        table.add_row(f"CUDA {result.cuda}", "every target can be compiled")
    table.add_row(
        "buildable with",
        "CUDA " + ", ".join(result.buildable) if result.buildable else "no single toolkit",
    )
    out.print(table)
    out.print()
    cuda = CudaVersion.parse(result.cuda) if result.cuda else None
    for spec in result.archs:
        if spec.sass:
            served = natively_served(spec.target, facts, cuda)
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
    """An arch list's forms as a Markdown table: ``archwheel arch LIST --format markdown``, for a CI
    job summary."""
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
    """Print the recommended arch list for a fleet, how each GPU runs it, its problems and the wheel
    size estimate: ``archwheel arch --gpu/--cc``."""
    facts = load_facts()
    if rec.arch_list is not None:
        forms = arch_forms(rec.arch_list)
        out.print(f"[bold]Recommended arch list:[/bold] {safe(forms['canonical'])}")
        torch = (
            forms["torch_cuda_arch_list"]
            or f"(not expressible: {forms['torch_cuda_arch_list_error']})"
        )
        out.print(f"  TORCH_CUDA_ARCH_LIST={safe(torch)}")
        out.print(f"  CMAKE_CUDA_ARCHITECTURES={safe(forms['cmake_cuda_architectures'])}")
        out.print(f"  nvcc: {safe(' '.join(forms['gencode']))}")
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
            safe(c.gpu.label),
            f"[{style}]{c.mode}[/{style}]",
            c.image or "-",
            safe(f"{c.reason.text} [{c.reason.rule_id}]"),
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
            f"[bold red]problem:[/bold red] {safe(problem)} ({cite('toolkit-targets', facts)})"
        )
    if rec.size is not None:
        size = rec.size
        bound = " (lower bound)" if size.lower_bound else ""
        out.print(
            f"[bold]Estimated wheel size:[/bold] {_mb(size.estimated_bytes)}{bound}, "
            f"reference {_mb(size.reference_bytes)} ({safe(size.reference)}); "
            f"removes {_mb(size.removed_bytes)} of device code, adds {_mb(size.added_bytes)}"
        )
        out.print(f"  this is an estimate: {safe(size.method)}")
        for caveat in size.caveats:
            out.print(f"  - {safe(caveat)}")


def recommendation_markdown(rec: Recommendation) -> str:
    """The fleet recommendation as Markdown (the list's forms, a row per GPU, problems, size
    estimate) for a CI job summary."""
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


# -- gpus ---------------------------------------------------------------------------------------


def gpu_catalog_table(catalog: GpuCatalog, out: Console) -> None:
    """Print the GPU catalog by compute capability: ``archwheel gpus``, the names the ``--gpu``
    flags accept."""
    table = Table("cc", "family", "GPUs")
    for entry in catalog.by_capability():
        table.add_row(str(entry.cc), entry.family, safe(", ".join(entry.names)))
    out.print(table)


def gpu_catalog_markdown(catalog: GpuCatalog) -> str:
    """The GPU catalog as a Markdown table: ``archwheel gpus --format markdown``."""
    lines = ["| compute capability | family | GPUs |", "|---|---|---|"]
    lines.extend(
        f"| {entry.cc} | {entry.family} | {', '.join(entry.names)} |"
        for entry in catalog.by_capability()
    )
    return "\n".join(lines) + "\n"
