"""One exception hierarchy for archwheel, with one exit code per class.

Errors are raised anywhere and caught only in the command-line entry point, which prints the
message on one line (no traceback unless ``ARCHWHEEL_DEBUG=1``) and exits with ``exit_code``.
Messages say what failed, why, and what to do next.

Each class carries its exit code from the one table, ``exit_codes.py`` (the contract of
docs/exit-codes.md).
"""

from __future__ import annotations

from archwheel.exit_codes import EXIT_BUILD, EXIT_INCOMPLETE, EXIT_TOOL, EXIT_USAGE


class ArchwheelError(Exception):
    """Base class: an error with a one-line message a user can act on."""

    exit_code: int = EXIT_USAGE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        """The message and its hint on one line, as the CLI prints it."""
        text = " ".join(self.message.split())
        if self.hint:
            text += f" ({' '.join(self.hint.split())})"
        return text


class UsageError(ArchwheelError):
    """Bad command-line input: arguments, arch lists, GPU names, versions."""

    exit_code = EXIT_USAGE


class ArchListError(UsageError):
    """An arch list that cannot be parsed or cannot be built with a given toolkit."""


class FactsError(ArchwheelError):
    """The CUDA facts data file is malformed (a packaging bug, not user input)."""

    exit_code = EXIT_TOOL


class InputError(ArchwheelError):
    """An input file that cannot be read at all (missing, unreadable, not a supported kind)."""

    exit_code = EXIT_INCOMPLETE


class ToolError(ArchwheelError):
    """An external program (docker, podman, cuobjdump, pip, nvidia-smi) is missing or failed."""

    exit_code = EXIT_TOOL


class RecipeError(UsageError):
    """A recipe that does not validate; the message names the file and key."""


class BuildError(ArchwheelError):
    """A build that failed: the command, the container or the audit gate."""

    exit_code = EXIT_BUILD
