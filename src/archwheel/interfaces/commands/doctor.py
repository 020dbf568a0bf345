"""``archwheel doctor``: this host's GPUs and driver, the installed torch, and a verdict per GPU."""

from __future__ import annotations

import argparse

from archwheel.doctor.diagnose import run_doctor
from archwheel.interfaces.render.common import FORMATS
from archwheel.interfaces.render.verdicts import doctor_markdown, doctor_table, emit

EXAMPLES = """\
examples:
  archwheel doctor                              this interpreter's torch on this host's GPUs
  archwheel doctor --python /opt/venv/bin/python
  archwheel doctor --format json

It works without a GPU or driver (it says so and still reports torch), and without torch.

exit codes: as can-run (0 native on every GPU, 10 JIT, 11 no kernel image, 12 driver too old);
0 when there is no GPU or no torch to judge
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="report this host's GPUs, driver and installed torch, with a verdict per GPU",
        description=(
            "Lists the GPUs (NVML, falling back to nvidia-smi), finds the installed torch "
            "(version, CUDA, cuDNN, NCCL, build arch flags; read without a GPU), audits its "
            "libraries, and says per GPU whether it runs natively, by JIT, or not at all, "
            "with a fix."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--python", metavar="PATH", help="the interpreter whose environment to inspect"
    )
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
        "--timeout", type=float, default=180.0, help="seconds allowed for `import torch`"
    )
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    report = run_doctor(
        args.python,
        gpu_probe=args.gpu_probe,
        audit=not args.no_audit,
        python_timeout=args.timeout,
    )
    emit(
        args.format,
        report,
        lambda out: doctor_table(report, out),
        lambda: doctor_markdown(report),
    )
    return report.exit_code
