"""``archwheel can-run``: will these wheels run on those GPUs (and this driver)?"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from archwheel.interfaces.commands import SUMMARY
from archwheel.interfaces.commands.options import path_argument, version_text
from archwheel.interfaces.render.formats import FORMATS

if TYPE_CHECKING:
    from archwheel.facts import CudaVersion, DriverVersion
    from archwheel.verdicts import Gpu

EXAMPLES = """\
examples:
  archwheel can-run torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl --gpu "RTX 5090"
  archwheel can-run dist/*.whl --gpu "A100,L4,RTX 5090" --driver 570.86.10
  archwheel can-run libmyext.so --cc 7.5,8.6 --cuda-runtime 12.8 --format markdown

exit codes (docs/exit-codes.md):
  0   every library with device code runs natively on every GPU
  10  some library only runs by JIT-compiling PTX (slow first launch)
  11  some library has no kernel image for some GPU (cudaErrorNoKernelImageAvailable)
  12  the driver is too old: for the CUDA runtime, or for the PTX it would JIT
  13  a wheel's variant.json claims an arch or driver its device code does not back
  3   an input could not be read completely (the verdict may be wrong)
  2   usage error (unknown GPU, bad version); 4 the scanner is missing
  when several apply: 11, then 12, then 13, then 3, then 10
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``can-run`` to the command line, with its flags, help and examples
    (``cli.build_parser`` calls each command module's ``register`` with its subparsers)."""
    parser = subparsers.add_parser(
        "can-run",
        help=SUMMARY["can-run"],
        description=(
            "For every library with device code: native (names the cubin), JIT (names the "
            "PTX), or no kernel image (names what would fix it), per GPU; the wheel's verdict "
            "is its worst library's. With --driver, also checks the driver against the CUDA "
            "runtime the wheel targets and the PTX ISA it would JIT."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "inputs",
        nargs="+",
        type=path_argument,
        metavar="WHEEL",
        help="wheels, libraries or directories",
    )
    parser.add_argument(
        "--gpu", action="append", default=[], help='GPU names, comma-separated: "A100,RTX 5090"'
    )
    parser.add_argument(
        "--cc", action="append", default=[], help="compute capabilities, comma-separated: 7.5,12.0"
    )
    parser.add_argument(
        "--driver", type=version_text, help="the NVIDIA driver version, e.g. 570.86.10"
    )
    parser.add_argument(
        "--cuda-runtime",
        type=version_text,
        help="the CUDA runtime the inputs target, when their metadata does not say (e.g. 12.8)",
    )
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.set_defaults(func=run)


@dataclass(frozen=True)
class CanRunRequest:
    """``archwheel can-run``, parsed."""

    inputs: tuple[Path, ...]
    gpus: tuple[Gpu, ...]
    driver: DriverVersion | None
    cuda_runtime: CudaVersion | None
    format: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CanRunRequest:
        """The request of parsed ``args``, the GPUs resolved from names and compute capabilities (an
        unknown one: exit 2)."""
        from archwheel.facts import CudaVersion, DriverVersion, load_facts
        from archwheel.verdicts import resolve_gpus

        return cls(
            inputs=tuple(args.inputs),
            gpus=resolve_gpus(args.gpu, args.cc, facts=load_facts()),
            driver=DriverVersion.parse(args.driver) if args.driver else None,
            cuda_runtime=CudaVersion.parse(args.cuda_runtime) if args.cuda_runtime else None,
            format=args.format,
        )


def run(args: argparse.Namespace) -> int:
    """``archwheel can-run``: whether the inputs' device code runs on the GPUs given (and the
    driver), printed in the format asked; exit with the verdict."""
    from archwheel.inspection import can_run
    from archwheel.interfaces.render.can_run import can_run_markdown, can_run_table
    from archwheel.interfaces.render.common import emit_result

    request = CanRunRequest.from_args(args)
    report = can_run(
        request.inputs,
        request.gpus,
        driver=request.driver,
        cuda_runtime=request.cuda_runtime,
    )
    emit_result(request.format, report, can_run_table, can_run_markdown)
    return report.exit_code
