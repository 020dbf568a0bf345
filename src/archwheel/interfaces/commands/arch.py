"""``archwheel arch``: normalize an arch list, or recommend the smallest one for a fleet.

Also ``archwheel gpus``: the GPU catalog (names and compute capabilities) the other commands
accept.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from archwheel.binary.scan.inputs import scan_path
from archwheel.errors import InputError, UsageError
from archwheel.exit_codes import EXIT_OK, EXIT_USAGE
from archwheel.facts.arch_consumers import load_grammars
from archwheel.facts.arch_grammars import ConsumerView, consumer_views, parse_arch_list
from archwheel.facts.catalog import CudaFacts, load_facts
from archwheel.facts.versions import CudaVersion
from archwheel.interfaces.render.arch import (
    arch_forms_markdown,
    arch_forms_table,
    gpu_catalog_markdown,
    gpu_catalog_table,
    recommendation_markdown,
    recommendation_table,
)
from archwheel.interfaces.render.arch_consumers import consumers_markdown, consumers_table
from archwheel.interfaces.render.common import FORMATS, emit, emit_result
from archwheel.verdicts.compat.gpus import resolve_gpus
from archwheel.verdicts.recommend import (
    ArchForms,
    GpuCatalog,
    Recommendation,
    buildable_with,
    coverage_of,
    estimate_size,
)
from archwheel.verdicts.recommend import recommend as recommend_for

EXAMPLES = """\
examples:
  archwheel arch "8.0;9.0+PTX" --cuda 12.8        normalized forms, checked against CUDA 12.8
  archwheel arch "Ampere;Hopper" --format json    names expand as PyTorch expands them
  archwheel arch "Ampere+PTX" --torch 2.14.1      what torch's CMake, cpp_extension, ... make of it
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
        "--torch", help="read the list with this torch's parsers (default: the newest known)"
    )
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


@dataclass(frozen=True)
class ArchRequest:
    """``archwheel arch``, parsed: an arch list to normalize, GPUs to serve, or both."""

    archlist: str | None
    cuda: CudaVersion | None
    torch: str | None
    gpus: tuple[str, ...]
    ccs: tuple[str, ...]
    ptx: bool
    variant: str
    reference: Path | None
    format: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ArchRequest:
        request = cls(
            archlist=args.archlist,
            cuda=CudaVersion.parse(args.cuda) if args.cuda else None,
            torch=args.torch,
            gpus=tuple(args.gpu),
            ccs=tuple(args.cc),
            ptx=args.ptx,
            variant=args.variant,
            reference=args.reference,
            format=args.format,
        )
        if request.archlist is None and not request.has_gpus:
            raise UsageError(
                "give an arch list or --gpu/--cc", hint='e.g. archwheel arch "8.0;9.0"'
            )
        return request

    @property
    def has_gpus(self) -> bool:
        return bool(self.gpus or self.ccs)


@dataclass(frozen=True)
class GpusRequest:
    format: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> GpusRequest:
        return cls(format=args.format)


def run(args: argparse.Namespace) -> int:
    request = ArchRequest.from_args(args)
    result = arch(request)
    if isinstance(result, ArchFormsWithConsumers):
        forms, views, torch = result.forms, result.views, result.torch

        def table(out: Console) -> None:
            arch_forms_table(forms, out)
            consumers_table(views, torch, out)

        emit(
            request.format,
            result,
            table,
            lambda: arch_forms_markdown(forms) + consumers_markdown(views, torch),
        )
        return EXIT_OK
    rec = result
    emit_result(request.format, rec, recommendation_table, recommendation_markdown)
    if request.archlist is not None:
        return EXIT_OK if all(c.mode != "none" for c in rec.coverage) else 1
    return EXIT_OK if rec.ok else EXIT_USAGE


@dataclass(frozen=True)
class ArchFormsWithConsumers:
    """The normalized forms plus, per consumer, what to set and what it makes of the text."""

    forms: ArchForms
    views: tuple[ConsumerView, ...]
    torch: str

    def to_json_dict(self) -> dict[str, object]:
        doc = self.forms.to_json_dict()
        doc["torch"] = self.torch
        doc["consumers"] = [v.to_json_dict() for v in self.views]
        return doc


def arch(
    request: ArchRequest, facts: CudaFacts | None = None
) -> ArchFormsWithConsumers | Recommendation:
    """The forms of the given list and what each consumer makes of it; its coverage of the
    given GPUs; or a recommendation."""
    facts = facts or load_facts()
    cuda = request.cuda
    if request.archlist is not None:
        archs = parse_arch_list(request.archlist, torch=request.torch, facts=facts)
        if cuda is not None:
            archs.check_toolkit(facts.toolkit(cuda), facts)
        if not request.has_gpus:
            torch = load_grammars().for_torch(request.torch).torch
            views = consumer_views(request.archlist, archs, torch=torch, cuda=cuda, facts=facts)
            return ArchFormsWithConsumers(ArchForms.of(archs, cuda, facts), views, torch)
        gpus = resolve_gpus(request.gpus, request.ccs, facts)
        rec = Recommendation(
            gpus=gpus,
            toolkit=cuda,
            variant="given",
            ptx=bool(archs.ptx_targets),
            arch_list=archs,
            coverage=coverage_of(archs, gpus, cuda),
            problems=(),
            buildable_with=buildable_with(archs, facts),
        )
        return _with_size(rec, request.reference)
    gpus = resolve_gpus(request.gpus, request.ccs, facts)
    rec = recommend_for(gpus, cuda=cuda, ptx=request.ptx, variant=request.variant, facts=facts)
    return _with_size(rec, request.reference)


def _with_size(rec: Recommendation, reference: Path | None) -> Recommendation:
    if reference is None or rec.arch_list is None:
        return rec
    if not reference.is_file():
        raise InputError(f"{reference}: no such file", hint="--reference takes a wheel file")
    inventory = scan_path(reference)
    size = estimate_size(rec.arch_list, inventory, reference.stat().st_size)
    return dataclasses.replace(rec, size=size)


def run_gpus(args: argparse.Namespace) -> int:
    request = GpusRequest.from_args(args)
    catalog = GpuCatalog.load()
    emit_result(request.format, catalog, gpu_catalog_table, gpu_catalog_markdown)
    return EXIT_OK
