"""Options several commands share, spelled the same everywhere.

``--interpreter PATH`` names a Python interpreter (audit, doctor, smoke, verify); ``--python`` is
reserved for a Python version (``build --python X.Y``), so where it once named an interpreter it
stays as a hidden alias that warns. ``--index-url URL`` replaces the package index (build, smoke).

Light to import (every command's parser uses it): what an option's check needs from the floors
is imported when the check runs.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archwheel.errors import UsageError

if TYPE_CHECKING:
    from archwheel.effects import NetBudget, Settings


def path_argument(text: str) -> Path:
    """A path given on the command line: an empty one is refused (``Path("")`` is the current
    folder, which nobody means by ``''``), and so is one holding a NUL (no system call takes it)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path names nothing (give a file or folder)")
    if "\0" in text:
        raise argparse.ArgumentTypeError("a path cannot hold a NUL character")
    return Path(text)


def interpreter_argument(text: str) -> str:
    """An interpreter named on the command line (a path, or a name looked up on PATH), refused
    where ``path_argument`` refuses a path."""
    path_argument(text)
    return text


def environment_settings() -> Settings:
    """archwheel's settings (the ``ARCHWHEEL_*`` variables, ``effects.settings``), read from
    this process's environment: here, at the edge, when a command builds its request; the
    floors below take the object, never the environment."""
    from archwheel.effects import Settings

    return Settings.from_environ(os.environ)


class DeprecatedAlias(argparse.Action):
    """A hidden old spelling of an option: stores into the new option's ``dest`` and warns."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        self.replacement: str = kwargs.pop("replacement")
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        print(
            f"archwheel: warning: {option_string} is deprecated here; use {self.replacement}",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def add_alias(
    parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup,
    old: str,
    *,
    dest: str,
    replacement: str,
    metavar: str,
) -> None:
    """Accept ``old`` as a hidden, deprecated spelling of the option stored in ``dest``."""
    parser.add_argument(
        old,
        dest=dest,
        metavar=metavar,
        action=DeprecatedAlias,
        replacement=replacement,
        help=argparse.SUPPRESS,
    )


def add_interpreter_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--interpreter PATH`` (stored as ``interpreter``), with ``--python PATH`` as its alias."""
    parser.add_argument("--interpreter", metavar="PATH", type=interpreter_argument, help=help_text)
    add_alias(
        parser, "--python", dest="interpreter", replacement="--interpreter PATH", metavar="PATH"
    )


def check_output(path: Path) -> None:
    """``-o FILE`` can be written (``errors.OutputError`` before any work): ``outputs``, the one
    helper of every command's outputs."""
    from archwheel.interfaces.outputs import check_output_file

    check_output_file(path)


def write_output(path: Path, text: str) -> None:
    """Write an ``-o FILE`` (``outputs.write_output_file``: atomically, or into a special file
    named on purpose; every refusal an ``errors.OutputError`` naming ``path``)."""
    from archwheel.interfaces.outputs import write_output_file

    write_output_file(path, text)


def check_folder(path: Path) -> None:
    """An output folder (``--out``, ``--index``, ``--work``) can be written or made
    (``outputs.check_output_folder``), in plan modes too."""
    from archwheel.interfaces.outputs import check_output_folder

    check_output_folder(path)


def existing_folder(option: str, path: Path, hint: str) -> None:
    """A folder named to be read (``clean --index``, ``matrix --recheck --index``) exists and
    is a folder: a ``UsageError`` naming the option and the path otherwise (a regular file
    given as an index was "nothing to clean", exit 0)."""
    import stat

    from archwheel.effects import kind_of

    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise UsageError(f"{option} {path}: no such folder", hint=hint) from None
    except (OSError, ValueError) as exc:  # a loop of links, a name too long, a NUL
        why = getattr(exc, "strerror", None) or str(exc)
        raise UsageError(f"{option} {path}: cannot be read: {why}", hint=hint) from None
    if not stat.S_ISDIR(mode):
        raise UsageError(f"{option} {path}: not a folder (a {kind_of(mode)})", hint=hint)


# A control character anywhere in a version, or white space around it: "12.8\n" must not pass
# for 12.8 ("CUDA 12.8" is one way to write a CUDA version).
_NOT_EXACT = re.compile(r"[\x00-\x1f\x7f-\x9f]|^\s|\s\Z")


def version_text(text: str) -> str:
    """An argparse type: a version as written (``--driver``, ``--cuda``, ``--torch``,
    ``--python``), without control characters, nor white space around it. The version parsers
    of the facts floor strip what they read from files and programs; an argument is taken
    exactly (``--cuda $'12.8\\n'`` was read as 12.8)."""
    if _NOT_EXACT.search(text):
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r}: a control character, or white space around the version"
        )
    return text


def location_text(text: str) -> str:
    """An argparse type: a package index URL or a find-links location (``--index-url``,
    ``--extra-index-url``, ``--find-links``), neither empty nor blank nor holding a control
    character. An empty ``--index-url`` was taken for "not given", and the configured index
    (or pip's default) was asked instead of the one the user meant."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty URL: give one, or leave the option out")
    if _NOT_EXACT.search(text):
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r}: a control character, or white space around the URL"
        )
    return text


def location_path(text: str) -> Path:
    """An argparse type: a folder given as a find-links location (``smoke --find-links``), not
    empty (``Path("")`` is the working folder)."""
    return Path(location_text(text))


def positive_number(text: str) -> float:
    """An argparse type: a number of seconds above zero and at most a week (a timeout, a
    duration: ``effects.process.parse_timeout``)."""
    from archwheel.effects import parse_timeout

    try:
        return parse_timeout(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# sccache's SCCACHE_CACHE_SIZE: a whole number and an optional K/M/G/T (binary) suffix; it
# passes over anything else (1.5G, 1Gi) and keeps its default of 10 GiB without a word.
_CACHE_SIZE = re.compile(r"[1-9][0-9]{0,8}[KMGT]?")


def volume_name(text: str) -> str:
    """An argparse type: the name of a named volume (the compiler cache's). A name starting
    with '/' or '.' would be a host path: the cache must never be a bind mount of the host."""
    from archwheel.effects import check_volume_name

    try:
        return check_volume_name(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def ccache_size(text: str) -> str:
    """An argparse type: the compiler cache's max size, as sccache takes it (20G, 500M, 2T:
    a whole number, binary units)."""
    if not _CACHE_SIZE.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is not a size sccache takes (a whole number above 0 with K, M, G "
            "or T: 20G)"
        )
    return text


def whole_number(text: str) -> int:
    """An argparse type: a whole number in ASCII digits (``text.whole_number``: ``８`` and
    ``1_000`` are none; argparse's ``type=int`` took both); its range is checked where it is
    used (``--jobs``: ``wheelbuild.compile.jobs.check_jobs``)."""
    from archwheel.text import whole_number as parse_whole

    try:
        return parse_whole(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number in ASCII digits, 0 or more (a device index, a count)."""
    value = whole_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: must be 0 or more")
    return value


def net_budget(settings: Settings) -> NetBudget:
    """The run's network time (``effects.deadline``) from the ``ARCHWHEEL_NET_TIMEOUT`` and
    ``ARCHWHEEL_NET_RUN_TIMEOUT`` settings, started now; a value that is not a time limit is a
    ``UsageError`` naming the setting."""
    from archwheel.effects import NetBudget, NetLimits

    try:
        limits = NetLimits.from_settings(settings.net_timeout, settings.net_run_timeout)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return NetBudget(limits)
