"""``archwheel smoke``: install wheels in an isolated environment and run real kernels on the GPU.

The report (a table, or JSON with ``--format json``) always comes out, whatever happened;
the exit code carries the verdict (docs/smoke.md).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archwheel.exit_codes import ExitCode
from archwheel.interfaces.commands import SUMMARY
from archwheel.interfaces.commands.options import (
    add_alias,
    add_interpreter_option,
    check_output,
    environment_settings,
    location_path,
    location_text,
    non_negative_int,
    path_argument,
    positive_number,
    write_output,
)

if TYPE_CHECKING:
    from archwheel.smoke import SmokeRun

# The help states smoke.runner.DEFAULT_STEP_TIMEOUT (300), smoke.environments.
# DEFAULT_INSTALL_TIMEOUT (1800), verdicts.smoke.KERNEL_STEPS and effects.engine.ENGINES as
# text, so that `--help` imports none of them (the defaults are filled in by `from_args`;
# tests/unit/interfaces/test_command_imports.py checks that they are the code's).
STEP_TIMEOUT_SHOWN = 300
INSTALL_TIMEOUT_SHOWN = 1800
KERNEL_STEPS_SHOWN = "matmul_fp32,matmul_fp16,matmul_bf16,conv2d_cudnn,elementwise,reduction"
ENGINES_SHOWN = ("docker", "podman")
# smoke's own exit codes, as the epilog shows them (exit_codes.py)
_NO_DEVICE, _JIT_ONLY = ExitCode.SMOKE_NO_DEVICE, ExitCode.SMOKE_JIT_ONLY
_NO_KERNEL_IMAGE, _HANG_OR_CRASH = ExitCode.SMOKE_NO_KERNEL_IMAGE, ExitCode.SMOKE_HANG_OR_CRASH
_CPU_ONLY = ExitCode.SMOKE_CPU_ONLY

EPILOG = f"""\
examples:
  archwheel smoke dist/torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl
  archwheel smoke dist/my_ext-*.whl --snippet recipes/my_ext/smoke.py --timeout 120
  archwheel smoke dist/*.whl --backend docker --image IMAGE --format json
  archwheel smoke dist/*.whl --backend docker --engine podman --image IMAGE
  archwheel smoke dist/*.whl --output smoke.json       (table on stdout, JSON in smoke.json)
  archwheel smoke --backend existing --interpreter /opt/venv/bin/python  (the deployment as it is)

each kernel runs first with CUDA_DISABLE_PTX_JIT=1 (native cubins only), then, if that fails,
with the JIT allowed: each step reports native, jit-only or no-kernel-image. Without a
device, a --snippet still runs its CPU part (CUDA hidden). --backend venv reuses a kept base
venv of the wheels' requirements (hard-linked; --fresh-venv: a new one).

exit codes: 0 all native and correct, 1 wrong results or errors (or torch does not import),
2 usage, 4 the environment or install failed, {_NO_DEVICE} no CUDA device,
{_JIT_ONLY} some kernels only through the PTX JIT, {_NO_KERNEL_IMAGE} no kernel image,
{_HANG_OR_CRASH} a step hung or crashed, {_CPU_ONLY} no CUDA device but the snippet's CPU
part (CUDA hidden) passed (docs/smoke.md)
"""


def register(subparsers: Any) -> None:
    """Add ``smoke`` to the command line, with its flags, help and examples (``cli.build_parser``
    calls each command module's ``register`` with its subparsers)."""
    parser = subparsers.add_parser(
        "smoke",
        help=SUMMARY["smoke"],
        description=(
            "Install wheels in a fresh virtual environment (or containers with the GPUs "
            "attached, docker or podman), then run real kernels on every GPU under a watchdog "
            "and compare them with a CPU reference. Each step reports native, jit-only or "
            "no-kernel-image."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "wheels", nargs="*", type=path_argument, metavar="WHEEL", help="wheels to test"
    )
    parser.add_argument(
        "--backend",
        choices=("venv", "docker", "existing"),
        default="venv",
        help="where to run: a fresh venv (default), containers (--engine), "
        "or an existing --interpreter",
    )
    parser.add_argument(
        "--timeout",
        type=positive_number,
        metavar="SECONDS",
        help=f"time limit of each step (default {STEP_TIMEOUT_SHOWN})",
    )
    parser.add_argument(
        "--install-timeout",
        type=positive_number,
        metavar="SECONDS",
        help=f"time limit of the install (default {INSTALL_TIMEOUT_SHOWN})",
    )
    index = parser.add_mutually_exclusive_group()
    index.add_argument(
        "--index-url",
        type=location_text,
        metavar="URL",
        help="package index for the wheels' requirements",
    )
    add_alias(index, "--index", dest="index_url", replacement="--index-url URL", metavar="URL")
    index.add_argument("--find-links", type=location_path, metavar="DIR", help="a folder of wheels")
    parser.add_argument(
        "--snippet", type=path_argument, metavar="FILE", help="the recipe's smoke snippet (Python)"
    )
    parser.add_argument(
        "--steps",
        metavar="LIST",
        help=f"comma list of kernel steps (default: {KERNEL_STEPS_SHOWN})",
    )
    parser.add_argument(
        "--device",
        type=non_negative_int,
        action="append",
        metavar="N",
        help="only this device, 0 or more (repeatable)",
    )
    add_interpreter_option(
        parser, "venv: the interpreter to create it from; existing: the interpreter to test"
    )
    parser.add_argument(
        "--image", metavar="IMAGE", help="--backend docker: the image (python3 with venv)"
    )
    parser.add_argument(
        "--engine",
        choices=ENGINES_SHOWN,
        default="docker",
        help="--backend docker: the container engine (default docker)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the environment's folder (for debugging)"
    )
    parser.add_argument(
        "--fresh-venv",
        action="store_true",
        help="--backend venv: install everything into a new venv instead of a hard-linked copy "
        "of the kept base venv of the wheels' requirements (under the cache folder)",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument(
        "--output",
        type=path_argument,
        metavar="FILE",
        help="also write the JSON report to FILE (whatever --format prints)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    parser.set_defaults(func=run)


@dataclass(frozen=True)
class SmokeRequest:
    """``archwheel smoke``, parsed (the environment is made and checked from it)."""

    wheels: tuple[Path, ...]
    backend: str
    timeout: float
    install_timeout: float
    index_url: str | None
    find_links: Path | None
    snippet: Path | None
    steps: str | None  # the comma list as given; checked after the environment
    devices: tuple[int, ...] | None
    interpreter: str | None
    image: str | None
    engine: str
    keep: bool
    fresh_venv: bool
    format: str
    output: Path | None
    quiet: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SmokeRequest:
        """The request of parsed ``args``, with the default timeouts; an ``--output`` that cannot be
        written is refused before any environment is made."""
        from archwheel.smoke import DEFAULT_INSTALL_TIMEOUT, DEFAULT_STEP_TIMEOUT

        if args.output is not None:
            check_output(args.output)  # before an environment is made
        return cls(
            wheels=tuple(args.wheels),
            backend=args.backend,
            timeout=DEFAULT_STEP_TIMEOUT if args.timeout is None else args.timeout,
            install_timeout=(
                DEFAULT_INSTALL_TIMEOUT if args.install_timeout is None else args.install_timeout
            ),
            index_url=args.index_url,
            find_links=args.find_links,
            snippet=args.snippet,
            steps=args.steps,
            devices=tuple(args.device) if args.device else None,
            interpreter=args.interpreter,
            image=args.image,
            engine=args.engine,
            keep=args.keep,
            fresh_venv=args.fresh_venv,
            format=args.format,
            output=args.output,
            quiet=args.quiet or args.format == "json",
        )

    @property
    def smoke_run(self) -> SmokeRun:
        """The run the smoke use case makes of the request."""
        from archwheel.smoke import EnvironmentOptions, SmokeRun

        environment = EnvironmentOptions(
            wheels=self.wheels,
            backend=self.backend,
            install_timeout=self.install_timeout,
            index_url=self.index_url,
            find_links=self.find_links,
            snippet=self.snippet,
            interpreter=self.interpreter,
            image=self.image,
            engine=self.engine,
            keep=self.keep,
            fresh_venv=self.fresh_venv,
            settings=environment_settings(),
        )
        return SmokeRun(environment, self.timeout, self.steps, self.devices)


def run(args: argparse.Namespace) -> int:
    """``archwheel smoke``: install the wheels in a fresh environment, run the kernels, print the
    report whatever happened and exit with its verdict."""
    import json
    import signal
    import sys

    from rich.console import Console

    from archwheel.interfaces.render.common import echo_to
    from archwheel.interfaces.render.smoke import progress_line, render
    from archwheel.smoke import smoke

    request = SmokeRequest.from_args(args)
    err = Console(stderr=True, highlight=False)
    quiet = request.quiet
    # SIGTERM (a CI job's timeout, `timeout`) interrupts like Ctrl-C: the running step is
    # killed and the report of what ran so far still comes out.
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        report = smoke(
            request.smoke_run,
            echo=None if quiet else echo_to(err, style="dim", soft_wrap=True),
            progress=None if quiet else (lambda msg: err.print(progress_line(msg))),
        )
    finally:
        signal.signal(signal.SIGTERM, previous)
    document = json.dumps(report.to_json_dict(), indent=2, allow_nan=False) + "\n"
    if request.format == "json":
        sys.stdout.write(document)
    else:
        render(report, Console(highlight=False))
    if request.output is not None:
        # Whole or not at all (no partial file); one that cannot be written is an
        # ``OutputError`` like every command's output, after the report came out.
        write_output(request.output, document)
    return report.exit_code


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
