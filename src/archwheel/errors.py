"""One exception hierarchy for archwheel: library errors, which know nothing of exit codes.

Errors are raised anywhere. A library user catches them by class (``InputError``: an input
could not be read; ``UsageError``: a bad argument; ...); the command-line entry point catches
them in one place, prints the message on one line (no traceback unless ``ARCHWHEEL_DEBUG=1``)
and exits with the code that ``exit_codes.exit_code_for`` maps the class to (the one table,
the contract of docs/exit-codes.md). Messages say what failed, why, and what to do next.
"""

from __future__ import annotations


class ArchwheelError(Exception):
    """Base class: an error with a one-line message a user can act on."""

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
    """Bad input from the caller: arguments, arch lists, GPU names, versions."""


class ArchListError(UsageError):
    """An arch list that cannot be parsed or cannot be built with a given toolkit."""


class FactsError(ArchwheelError):
    """The CUDA facts data file is malformed (a packaging bug, not user input)."""


class InputError(ArchwheelError):
    """An input file that cannot be read at all (missing, unreadable, not a supported kind)."""


class ToolError(ArchwheelError):
    """An external program (docker, podman, cuobjdump, pip, nvidia-smi) is missing or failed."""


class OutputError(UsageError):
    """An output location (``-o FILE``, ``--out DIR``, ``--index DIR``) that cannot take the
    output: a folder, under /proc, a full file system, ... One message shape for every command:
    ``PATH: WHY``, naming the location the user gave (never a temporary file beside it)."""

    def __init__(
        self, path: object, why: str = "cannot be written", *, hint: str | None = None
    ) -> None:
        super().__init__(f"{path}: {why}", hint=hint)
        self.path = path
        self.why = why

    def __reduce__(self) -> tuple[type[OutputError], tuple[object, str]]:
        return (type(self), (self.path, self.why))

    @classmethod
    def cannot_write(cls, path: object, exc: OSError) -> OutputError:
        """A write the system refused (``exc``: a full file system, no permission), naming
        ``path``, whatever file ``exc`` names (a temporary one beside it, an input)."""
        reason = exc.strerror or str(exc)
        return cls(path, f"cannot write: {reason}")


class RecipeError(UsageError):
    """A recipe that does not validate; the message names the file and key."""


class BuildError(ArchwheelError):
    """A build that failed: the command, the container or the audit gate."""
