"""``archwheel smoke``: install wheels in an isolated environment and run real kernels on the GPU.

The report (a table, or JSON with ``--format json``) always comes out, whatever happened;
the exit code carries the verdict (docs/smoke.md).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from archwheel.effects.engine import ENGINES, ContainerEngine, EngineSettings
from archwheel.effects.paths import cache_dir
from archwheel.effects.process import Echo
from archwheel.effects.watchdog import Watchdog
from archwheel.errors import UsageError
from archwheel.smoke.environments import (
    DEFAULT_INSTALL_TIMEOUT,
    ContainerEnvironment,
    ExistingEnvironment,
    IndexOptions,
    SmokeEnvironment,
    VenvEnvironment,
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
    SmokeReport,
    SmokeVerdict,
    StepVerdict,
)

EPILOG = f"""\
examples:
  archwheel smoke dist/torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl
  archwheel smoke dist/my_ext-*.whl --snippet recipes/my_ext/smoke.py --timeout 120
  archwheel smoke dist/*.whl --backend docker --image IMAGE --format json
  archwheel smoke dist/*.whl --backend docker --engine podman --image IMAGE
  archwheel smoke dist/*.whl --output smoke.json       (table on stdout, JSON in smoke.json)
  archwheel smoke --backend existing --python /opt/venv/bin/python   (the deployment as it is)

each kernel runs first with CUDA_DISABLE_PTX_JIT=1 (native cubins only), then, if that fails,
with the JIT allowed: each step reports native, jit-only or no-kernel-image.

exit codes: 0 all native and correct, 1 wrong results or errors (or torch does not import),
2 usage, 4 the environment or install failed, {EXIT_NO_DEVICE} no CUDA device,
{EXIT_JIT_ONLY} some kernels only through the PTX JIT, {EXIT_NO_KERNEL_IMAGE} no kernel image,
{EXIT_HANG_OR_CRASH} a step hung or crashed (docs/smoke.md)
"""

VERDICT_STYLES = {
    StepVerdict.NATIVE: "green",
    StepVerdict.JIT_ONLY: "yellow",
    StepVerdict.SKIPPED: "dim",
    StepVerdict.NO_KERNEL_IMAGE: "red",
    StepVerdict.WRONG_RESULT: "bold red",
    StepVerdict.ERROR: "red",
    StepVerdict.HANG: "bold red",
    StepVerdict.CRASH: "bold red",
}


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
        help="where to run: a fresh venv (default), containers (--engine), or an existing --python",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_STEP_TIMEOUT,
        metavar="SECONDS",
        help=f"time limit of each step (default {DEFAULT_STEP_TIMEOUT:g})",
    )
    parser.add_argument(
        "--install-timeout",
        type=float,
        default=DEFAULT_INSTALL_TIMEOUT,
        metavar="SECONDS",
        help=f"time limit of the install (default {DEFAULT_INSTALL_TIMEOUT:g})",
    )
    index = parser.add_mutually_exclusive_group()
    index.add_argument("--index", metavar="URL", help="package index for the requirements")
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
        "--device", type=int, action="append", metavar="N", help="only this device (repeatable)"
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="venv: the interpreter to create it from; existing: the interpreter to test",
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


def run(args: argparse.Namespace) -> int:
    if args.output is not None and not args.output.resolve().parent.is_dir():
        raise UsageError(f"--output: folder {args.output.parent} does not exist")
    err = Console(stderr=True, highlight=False)
    quiet = args.quiet or args.format == "json"
    progress = None if quiet else (lambda msg: err.print(f"[dim]smoke: {msg}[/dim]"))
    echo = (
        None if quiet else (lambda line: err.print(line, markup=False, style="dim", soft_wrap=True))
    )
    environment = _environment(args, echo)
    settings = SmokeSettings(
        step_timeout=_positive(args.timeout, "--timeout"),
        steps=_steps(args.steps),
        devices=tuple(args.device) if args.device else None,
    )
    inputs = [str(w) for w in args.wheels] or [environment.description]
    wheels = [Path(w) for w in args.wheels]
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
            can_run=can_run_for(wheels, installed_python=_installed_python(args)),
        )
    finally:
        signal.signal(signal.SIGTERM, previous)
    document = json.dumps(report.to_json_dict(), indent=2, allow_nan=False) + "\n"
    if args.output is not None:
        try:
            args.output.write_text(document, encoding="utf-8")
        except OSError as exc:
            err.print(f"archwheel: warning: could not write {args.output}: {exc.strerror}")
    if args.format == "json":
        sys.stdout.write(document)
    else:
        render(report, Console(highlight=False))
    return report.exit_code


def _installed_python(args: argparse.Namespace) -> str | None:
    return str(args.python) if args.backend == "existing" else None


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


def _environment(args: argparse.Namespace, echo: Echo | None) -> SmokeEnvironment:
    if args.snippet is not None and not args.snippet.is_file():
        raise UsageError(f"smoke snippet not found: {args.snippet}")
    if args.find_links is not None and not args.find_links.is_dir():
        raise UsageError(f"--find-links folder not found: {args.find_links}")
    index = IndexOptions(index_url=args.index, find_links=args.find_links)
    install_timeout = _positive(args.install_timeout, "--install-timeout")
    if args.backend == "existing":
        if args.wheels:
            raise UsageError(
                "--backend existing installs nothing; it tests the interpreter given by --python",
                hint="drop the wheels, or use --backend venv",
            )
        if not args.python:
            raise UsageError("--backend existing needs --python PATH (an interpreter with torch)")
        return ExistingEnvironment(python=args.python, snippet=args.snippet)
    if not args.wheels:
        raise UsageError(
            "no wheels given", hint="archwheel smoke WHEEL... (or --backend existing --python PY)"
        )
    if args.backend == "docker":
        if not args.image:
            raise UsageError(
                "--backend docker needs --image IMAGE (an image with python3 and venv)",
                hint="the builder image has them (`archwheel build` makes it)",
            )
        settings = EngineSettings.create(args.engine, config_dir=cache_dir())
        return ContainerEnvironment(
            wheels=tuple(args.wheels),
            image=args.image,
            engine=ContainerEngine(settings, echo=echo),
            index=index,
            snippet=args.snippet,
            install_timeout=install_timeout,
            keep=args.keep,
        )
    return VenvEnvironment(
        wheels=tuple(args.wheels),
        index=index,
        snippet=args.snippet,
        python=args.python or sys.executable,
        install_timeout=install_timeout,
        keep=args.keep,
    )


# --------------------------------------------------------------------------------------------
# the human rendering


def render(report: SmokeReport, console: Console) -> None:
    data = report.to_json_dict()
    software = data["software"]
    console.print(f"[bold]archwheel smoke[/bold]  {', '.join(report.inputs)}")
    console.print(f"environment: {report.environment}")
    facts = [
        ("torch", software["torch"]),
        ("CUDA", software["torch_cuda"]),
        ("cuDNN", software["cudnn"]),
        ("NCCL", software["nccl"]),
        ("driver", software["driver"]),
        ("python", software["python"]),
    ]
    shown = "  ".join(f"{k} {v}" for k, v in facts if v)
    if shown:
        console.print(shown)
    if software["arch_list"]:
        console.print(f"compiled arch list: {' '.join(software['arch_list'])}")
    for stage in report.stages:
        if not stage.ok:
            console.print(f"[red]{stage.name} failed[/red]: {stage.detail}")
            for line in stage.log_tail[-6:]:
                console.print(Text(f"    {line}", style="dim"))
    if report.devices:
        table = Table(title="devices", title_justify="left")
        for col in ("#", "name", "cc", "memory", "compiled arch list vs device"):
            table.add_column(col)
        for d in report.devices:
            memory = f"{d.total_memory / 2**30:.0f} GiB" if d.total_memory else "?"
            check = d.arch_check.one_line() if d.arch_check else "?"
            table.add_row(str(d.index), d.name, d.cc, memory, check)
        console.print(table)
    if report.steps:
        table = Table(title="kernels", title_justify="left")
        for col in ("dev", "step", "verdict", "evidence"):
            table.add_column(col)
        for s in report.steps:
            evidence = s.detail
            if s.explanation:
                evidence = f"{evidence}\n{s.explanation}" if evidence else s.explanation
            table.add_row(
                str(s.device),
                s.step,
                Text(s.verdict.value, style=VERDICT_STYLES.get(s.verdict, "")),
                evidence,
            )
        console.print(table)
    style = "green" if report.verdict is SmokeVerdict.PASSED else "bold red"
    if report.verdict is SmokeVerdict.JIT_ONLY:
        style = "yellow"
    console.print(
        Text(f"verdict: {report.verdict.value}: {report.message}", style=style),
        Text(f"(exit {report.exit_code})", style="dim"),
    )
