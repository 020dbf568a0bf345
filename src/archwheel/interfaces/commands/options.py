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
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archwheel.errors import UsageError

if TYPE_CHECKING:
    from archwheel.effects import Settings


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
    parser.add_argument("--interpreter", metavar="PATH", help=help_text)
    add_alias(
        parser, "--python", dest="interpreter", replacement="--interpreter PATH", metavar="PATH"
    )


def check_output(path: Path) -> None:
    """``-o FILE`` must name a file in an existing folder (``UsageError`` before any work)."""
    if path.is_dir():
        raise UsageError(f"{path}: is a folder; give a file name for the output")
    folder = path.parent if str(path.parent) else Path()
    if not folder.is_dir():
        raise UsageError(f"{path}: the folder {folder} does not exist")


def write_output(path: Path, text: str) -> None:
    """Write an ``-o FILE``: a regular file (or none yet) atomically, so that a reader sees the
    old file or the whole new one; through a link, the file it points at. Anything else the
    user named (``/dev/stdout``, a FIFO, a device) is written into, never replaced."""
    from archwheel.effects import write_text_atomic

    check_output(path)
    try:
        try:
            status = path.stat()
        except FileNotFoundError:
            status = None
        if status is not None and not stat.S_ISREG(status.st_mode):
            with path.open("w", encoding="utf-8") as out:
                out.write(text)
        else:
            write_text_atomic(path.resolve() if path.is_symlink() else path, text)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror or exc}") from None


def positive_number(text: str) -> float:
    """An argparse type: a number of seconds above zero and at most a week (a timeout, a
    duration: ``effects.process.parse_timeout``)."""
    from archwheel.effects import parse_timeout

    try:
        return parse_timeout(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# ccache's max_size: a number and an optional k/M/G/T (decimal) or Ki/Mi/Gi/Ti (binary) suffix.
_CCACHE_SIZE = re.compile(r"[0-9]{1,9}(\.[0-9]{1,3})?(?:[kMGT]i?)?")


def volume_name(text: str) -> str:
    """An argparse type: the name of a named volume (the compiler cache's). A name starting
    with '/' or '.' would be a host path: the cache must never be a bind mount of the host."""
    from archwheel.effects import check_volume_name

    try:
        return check_volume_name(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def ccache_size(text: str) -> str:
    """An argparse type: ccache's max size, as ``ccache -M`` takes it (20G, 500M, 1.5Ti, 0)."""
    if not _CCACHE_SIZE.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is not a size (a number with k, M, G, T, Ki, Mi, Gi or Ti: 20G)"
        )
    return text


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number, 0 or more (a device index, a count)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: must be 0 or more")
    return value
