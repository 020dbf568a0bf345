"""The ``archwheel`` command line: one sub-command per module in ``interfaces.commands``.

Errors are caught here and only here: an ``ArchwheelError`` prints one line and exits with the
code ``exit_codes.exit_code_for`` maps its class to; an ``OSError`` that reaches here (a path
the system refuses: too long, a loop of links, no permission, a full disk) prints one line and
exits 3; any other exception is a bug and prints a one-line report (the traceback only with
``ARCHWHEEL_DEBUG=1``). Ctrl-C exits 130. Standard output that is closed, or a pipe whose
reader went away (``| head``), stops the command with exit 141, without a traceback
(``streams``: one mechanism for every command).

It starts at once: ``--help``, ``--version`` and a refused argument import no command module
but the one named (``--help`` lists the commands from ``commands.COMMANDS``), and command
modules import their work only inside ``run`` (``nox -s bench -- cli``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from archwheel._version import __version__
from archwheel.errors import ArchwheelError
from archwheel.exit_codes import (
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OUTPUT_GONE,
    EXIT_TOOL,
    EXIT_USAGE,
    exit_code_for,
)
from archwheel.interfaces.commands import COMMANDS
from archwheel.interfaces.streams import OutputGone, gone_message, guarded_streams
from archwheel.text import literal, switch_value

# Sub-command modules, in the order `archwheel --help` lists them. Each defines
# `register(subparsers) -> None`, which adds a parser whose default `func(args) -> int` runs it.
COMMAND_MODULES = tuple(dict.fromkeys(module for _, module, _ in COMMANDS))

EPILOG = """\
examples:
  archwheel audit torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl --expect "8.0;9.0+PTX"
  archwheel arch "8.0;9.0+PTX" --cuda 12.8
  archwheel can-run dist/*.whl --gpu "RTX 5090" --driver 570.86.10
  archwheel doctor
  archwheel can-load dist/myext-*.whl --with torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl
  archwheel diff old/myext-*.whl dist/myext-*.whl --format markdown >> $GITHUB_STEP_SUMMARY
  archwheel matrix matrix.toml --index /srv/wheels --plan

exit codes: 0 ok, 1 verdict failed, 2 usage, 3 incomplete input, 4 tool missing, 5 build failed,
141 standard output closed or its reader gone
(docs/exit-codes.md has the full table, including can-run's, can-load's, diff's and smoke's)
"""


# Which module registers each command: `archwheel audit ...` imports only the audit module
# (startup time matters for a command that takes about a second).
COMMAND_OWNERS = {name: module for name, module, _ in COMMANDS}


def _requested_command(argv: Sequence[str]) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMAND_OWNERS else None
        if arg in ("-h", "--help", "--version"):
            return None
    return None


# argparse repeats a rejected value whole ("invalid int value: '999...'"): a 128 KB argument
# made a 128 KB error line. Values are cut to this many characters in its messages.
MAX_VALUE_SHOWN = 80
_QUOTED = re.compile("'([^']{" + str(MAX_VALUE_SHOWN) + "})[^']+'")


class _Parser(argparse.ArgumentParser):
    """argparse's parser, with every quoted value in its error messages cut short (its
    subcommands' parsers are of this class too: ``add_subparsers`` takes the parent's)."""

    def error(self, message: str) -> NoReturn:
        super().error(_QUOTED.sub(r"'\1...'", message))


def _top_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction[_Parser]]:
    parser = _Parser(
        prog="archwheel",
        description=(
            "Build CUDA wheels for exactly your GPU architectures, prove what they contain, "
            "and prove they run."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"archwheel {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser, sub


def listing_parser() -> argparse.ArgumentParser:
    """The parser of ``archwheel`` without a command (``--help``, ``--version``, a command it
    does not know): every command by name and line, none of their modules imported."""
    parser, sub = _top_parser()
    for name, _, line in COMMANDS:
        sub.add_parser(name, help=line)
    return parser


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every command, or with only the module that owns ``only``."""
    parser, sub = _top_parser()
    modules = [COMMAND_OWNERS[only]] if only else list(COMMAND_MODULES)
    for name in modules:
        try:
            module = importlib.import_module(f"archwheel.interfaces.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"archwheel.interfaces.commands.{name}":
                continue  # a command not built yet
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``archwheel`` with ``argv`` (default: the process's), standard output and error
    guarded (``streams``): output that cannot be written ends the command with exit 141."""
    with guarded_streams() as (out, err):
        try:
            code = _main(argv)
            out.flush()  # what is still buffered: a broken pipe is seen here, not at exit
            err.flush()
        except OutputGone as gone:
            message = gone_message(gone)
            if message:
                print(message, file=sys.stderr)
            code = EXIT_OUTPUT_GONE
    return code


def _debug() -> bool:
    """``ARCHWHEEL_DEBUG`` is on (a value that is not a switch is off here: it was refused,
    with one line, before the command ran)."""
    return switch_value(os.environ.get("ARCHWHEEL_DEBUG", "")) is True


def _main(argv: Sequence[str] | None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    command = _requested_command(arguments)
    parser = build_parser(command) if command else listing_parser()
    args = parser.parse_args(arguments)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        from archwheel.effects.settings import check_switches

        check_switches(os.environ)  # ARCHWHEEL_DEBUG=banana: exit 2, whatever the command
        code: int = args.func(args)
    except ArchwheelError as exc:
        if _debug():
            raise
        print(f"archwheel: error: {literal(exc.one_line())}", file=sys.stderr)
        return exit_code_for(exc)
    except KeyboardInterrupt:
        print("archwheel: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as exc:
        # The system refused a path the user gave (too long a name, a loop of links, a full
        # disk, no permission): the input or the machine, not a bug of archwheel.
        if _debug():
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        reason = exc.strerror or str(exc)
        print(f"archwheel: error: {literal(where + reason)}", file=sys.stderr)
        return EXIT_INCOMPLETE
    except Exception as exc:
        if _debug():
            raise
        print(
            f"archwheel: internal error: {type(exc).__name__}: {literal(exc)} "
            "(this is a bug; rerun with ARCHWHEEL_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return EXIT_TOOL
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
