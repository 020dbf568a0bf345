"""``archwheel arch``: normalize an arch list, or recommend the smallest one for a fleet.

Also ``archwheel gpus``: the GPU catalog (names and compute capabilities) the other commands
accept.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from archwheel import __version__
from archwheel.binary.scan.inputs import scan_path
from archwheel.errors import EXIT_OK, EXIT_USAGE, InputError, UsageError
from archwheel.facts.arch import ArchList
from archwheel.facts.catalog import load_facts
from archwheel.facts.versions import CudaVersion
from archwheel.interfaces.render.common import FORMATS, console
from archwheel.interfaces.render.verdicts import (
    ArchForms,
    arch_forms_markdown,
    arch_forms_table,
    emit,
    print_json,
    recommendation_markdown,
    recommendation_table,
)
from archwheel.verdicts.compat.gpus import resolve_gpus
from archwheel.verdicts.recommend import Recommendation, buildable_with, coverage_of, estimate_size
from archwheel.verdicts.recommend import recommend as recommend_for

EXAMPLES = """\
examples:
  archwheel arch "8.0;9.0+PTX" --cuda 12.8        normalized forms, checked against CUDA 12.8
  archwheel arch "Ampere;Hopper" --format json    names expand as PyTorch expands them
  archwheel arch --gpu "A100,H100,L4,RTX 5090" --cuda 12.8 --ptx
  archwheel arch --gpu H100,B200 --variant a      arch-specific cubins (sm_90a, sm_100a)
  archwheel arch --gpu "A100,L4" --reference torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl
  archwheel arch "8.0;9.0" --gpu "L4,RTX 5090"     which GPUs a list serves, and how

exit codes: 0 ok; 2 the list is invalid or a toolkit cannot build it (or cover a GPU);
1 a given list leaves a listed GPU without a kernel image
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "arch",
        help="normalize an arch list, or recommend the smallest one for your GPUs",
        description=(
            "With ARCHLIST: print its canonical form, TORCH_CUDA_ARCH_LIST, "
            "CMAKE_CUDA_ARCHITECTURES and nvcc -gencode flags (checked against --cuda). "
            "With --gpu/--cc: recommend the smallest arch list that runs natively on every GPU."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("archlist", nargs="?", help='e.g. "8.0;9.0+PTX", "sm_90a", "Hopper"')
    parser.add_argument("--cuda", help="the CUDA toolkit to check against, e.g. 12.8")
    parser.add_argument(
        "--gpu", action="append", default=[], help='GPU names, comma-separated: "A100,RTX 5090"'
    )
    parser.add_argument(
        "--cc", action="append", default=[], help="compute capabilities, comma-separated: 8.6,12.0"
    )
    parser.add_argument(
        "--ptx", action="store_true", help="add PTX of the highest target for future GPUs"
    )
    parser.add_argument(
        "--variant",
        choices=("plain", "a", "f"),
        default="plain",
        help="cubin variant: plain (default, widest), a (arch-specific), f (family-specific)",
    )
    parser.add_argument(
        "--reference",
        type=Path,
        metavar="WHEEL",
        help="estimate the wheel size of the list from this wheel's per-arch bytes",
    )
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.set_defaults(func=run)

    gpus = subparsers.add_parser(
        "gpus", help="list the GPU names and compute capabilities archwheel knows"
    )
    gpus.add_argument("--format", choices=FORMATS, default="table")
    gpus.set_defaults(func=run_gpus)


def run(args: argparse.Namespace) -> int:
    facts = load_facts()
    cuda = CudaVersion.parse(args.cuda) if args.cuda else None
    has_gpus = bool(args.gpu or args.cc)
    if args.archlist is None and not has_gpus:
        raise UsageError("give an arch list or --gpu/--cc", hint='e.g. archwheel arch "8.0;9.0"')

    if args.archlist is not None:
        archs = ArchList.parse(args.archlist, facts)
        if cuda is not None:
            archs.check_toolkit(facts.toolkit(cuda), facts)
        if not has_gpus:
            forms = ArchForms(
                archs, str(cuda) if cuda else None, [str(v) for v in buildable_with(archs, facts)]
            )
            emit(
                args.format,
                forms,
                lambda out: arch_forms_table(forms, out),
                lambda: arch_forms_markdown(forms),
            )
            return EXIT_OK
        gpus = resolve_gpus(args.gpu, args.cc, facts)
        rec = Recommendation(
            gpus=gpus,
            toolkit=cuda,
            variant="given",
            ptx=bool(archs.ptx_targets),
            arch_list=archs,
            coverage=coverage_of(archs, gpus),
            problems=(),
            buildable_with=buildable_with(archs, facts),
        )
        rec = _with_size(rec, args.reference)
        _emit_recommendation(args.format, rec)
        return EXIT_OK if all(c.mode != "none" for c in rec.coverage) else 1

    gpus = resolve_gpus(args.gpu, args.cc, facts)
    rec = recommend_for(gpus, cuda=cuda, ptx=args.ptx, variant=args.variant, facts=facts)
    rec = _with_size(rec, args.reference)
    _emit_recommendation(args.format, rec)
    return EXIT_OK if rec.ok else EXIT_USAGE


def _with_size(rec: Recommendation, reference: Path | None) -> Recommendation:
    if reference is None or rec.arch_list is None:
        return rec
    if not reference.is_file():
        raise InputError(f"{reference}: no such file", hint="--reference takes a wheel file")
    inventory = scan_path(reference)
    size = estimate_size(rec.arch_list, inventory, reference.stat().st_size)
    return dataclasses.replace(rec, size=size)


def _emit_recommendation(fmt: str, rec: Recommendation) -> None:
    emit(
        fmt,
        rec,
        lambda out: recommendation_table(rec, out),
        lambda: recommendation_markdown(rec),
    )


class _Catalog:
    def to_json_dict(self) -> dict[str, object]:
        facts = load_facts()
        return {
            "schema_version": 1,
            "kind": "gpu-catalog",
            "tool": {"name": "archwheel", "version": __version__},
            "facts_version": facts.facts_version,
            "gpus": [
                {"name": g.name, "compute_capability": str(g.cc), "family": facts.family(g.cc)}
                for g in facts.gpus
            ],
        }


def run_gpus(args: argparse.Namespace) -> int:
    catalog = _Catalog()
    if args.format == "json":
        print_json(catalog)
        return EXIT_OK
    facts = load_facts()
    by_cc: dict[str, list[str]] = {}
    for g in facts.gpus:
        by_cc.setdefault(str(g.cc), []).append(g.name)
    if args.format == "markdown":
        lines = ["| compute capability | family | GPUs |", "|---|---|---|"]
        for g in facts.gpus:
            if by_cc.get(str(g.cc)) is not None:
                names = by_cc.pop(str(g.cc))
                lines.append(f"| {g.cc} | {facts.family(g.cc)} | {', '.join(names)} |")
        print("\n".join(lines))
        return EXIT_OK
    out: Console = console()
    table = Table("cc", "family", "GPUs")
    for g in facts.gpus:
        if by_cc.get(str(g.cc)) is not None:
            names = by_cc.pop(str(g.cc))
            table.add_row(str(g.cc), facts.family(g.cc), escape(", ".join(names)))
    out.print(table)
    return EXIT_OK
