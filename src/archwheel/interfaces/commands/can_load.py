"""``archwheel can-load``: will this wheel's libraries load next to that torch?"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from archwheel.exit_codes import EXIT_INCOMPLETE, EXIT_OK, EXIT_VERDICT_FAILED
from archwheel.interfaces.commands import SUMMARY
from archwheel.interfaces.commands.options import (
    add_interpreter_option,
    environment_settings,
    location_text,
    net_budget,
    path_argument,
)
from archwheel.interfaces.render.formats import FORMATS

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from rich.console import Console

    from archwheel.inspection import ImportCheck, TorchRangeReport
    from archwheel.verdicts import LoadReport

DESCRIPTION = """\
For every shared library of WHEEL, resolve each DT_NEEDED as the dynamic loader would after
`import torch` (the wheels' own libraries, $ORIGIN-relative RPATH/RUNPATH, the --with wheels laid
out as pip installs them, the libraries torch has loaded, the system libraries the manylinux
policy allows) and match every undefined dynamic symbol (with its version) against what it
resolves to. Nothing is installed or extracted; no GPU is needed.

With --torch VERSIONS|RANGE instead of --with, the torch wheels of those releases are found on
the package indexes pip is configured with (for WHEEL's Python and machine) and read by HTTP
range requests, only as far as the loader's tables lie; the answer is one line per release.

A WHEEL built for a CPython this host does not run (cp313 here on Python 3.11) is also imported
for real, with the --with wheels, in a container of the archwheel Debian base that has that
Python (archwheel/debian:trixie for 3.13; --network none, installed from the local files), and
that base's libc/libstdc++ stand in for the system libraries (docs/verdicts.md).

exit codes: 0 every library loads (with --torch: with every release); 1 some library does not
load (with some release); 3 an input could not be read completely or something could not be
checked (also: a release not on the index); 2 usage error (no torch among --with, two torches,
a bad --torch); 4 the engine or base image the import check needs is missing."""

EXAMPLES = """\
examples:
  archwheel can-load dist/myext-1.0-cp311-cp311-linux_x86_64.whl --with torch-2.14.1-*.whl
  archwheel can-load torchvision-0.29.1-*.whl --with torch-2.13.0+cpu-*.whl --format markdown
  archwheel can-load dist/myext-*.whl --torch ">=2.13,<2.16"          every release in a range
  archwheel can-load dist/myext-*.whl --torch 2.13.0,2.14.1,2.15.0     these releases
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``can-load`` to the command line, with its flags, help and examples
    (``cli.build_parser`` calls each command module's ``register`` with its subparsers)."""
    p = sub.add_parser(
        "can-load",
        help=SUMMARY["can-load"],
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("wheel", type=path_argument, metavar="WHEEL", help="the wheel to judge")
    p.add_argument(
        "--with",
        dest="with_wheels",
        action="append",
        default=[],
        type=path_argument,
        metavar="WHEEL",
        help="a wheel installed next to it: exactly one torch, and any others (nvidia-*); "
        "repeatable",
    )
    p.add_argument(
        "--installed",
        action="store_true",
        help="judge against the torch (and nvidia-* packages) installed in this environment "
        "(or --interpreter's) instead of --with wheels",
    )
    p.add_argument(
        "--torch",
        metavar="VERSIONS|RANGE",
        help="judge against each torch release of a list (2.13.0,2.14.1) or a range "
        '(">=2.11"), read from the package index instead of --with wheels',
    )
    p.add_argument(
        "--python-version",
        metavar="X.Y",
        help="with --torch: the Python whose torch builds to read, for a wheel whose tags name "
        "none (abi3, py3-none)",
    )
    p.add_argument(
        "--index-url",
        type=location_text,
        metavar="URL",
        help="with --torch: look on this index instead of pip's configured ones",
    )
    add_interpreter_option(p, "the interpreter whose environment --installed reads")
    p.add_argument(
        "--engine",
        choices=("docker", "podman"),
        default="docker",
        help="the container engine of the import check of a wheel for another Python",
    )
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")
    p.add_argument(
        "--no-host-libraries",
        action="store_true",
        help="do not read this machine's libc/libstdc++ as stand-ins for the system libraries",
    )
    p.set_defaults(func=run)


@dataclass(frozen=True)
class CanLoadRequest:
    """``archwheel can-load``, parsed."""

    wheel: Path
    with_wheels: tuple[Path, ...]
    installed: bool
    interpreter: str | None
    host_libraries: bool
    format: str
    torch: str | None = None
    python_version: str | None = None
    index_url: str | None = None
    engine: str = "docker"

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CanLoadRequest:
        """The request of parsed ``args``: ``--torch`` with ``--with``/``--installed``, or its
        options without it, is a usage error (exit 2)."""
        from archwheel.errors import UsageError

        if args.torch is not None and (args.with_wheels or args.installed):
            raise UsageError("give --torch, or --with wheels, or --installed: one of them")
        if args.torch is None and (args.python_version or args.index_url is not None):
            raise UsageError("--python-version and --index-url go with --torch")
        return cls(
            wheel=args.wheel,
            with_wheels=tuple(args.with_wheels),
            installed=args.installed,
            interpreter=args.interpreter,
            host_libraries=not args.no_host_libraries,
            format=args.format,
            torch=args.torch,
            python_version=args.python_version,
            index_url=args.index_url,
            engine=args.engine,
        )


def exit_code(report: LoadReport | TorchRangeReport) -> int:
    """can-load's exit code: 0 every library loads, 1 some does not, 3 unknown (incomplete)."""
    from archwheel.verdicts import LoadVerdict

    return {
        LoadVerdict.LOADS: EXIT_OK,
        LoadVerdict.FAILS: EXIT_VERDICT_FAILED,
        LoadVerdict.UNKNOWN: EXIT_INCOMPLETE,
    }[report.verdict]


def run(args: argparse.Namespace) -> int:
    """``archwheel can-load``: whether the wheel's libraries load next to the torch given
    (``--torch``: each release of a range), printed in the format asked; exit 0, 1 or 3."""
    from archwheel.effects import other_python_of
    from archwheel.inspection import can_load
    from archwheel.interfaces.render.can_load import (
        can_load_json,
        demangled_names,
        render_markdown,
        render_table,
    )

    request = CanLoadRequest.from_args(args)
    if request.torch is not None:
        return run_range(request)
    if request.with_wheels and (python := other_python_of(request.wheel)) is not None:
        return run_in_base(request, python)
    report = can_load(
        request.wheel,
        request.with_wheels,
        installed=request.installed,
        interpreter=request.interpreter,
        host_libraries=request.host_libraries,
    )
    demangled = demangled_names(report)
    _print(
        request.format,
        lambda: can_load_json(report, demangled, exit_code(report)),
        lambda: render_markdown(report, demangled),
        lambda out: render_table(report, out, demangled),
    )
    return exit_code(report)


def run_in_base(request: CanLoadRequest, python: str) -> int:
    """can-load of a wheel for another Python: the import check and the system libraries from
    a container of the base that has it (``inspection.python_container``), then the model."""
    from archwheel.effects import ContainerEngine, EngineSettings
    from archwheel.inspection import can_load_in_base
    from archwheel.interfaces.render.can_load import (
        can_load_json,
        demangled_names,
        render_markdown,
    )
    from archwheel.interfaces.render.common import echo_to, err_console

    engine = ContainerEngine(EngineSettings.create(request.engine, environment_settings()))
    report, check = can_load_in_base(
        engine, request.wheel, request.with_wheels, python,
        host_libraries=request.host_libraries, on_event=echo_to(err_console()),
    )  # fmt: skip
    code = exit_code(report)
    if not check.ok and code == EXIT_OK:
        code = EXIT_VERDICT_FAILED  # the real import is the last word
    demangled = demangled_names(report)
    lines = _import_lines(check)
    _print(
        request.format,
        lambda: {**can_load_json(report, demangled, code), "import_check": check.as_dict()},
        lambda: render_markdown(report, demangled) + "\n" + "\n".join(f"- {x}" for x in lines),
        lambda out: _table_and_lines(report, out, demangled, lines),
    )
    return code


def _table_and_lines(
    report: LoadReport, out: Console, demangled: dict[str, str], lines: list[str]
) -> None:
    from archwheel.interfaces.render.can_load import render_table

    render_table(report, out, demangled)
    for line in lines:
        out.print(line, markup=False, highlight=False)


def _import_lines(check: ImportCheck) -> list[str]:
    """The import check as lines: the image, torch, then each module."""
    head = f"import check in {check.image} (Python {check.suite.python}, no network): " + (
        "every module imports" if check.ok else "FAILS"
    )
    lines = [head, f"import torch: {check.torch_error or 'ok'}"]
    lines += [f"import {module}: {error or 'ok'}" for module, error in check.modules]
    return lines


def run_range(request: CanLoadRequest) -> int:
    """``can-load --torch``: the wheel against each torch release, read from the index."""

    from archwheel.effects import PipSettings
    from archwheel.inspection import can_load_range
    from archwheel.interfaces.render.can_load_range import (
        demangled_range,
        range_json,
        render_range_markdown,
        render_range_table,
    )
    from archwheel.interfaces.render.common import echo_to, err_console

    assert request.torch is not None
    settings = environment_settings()
    budget = net_budget(settings)  # a limit that is not one: refused before anything is read
    pip = PipSettings.from_host()
    if request.index_url is not None:
        pip = PipSettings(index_url=request.index_url, ca_bundle=pip.ca_bundle)
    report = can_load_range(
        request.wheel,
        request.torch,
        pip=pip.validated(),
        cache=settings.cache,
        python=request.python_version,
        host_libraries=request.host_libraries,
        on_event=echo_to(err_console()),
        budget=budget,
    )
    demangled = demangled_range(report)
    _print(
        request.format,
        lambda: range_json(report, demangled, exit_code(report)),
        lambda: render_range_markdown(report, demangled),
        lambda out: render_range_table(report, out, demangled),
    )
    return exit_code(report)


def _print(
    fmt: str,
    document: Callable[[], dict[str, Any]],
    markdown: Callable[[], str],
    table: Callable[[Console], None],
) -> None:
    """One of can-load's three renderings on standard output."""
    import sys

    from archwheel.interfaces.render.common import console, dump_json

    if fmt == "json":
        dump_json(document())
    elif fmt == "markdown":
        sys.stdout.write(markdown())
    else:
        table(console())
