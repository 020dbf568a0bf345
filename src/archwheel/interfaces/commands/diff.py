"""``archwheel diff OLD NEW``: what a new build gained and lost, as a CI regression gate."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from archwheel.interfaces.commands import SUMMARY
from archwheel.interfaces.commands.options import path_argument
from archwheel.interfaces.render.formats import FORMATS

DESCRIPTION = """\
Compare two builds: two wheels (or libraries, directories), or two documents written by
`archwheel audit --format json`. Per library: SASS/PTX archs added and dropped, stored size per
arch before and after, libraries that gained or lost device code; for wheels also the version,
the CUDA runtime, the torch requirement and the nvidia-*/cuda-* pins that changed.

exit codes: 0 no arch lost; 1 an arch OLD had is missing in NEW (a library present on both
sides dropped it, or it is gone from the whole build); 3 an input could not be read completely;
2 usage error."""

EXAMPLES = """\
examples:
  archwheel diff dist-old/myext-1.0-*.whl dist/myext-1.1-*.whl
  archwheel audit old.whl --format json -o old.json && archwheel diff old.json new.whl
  archwheel diff old.json new.json --format markdown >> $GITHUB_STEP_SUMMARY
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``diff`` to the command line, with its flags, help and examples (``cli.build_parser``
    calls each command module's ``register`` with its subparsers)."""
    p = sub.add_parser(
        "diff",
        help=SUMMARY["diff"],
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "old", type=path_argument, metavar="OLD", help="wheel, library, directory or audit JSON"
    )
    p.add_argument(
        "new", type=path_argument, metavar="NEW", help="wheel, library, directory or audit JSON"
    )
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")
    p.set_defaults(func=run)


@dataclass(frozen=True)
class DiffRequest:
    """``archwheel diff``, parsed."""

    old: Path
    new: Path
    format: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DiffRequest:
        """The request of parsed ``args`` (argparse has already checked each flag's type)."""
        return cls(old=args.old, new=args.new, format=args.format)


def run(args: argparse.Namespace) -> int:
    """``archwheel diff``: compare two builds' device code, print what NEW lost or gained, exit 1 on
    a regression (a CI gate)."""
    import sys

    from archwheel.inspection import diff_builds
    from archwheel.interfaces.render.common import console, dump_json
    from archwheel.interfaces.render.diff import render_markdown, render_table

    request = DiffRequest.from_args(args)
    report = diff_builds(request.old, request.new)
    if request.format == "json":
        dump_json(report.to_json())
    elif request.format == "markdown":
        sys.stdout.write(render_markdown(report))
    else:
        render_table(report, console())
    return report.exit_code
