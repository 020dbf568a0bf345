"""``archwheel doctor``: this host's GPUs and driver, the installed torch, and a verdict per GPU."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from archwheel.interfaces.commands import SUMMARY
from archwheel.interfaces.commands.options import add_interpreter_option, positive_number
from archwheel.interfaces.render.formats import FORMATS

EXAMPLES = """\
examples:
  archwheel doctor                              this interpreter's torch on this host's GPUs
  archwheel doctor --interpreter /opt/venv/bin/python
  archwheel doctor --format json

It works without a GPU or driver (it says so and still reports torch), and without torch.

exit codes: as can-run (0 native on every GPU, 10 JIT, 11 no kernel image, 12 driver too old,
13 torch's variant.json claims what its device code does not back);
0 when there is no GPU or no torch to judge
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``doctor`` to the command line, with its flags, help and examples
    (``cli.build_parser`` calls each command module's ``register`` with its subparsers)."""
    parser = subparsers.add_parser(
        "doctor",
        help=SUMMARY["doctor"],
        description=(
            "Lists the GPUs (NVML, falling back to nvidia-smi), finds the installed torch "
            "(version, CUDA, cuDNN, NCCL, build arch flags; read without a GPU), audits its "
            "libraries, and says per GPU whether it runs natively, by JIT, or not at all, "
            "with a fix."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_interpreter_option(parser, "the interpreter whose environment to inspect")
    parser.add_argument(
        "--gpu-probe",
        choices=("auto", "nvml", "nvidia-smi"),
        default="auto",
        help="how to list GPUs (auto: NVML, then nvidia-smi)",
    )
    parser.add_argument(
        "--no-audit",
        action="store_true",
        help="judge from torch's build flags instead of auditing its libraries",
    )
    parser.add_argument(
        "--timeout",
        type=positive_number,
        default=180.0,
        help="seconds allowed for `import torch` (above 0)",
    )
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.set_defaults(func=run)


@dataclass(frozen=True)
class DoctorRequest:
    """``archwheel doctor``, parsed."""

    interpreter: str | None
    gpu_probe: str
    audit: bool
    timeout: float
    format: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DoctorRequest:
        """The request of parsed ``args`` (argparse has already checked each flag's type)."""
        return cls(
            interpreter=args.interpreter,
            gpu_probe=args.gpu_probe,
            audit=not args.no_audit,
            timeout=args.timeout,
            format=args.format,
        )


def run(args: argparse.Namespace) -> int:
    """``archwheel doctor``: diagnose this host's GPUs, driver and installed torch, print the
    findings, exit with the worst GPU's verdict."""
    from archwheel.doctor import run_doctor
    from archwheel.interfaces.render.common import emit_result
    from archwheel.interfaces.render.doctor import doctor_markdown, doctor_table

    request = DoctorRequest.from_args(args)
    report = run_doctor(
        request.interpreter,
        gpu_probe=request.gpu_probe,
        audit=request.audit,
        python_timeout=request.timeout,
    )
    emit_result(request.format, report, doctor_table, doctor_markdown)
    return report.exit_code
