"""``archwheel smoke``: install wheels in an isolated environment and run real kernels on the GPU.

The report (a table, or JSON with ``--format json``) always comes out, whatever happened;
the exit code carries the verdict (docs/smoke.md).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from archwheel.effects.engine import ENGINES, ContainerEngine, EngineSettings
from archwheel.effects.files import write_text_atomic
from archwheel.effects.paths import cache_dir
from archwheel.effects.process import Echo
from archwheel.effects.watchdog import Watchdog
from archwheel.errors import UsageError
from archwheel.interfaces.commands.options import (
    add_alias,
    add_interpreter_option,
    non_negative_int,
    positive_number,
)
from archwheel.interfaces.render.common import echo_to
from archwheel.interfaces.render.smoke import progress_line, render, unwritable_output
from archwheel.smoke.environments import (
    DEFAULT_INSTALL_TIMEOUT,
    ContainerEnvironment,
    ExistingEnvironment,
    IndexOptions,
    SmokeEnvironment,
    VenvEnvironment,
    check_interpreter,
)
from archwheel.smoke.runner import (
    DEFAULT_STEP_TIMEOUT,
    SmokeSettings,
    can_run_for,
    run_smoke,
)
from archwheel.verdicts.smoke import (
    EXIT_HANG_OR_CRASH,
    EXIT_JIT_ONLY,
    EXIT_NO_DEVICE,
    EXIT_NO_KERNEL_IMAGE,
    KERNEL_STEPS,
)

EPILOG = f"""\
examples:
  archwheel smoke dist/torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl
  archwheel smoke dist/my_ext-*.whl --snippet recipes/my_ext/smoke.py --timeout 120
  archwheel smoke dist/*.whl --backend docker --image IMAGE --format json
  archwheel smoke dist/*.whl --backend docker --engine podman --image IMAGE
  archwheel smoke dist/*.whl --output smoke.json       (table on stdout, JSON in smoke.json)
  archwheel smoke --backend existing --interpreter /opt/venv/bin/python  (the deployment as it is)

each kernel runs first with CUDA_DISABLE_PTX_JIT=1 (native cubins only), then, if that fails,
with the JIT allowed: each step reports native, jit-only or no-kernel-image.

exit codes: 0 all native and correct, 1 wrong results or errors (or torch does not import),
2 usage, 4 the environment or install failed, {EXIT_NO_DEVICE} no CUDA device,
{EXIT_JIT_ONLY} some kernels only through the PTX JIT, {EXIT_NO_KERNEL_IMAGE} no kernel image,
{EXIT_HANG_OR_CRASH} a step hung or crashed (docs/smoke.md)
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "smoke",
        help="install wheels in a fresh environment and prove their kernels run on this GPU",
        description=(
            "Install wheels in a fresh virtual environment (or containers with the GPUs "
            "attached, docker or podman), then run real kernels on every GPU under a watchdog "
            "and compare them with a CPU reference. Each step reports native, jit-only or "
            "no-kernel-image."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("wheels", nargs="*", type=Path, metavar="WHEEL", help="wheels to test")
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
        default=DEFAULT_STEP_TIMEOUT,
        metavar="SECONDS",
        help=f"time limit of each step (default {DEFAULT_STEP_TIMEOUT:g})",
    )
    parser.add_argument(
        "--install-timeout",
        type=positive_number,
        default=DEFAULT_INSTALL_TIMEOUT,
        metavar="SECONDS",
        help=f"time limit of the install (default {DEFAULT_INSTALL_TIMEOUT:g})",
    )
    index = parser.add_mutually_exclusive_group()
    index.add_argument(
        "--index-url", metavar="URL", help="package index for the wheels' requirements"
    )
    add_alias(index, "--index", dest="index_url", replacement="--index-url URL", metavar="URL")
    index.add_argument("--find-links", type=Path, metavar="DIR", help="a folder of wheels")
    parser.add_argument(
        "--snippet", type=Path, metavar="FILE", help="the recipe's smoke snippet (Python)"
    )
    parser.add_argument(
        "--steps",
        metavar="LIST",
        help=f"comma list of kernel steps (default: {','.join(KERNEL_STEPS)})",
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
        choices=ENGINES,
        default="docker",
        help="--backend docker: the container engine (default docker)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the environment's folder (for debugging)"
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument(
        "--output",
        type=Path,
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
    format: str
    output: Path | None
    quiet: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SmokeRequest:
        if args.output is not None and not args.output.resolve().parent.is_dir():
            raise UsageError(f"--output: folder {args.output.parent} does not exist")
        return cls(
            wheels=tuple(args.wheels),
            backend=args.backend,
            timeout=args.timeout,
            install_timeout=args.install_timeout,
            index_url=args.index_url,
            find_links=args.find_links,
            snippet=args.snippet,
            steps=args.steps,
            devices=tuple(args.device) if args.device else None,
            interpreter=args.interpreter,
            image=args.image,
            engine=args.engine,
            keep=args.keep,
            format=args.format,
            output=args.output,
            quiet=args.quiet or args.format == "json",
        )


def run(args: argparse.Namespace) -> int:
    request = SmokeRequest.from_args(args)
    err = Console(stderr=True, highlight=False)
    quiet = request.quiet
    progress = None if quiet else (lambda msg: err.print(progress_line(msg)))
    echo = None if quiet else echo_to(err, style="dim", soft_wrap=True)
    environment = _environment(request, echo)
    settings = SmokeSettings(
        step_timeout=_positive(request.timeout, "--timeout"),
        steps=_steps(request.steps),
        devices=request.devices,
    )
    inputs = [str(w) for w in request.wheels] or [environment.description]
    wheels = list(request.wheels)
    # SIGTERM (a CI job's timeout, `timeout`) interrupts like Ctrl-C: the running step is
    # killed and the report of what ran so far still comes out.
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        report = run_smoke(
            environment,
            inputs,
            settings,
            watchdog=Watchdog(),
            progress=progress,
            can_run=can_run_for(wheels, installed_python=_installed_python(request)),
        )
    finally:
        signal.signal(signal.SIGTERM, previous)
    document = json.dumps(report.to_json_dict(), indent=2, allow_nan=False) + "\n"
    if request.output is not None:
        try:
            write_text_atomic(request.output, document)  # whole or not at all: no partial file
        except OSError as exc:
            err.print(unwritable_output(request.output, exc.strerror))
    if request.format == "json":
        sys.stdout.write(document)
    else:
        render(report, Console(highlight=False))
    return report.exit_code


def _installed_python(request: SmokeRequest) -> str | None:
    return str(request.interpreter) if request.backend == "existing" else None


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _positive(value: float, flag: str) -> float:
    if not value > 0:
        raise UsageError(f"{flag} must be a positive number of seconds, not {value:g}")
    return value


def _steps(text: str | None) -> tuple[str, ...]:
    if not text:
        return KERNEL_STEPS
    steps = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [s for s in steps if s not in KERNEL_STEPS]
    if unknown or not steps:
        raise UsageError(
            f"unknown smoke step {', '.join(unknown) or '(none)'}",
            hint=f"choose from {','.join(KERNEL_STEPS)}",
        )
    return steps


def _environment(request: SmokeRequest, echo: Echo | None) -> SmokeEnvironment:
    if request.snippet is not None and not request.snippet.is_file():
        raise UsageError(f"smoke snippet not found: {request.snippet}")
    if request.find_links is not None and not request.find_links.is_dir():
        raise UsageError(f"--find-links folder not found: {request.find_links}")
    index = IndexOptions(index_url=request.index_url, find_links=request.find_links)
    install_timeout = _positive(request.install_timeout, "--install-timeout")
    if request.backend == "existing":
        if request.wheels:
            raise UsageError(
                "--backend existing installs nothing; "
                "it tests the interpreter given by --interpreter",
                hint="drop the wheels, or use --backend venv",
            )
        if not request.interpreter:
            raise UsageError(
                "--backend existing needs --interpreter PATH (an interpreter with torch)"
            )
        return ExistingEnvironment(
            python=check_interpreter(request.interpreter), snippet=request.snippet
        )
    if not request.wheels:
        raise UsageError(
            "no wheels given",
            hint="archwheel smoke WHEEL... (or --backend existing --interpreter PY)",
        )
    if request.backend == "docker":
        if not request.image:
            raise UsageError(
                "--backend docker needs --image IMAGE (an image with python3 and venv)",
                hint="the builder image has them (`archwheel build` makes it)",
            )
        settings = EngineSettings.create(request.engine, config_dir=cache_dir())
        return ContainerEnvironment(
            wheels=tuple(request.wheels),
            image=request.image,
            engine=ContainerEngine(settings, echo=echo),
            index=index,
            snippet=request.snippet,
            install_timeout=install_timeout,
            keep=request.keep,
        )
    return VenvEnvironment(
        wheels=tuple(request.wheels),
        index=index,
        snippet=request.snippet,
        python=check_interpreter(request.interpreter) if request.interpreter else sys.executable,
        install_timeout=install_timeout,
        keep=request.keep,
    )
