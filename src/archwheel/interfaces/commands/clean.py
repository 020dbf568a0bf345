"""``archwheel clean``: list and remove what killed runs left on this machine."""

from __future__ import annotations

import argparse
import dataclasses

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
  archwheel clean --work pytorch-8090           remove the build tree kept by --work-name

It also names the volume archwheel-ccache of earlier versions (builds now cache with sccache
in archwheel-sccache) with the command that frees it; it removes no volume itself.

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
    """Add ``clean`` to the command line, with its flags, help and examples (``cli.build_parser``
    calls each command module's ``register`` with its subparsers)."""
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
    parser.add_argument(
        "--work",
        action="append",
        default=[],
        metavar="NAME",
        help="remove the build tree a build kept under --work-name NAME (repeatable; only that)",
    )
    parser.add_argument("--dry-run", action="store_true", help="list only; remove nothing")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``archwheel clean``: find (and, unless ``--dry-run``, remove) what killed runs left behind,
    print it, exit 1 when something stays."""
    from archwheel.housekeeping import CleanRequest, clean
    from archwheel.interfaces.render.clean import print_clean
    from archwheel.matrix import unfinished_publishes
    from archwheel.wheelbuild import DEFAULT_CCACHE_VOLUME, OLD_CCACHE_VOLUME, kept_trees

    if args.work:
        return _remove_kept(args)
    for index in args.index:
        existing_folder("--index", index, "an index folder that archwheel published")
    request = CleanRequest(
        engine=args.engine,
        temp_roots=tuple(args.temp) or (None,),
        indexes=tuple(args.index),
        dry_run=args.dry_run,
        settings=environment_settings(),
        retired_volumes={
            OLD_CCACHE_VOLUME: f"the ccache cache of earlier archwheel versions, no longer used "
            f"(builds cache with sccache in {DEFAULT_CCACHE_VOLUME})"
        },
    )
    report = clean(request, unfinished_trees=unfinished_publishes)
    kept = kept_trees(request.settings.cache)
    if kept:  # kept on purpose (a build resumes them): named, never removed without --work
        names = ", ".join(path.name for path in kept)
        note = f"kept build trees, left as they are: {names} (archwheel clean --work NAME)"
        report = dataclasses.replace(report, notes=(*report.notes, note))
    print_clean(report, args.format)
    return report.exit_code


def _remove_kept(args: argparse.Namespace) -> int:
    """``archwheel clean --work NAME``: remove (or with ``--dry-run`` name) kept build trees."""
    from archwheel.interfaces.render.common import console, dump_json
    from archwheel.wheelbuild import kept_trees, remove_kept

    cache = environment_settings().cache
    removed: list[str] = []
    for name in args.work:
        if args.dry_run:
            found = [p for p in kept_trees(cache) if p.name == name]
            removed += [str(p) for p in found]
        else:
            removed.append(str(remove_kept(cache, name)))
    if args.format == "json":
        dump_json({"kept_trees": removed, "dry_run": args.dry_run})
    else:
        verb = "would remove" if args.dry_run else "removed"
        for path in removed:
            console().print(f"{verb} the kept build tree {path}", soft_wrap=True, markup=False)
    return 0
