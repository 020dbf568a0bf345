"""``archwheel audit``: which SASS and PTX each library of a wheel really contains."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from archwheel.errors import UsageError
from archwheel.interfaces.commands import SUMMARY
from archwheel.interfaces.commands.options import (
    add_interpreter_option,
    check_output,
    environment_settings,
    path_argument,
    whole_number,
    write_output,
)
from archwheel.interfaces.render.formats import FORMATS

if TYPE_CHECKING:
    from archwheel.facts import ArchList
    from archwheel.interfaces.auditing import AuditCall
    from archwheel.verdicts import AuditReport

DESCRIPTION = """\
Report the device code (SASS cubins per sm_XY, including 'a'/'f' variants, PTX, LTO-IR) that
every library of a wheel, file, directory or installed distribution really contains, read from
the fatbin headers themselves (no CUDA toolkit needed, wheels are never extracted). With
--expect, list every library that lacks a requested image and exit 1. A wheel (or installed
distribution) with a .dist-info/variant.json has its claims checked against its device code:
each property the code does not back is one line, and the exit is 1.

exit codes: 0 ok (or inventory only), 1 something requested is missing or a variant.json
claims what the device code does not back,
3 the input could not be read completely (the report still shows what was read),
2 usage error.

Only regular files are read (FIFOs, devices, /proc refused); links out of a directory input
are not followed. ELF cubins stored outside any fatbin (in .rodata and other data sections)
are found by their ELF header and reported as raw cubins. Limits per binary: 65536 containers,
262144 fatbin entries (16384 per container), 65536 embedded ELF headers; per wheel 200000
members; 20 problems per library and 200 per input are shown (docs/limits.md);
reaching one is a problem naming the input and the limit (exit 3). Text, Markdown and HTML list
at most 500 libraries per input (failing ones first; --format json lists every one)."""

EXAMPLES = """\
examples:
  archwheel audit torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl
  archwheel audit dist/*.whl --expect "8.0;9.0+PTX" --format markdown >> $GITHUB_STEP_SUMMARY
  archwheel audit build/lib/libmykernels.so --expect "sm_90a,sm_100f" --detail
  archwheel audit --installed torch --expect 12.0
  archwheel audit --installed torch --interpreter /opt/venv/bin/python
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``audit`` to the command line, with its flags, help and examples (``cli.build_parser``
    calls each command module's ``register`` with its subparsers)."""
    p = sub.add_parser(
        "audit",
        help=SUMMARY["audit"],
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "inputs",
        nargs="*",
        type=path_argument,
        metavar="INPUT",
        help="wheels (.whl), shared libraries, executables, .o/.a, .cubin, .fatbin, or directories",
    )
    p.add_argument(
        "--installed",
        action="append",
        default=[],
        metavar="DIST",
        help="audit an installed distribution (e.g. torch); repeatable",
    )
    add_interpreter_option(
        p, "interpreter whose environment --installed looks in (default: this one)"
    )
    p.add_argument(
        "--expect",
        metavar="ARCHS",
        help='requested arch list, e.g. "8.0;9.0+PTX", "sm_90a,sm_100f", "Hopper"',
    )
    p.add_argument(
        "--format",
        choices=(*FORMATS, "html"),
        default="table",
        help="output format (html: one self-contained page with a chart, for -o FILE)",
    )
    p.add_argument(
        "-o",
        "--output",
        type=path_argument,
        metavar="FILE",
        help="write the report to FILE instead of standard output",
    )
    p.add_argument(
        "--detail",
        action="store_true",
        help="also list images per section with sizes and compression",
    )
    p.add_argument(
        "--cross-check",
        action="store_true",
        help="also run NVIDIA's cuobjdump on the same libraries and report every "
        "disagreement (installs nvidia-cuda-cuobjdump on demand)",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print only the verdict line and problems (table format)",
    )
    p.add_argument(
        "--workers",
        type=whole_number,
        metavar="N",
        help="threads inflating wheel members (default: up to 4)",
    )
    p.add_argument(
        "--deep",
        action="store_true",
        help="also decompress every payload and check it against its header (cubin machine "
        "and SM, PTX .version/.target, sizes); slow on big wheels",
    )
    p.add_argument(
        "--all-members",
        action="store_true",
        help="also look inside wheel members named like text or Python files",
    )
    p.set_defaults(func=run)


@dataclass(frozen=True)
class AuditRequest:
    """``archwheel audit``, parsed and checked."""

    inputs: tuple[Path, ...]
    installed: tuple[str, ...]
    interpreter: str | None
    expect: ArchList | None
    format: str
    output: Path | None
    detail: bool
    quiet: bool
    workers: int | None
    deep: bool
    all_members: bool
    cross_check: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AuditRequest:
        """The request of parsed ``args``: nothing to audit, or ``--workers`` below 1, is a usage
        error (exit 2)."""
        from archwheel.facts import ArchList

        if not args.inputs and not args.installed:
            raise UsageError(
                "nothing to audit",
                hint="give a wheel, a library or a directory, or --installed NAME",
            )
        if args.workers is not None and args.workers < 1:
            raise UsageError("--workers must be at least 1")
        return cls(
            inputs=tuple(args.inputs),
            installed=tuple(args.installed),
            interpreter=args.interpreter,
            expect=ArchList.parse(args.expect) if args.expect is not None else None,
            format=args.format,
            output=args.output,
            detail=args.detail,
            quiet=args.quiet,
            workers=args.workers,
            deep=args.deep,
            all_members=args.all_members,
            cross_check=args.cross_check,
        )

    @property
    def call(self) -> AuditCall:
        """What the audit use case is asked: the inputs, the scan's options and, with
        ``--cross-check``, the settings that find cuobjdump."""
        from archwheel.interfaces.auditing import AuditCall

        return AuditCall(
            inputs=self.inputs,
            installed=self.installed,
            interpreter=self.interpreter,
            expect=self.expect,
            workers=self.workers,
            deep=self.deep,
            all_members=self.all_members,
            cross_check=environment_settings() if self.cross_check else None,
        )

    @property
    def shows_progress(self) -> bool:
        """True when a scan progress bar is shown: table format, not quiet, standard error a
        terminal."""
        return not self.quiet and self.format == "table" and sys.stderr.isatty()


def run(args: argparse.Namespace) -> int:
    """``archwheel audit``: audit the inputs (and cross-check them with cuobjdump when asked), print
    the report, exit with its verdict."""
    from archwheel.interfaces.auditing import audit_and_cross_check
    from archwheel.interfaces.render.crosscheck import AuditProgress, print_cross_check

    request = AuditRequest.from_args(args)
    if request.output is not None:
        check_output(request.output)  # before a scan that may take minutes
    progress = AuditProgress(scan_bar=request.shows_progress, quiet=request.quiet)
    try:
        outcome = audit_and_cross_check(
            request.call,
            on_progress=progress.scanning,
            on_scanned=progress.scanned,
            on_check=progress.checking,
            while_scanning=lambda: _renderer(request),
        )
    finally:
        progress.close()
    if outcome.cross_check is not None:
        print_cross_check(outcome.cross_check, quiet=request.quiet)
    _emit(request, list(outcome.reports))
    return outcome.exit_code


def _renderer(request: AuditRequest) -> None:
    """Import what ``_emit`` needs for the request's format (called while the scan's workers
    run: see ``audit_inputs``)."""
    import importlib

    if request.format == "html":
        importlib.import_module("archwheel.interfaces.render.html")
    elif request.format != "json":
        importlib.import_module("archwheel.interfaces.render.audit")


def _emit(request: AuditRequest, reports: list[AuditReport]) -> None:
    """The report on standard output, or written atomically to ``--output``."""
    import io

    from archwheel.interfaces.render.formats import dump_json
    from archwheel.verdicts import audit_document

    if request.format == "html":
        from archwheel.interfaces.render.html import audit_html

        page = audit_html(reports)  # before the file opens: no empty file when it fails
        if request.output is not None:
            write_output(request.output, page)
        else:
            sys.stdout.write(page)
        return
    stream = io.StringIO() if request.output else None
    if request.format == "json":
        dump_json(audit_document(reports), stream)
    else:
        from archwheel.interfaces.render.audit import render_markdown, render_quiet, render_table
        from archwheel.interfaces.render.common import console

        if request.format == "markdown":
            (stream or sys.stdout).write(render_markdown(reports, detail=request.detail))
        elif request.quiet:
            render_quiet(reports, console(stream))
        else:
            render_table(reports, console(stream), detail=request.detail)
    if request.output is not None and stream is not None:
        write_output(request.output, stream.getvalue())
