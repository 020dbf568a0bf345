"""``archwheel clean``: list and remove what killed runs left on this machine."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from archwheel.interfaces.commands import SUMMARY
from archwheel.interfaces.commands.options import (
    environment_settings,
    existing_folder,
    path_argument,
)

EXAMPLES = """\
examples:
  archwheel clean --dry-run                     list what killed runs left, remove nothing
  archwheel clean                               remove it
  archwheel clean --index /srv/wheels           also an index's unfinished publishes
  archwheel clean --engine podman --format json

What it removes, and only that: containers labelled archwheel.owner whose run has ended;
temporary folders (archwheel-work-*, -stage-*, -cache-*, -smoke-*) with an owner record whose
run has ended; with --index, trees a publish wrote but never swapped in. A live run's, another
host's, and anything without an owner record are left alone. Each build, smoke and publish
removes the same leftovers of its own kind when it starts, and says so.

With --index, only what lies in the index's own layout is touched: trees/<id> folders newer
than the one current names (never what a link leads to). An index whose current leads out of
trees/, whose trees/ is a link, or whose .lock is not a regular file is refused untouched.

exit codes: 0 nothing left (or --dry-run), 1 something could not be removed, 2 usage error
(an --index that is no folder, or whose current, trees/ or .lock archwheel did not make),
4 the engine given with --engine is missing or does not answer
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "clean",
        help=SUMMARY["clean"],
        description=(
            "Finds the containers, temporary folders and unfinished index trees that archwheel "
            "runs which were killed (SIGKILL, a CI timeout, a lost machine) could not remove, "
            "by their owner records, and removes them."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--engine",
        choices=("docker", "podman", "none"),
        default=None,
        help="the container engine to clean (default: docker, skipped with a line when it "
        "does not answer; none: no containers)",
    )
    parser.add_argument(
        "--temp",
        type=path_argument,
        action="append",
        default=[],
        metavar="DIR",
        help="a folder builds used as their work root (default: the system's temporary folder)",
    )
    parser.add_argument(
        "--index",
        type=path_argument,
        action="append",
        default=[],
        metavar="DIR",
        help="an index published by archwheel: remove its unfinished publishes too",
    )
    parser.add_argument("--dry-run", action="store_true", help="list only; remove nothing")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(func=run)


@dataclass(frozen=True)
class CleanRequest:
    """``archwheel clean``, parsed."""

    engine: str | None  # None: docker when it answers
    temp_roots: tuple[Path | None, ...]
    indexes: tuple[Path, ...]
    dry_run: bool
    format: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CleanRequest:
        return cls(
            engine=args.engine,
            temp_roots=tuple(args.temp) or (None,),
            indexes=tuple(args.index),
            dry_run=args.dry_run,
            format=args.format,
        )


def run(args: argparse.Namespace) -> int:
    from archwheel.effects import ContainerEngine, EngineSettings
    from archwheel.errors import ToolError
    from archwheel.housekeeping import find_leftovers, remove_leftovers
    from archwheel.interfaces.render.clean import CleanReport, print_clean
    from archwheel.matrix import unfinished_publishes

    request = CleanRequest.from_args(args)
    for index in request.indexes:
        existing_folder("--index", index, "an index folder that archwheel published")
    settings = environment_settings()
    notes: list[str] = []
    engine = None
    if request.engine != "none":
        name = request.engine or "docker"
        candidate = ContainerEngine(EngineSettings.create(name, settings), echo=None)
        try:
            candidate.version()
            engine = candidate
        except ToolError as exc:
            if request.engine is not None:
                raise
            notes.append(f"containers not checked: {exc.message}")
    # The indexes first: one whose layout is not archwheel's ends the command before anything
    # is removed anywhere.
    trees = {str(index): unfinished_publishes(index, remove=False) for index in request.indexes}
    found = find_leftovers(engine, request.temp_roots)
    items = found if request.dry_run else remove_leftovers(engine, found)
    if not request.dry_run:
        trees = {str(index): unfinished_publishes(index, remove=True) for index in request.indexes}
    report = CleanReport(tuple(items), trees, request.dry_run, tuple(notes))
    print_clean(report, request.format)
    return report.exit_code
