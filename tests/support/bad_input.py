"""What the bad-input tests share (tests/unit/interfaces/test_bad_*.py,
test_untrusted_answers.py): the exit codes a user's mistake or a hostile file may end with, and
the command line run in-process with argparse's exit taken for a code."""

from __future__ import annotations

from archwheel.exit_codes import ExitCode

# Exit 4 and "internal error" are archwheel's own bugs; these are what bad input may answer.
DOCUMENTED = {ExitCode.OK, ExitCode.VERDICT_FAILED, ExitCode.USAGE, ExitCode.INCOMPLETE}


def run_main(argv: list[str]) -> int:
    """``archwheel ARGV`` in this process; argparse's usage errors as their exit code."""
    from archwheel.interfaces.cli import main

    try:
        return main(argv)
    except SystemExit as exc:  # argparse's usage errors
        return int(exc.code or 0)
