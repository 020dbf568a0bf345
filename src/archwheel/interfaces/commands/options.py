"""Options several commands share, spelled the same everywhere.

``--interpreter PATH`` names a Python interpreter (audit, doctor, smoke, verify); ``--python`` is
reserved for a Python version (``build --python X.Y``), so where it once named an interpreter it
stays as a hidden alias that warns. ``--index-url URL`` replaces the package index (build, smoke).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any


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
