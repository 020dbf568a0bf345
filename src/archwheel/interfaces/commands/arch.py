"""``archwheel arch``: normalize an arch list, or recommend the smallest one for a fleet.

Also ``archwheel gpus``: the GPU catalog (names and compute capabilities) the other commands
accept.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from archwheel.errors import UsageError
from archwheel.exit_codes import EXIT_OK, EXIT_USAGE, EXIT_VERDICT_FAILED
from archwheel.interfaces.commands import SUMMARY
from archwheel.interfaces.commands.options import path_argument, version_text
from archwheel.interfaces.render.formats import FORMATS

if TYPE_CHECKING:
    from archwheel.facts import CudaVersion

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
    """Add ``arch`` and ``gpus`` to the command line, with their flags, help and examples
    (``cli.build_parser`` calls each command module's ``register`` with its subparsers)."""
    parser = subparsers.add_parser(
        "arch",
        help=SUMMARY["arch"],
        description=(
            "With ARCHLIST: print its canonical form, TORCH_CUDA_ARCH_LIST, "
            "CMAKE_CUDA_ARCHITECTURES and nvcc -gencode flags (checked against --cuda). "
            "With --gpu/--cc: recommend the smallest arch list that runs natively on every GPU."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("archlist", nargs="?", help='e.g. "8.0;9.0+PTX", "sm_90a", "Hopper"')
    parser.add_argument(
        "--cuda", type=version_text, help="the CUDA toolkit to check against, e.g. 12.8"
    )
    parser.add_argument(
        "--torch",
        type=version_text,
        help="read the list with this torch's parsers (default: the newest known)",
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
        type=path_argument,
        metavar="WHEEL",
        help="estimate the wheel size of the list from this wheel's per-arch bytes",
    )
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.set_defaults(func=run)

    gpus = subparsers.add_parser("gpus", help=SUMMARY["gpus"])
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
        """The request of parsed ``args``; neither an arch list nor a GPU given is a usage error
        (exit 2)."""
        from archwheel.facts import CudaVersion

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
        """True when GPUs were named (``--gpu`` or ``--cc``): the answer is then a recommendation
        for that fleet."""
        return bool(self.gpus or self.ccs)


@dataclass(frozen=True)
class GpusRequest:
    """``archwheel gpus``, parsed: only the output format."""

    format: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> GpusRequest:
        """The request of parsed ``args`` (argparse has already checked each flag's type)."""
        return cls(format=args.format)


def run(args: argparse.Namespace) -> int:
    """``archwheel arch``: an arch list's forms and readers, or the smallest list for the GPUs
    given; exit 1 when the list leaves a GPU given without a kernel image, 2 when no list can be
    recommended for them."""
    from rich.console import Console

    from archwheel.inspection import ArchFormsWithConsumers, answer_arch
    from archwheel.interfaces.render.arch import (
        arch_forms_markdown,
        arch_forms_table,
        recommendation_markdown,
        recommendation_table,
    )
    from archwheel.interfaces.render.arch_consumers import consumers_markdown, consumers_table
    from archwheel.interfaces.render.common import emit, emit_result

    request = ArchRequest.from_args(args)
    result = answer_arch(
        request.archlist,
        cuda=request.cuda,
        torch=request.torch,
        gpus=request.gpus,
        ccs=request.ccs,
        ptx=request.ptx,
        variant=request.variant,
        reference=request.reference,
    )
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
        return EXIT_OK if all(c.mode != "none" for c in rec.coverage) else EXIT_VERDICT_FAILED
    return EXIT_OK if rec.ok else EXIT_USAGE


def run_gpus(args: argparse.Namespace) -> int:
    """``archwheel gpus``: print the GPU catalog the ``--gpu`` flags accept."""
    from archwheel.interfaces.render.arch import gpu_catalog_markdown, gpu_catalog_table
    from archwheel.interfaces.render.common import emit_result
    from archwheel.verdicts import GpuCatalog

    request = GpusRequest.from_args(args)
    catalog = GpuCatalog.load()
    emit_result(request.format, catalog, gpu_catalog_table, gpu_catalog_markdown)
    return EXIT_OK
