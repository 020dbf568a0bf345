"""The Python API's arguments, checked at the boundary (``api.py``; docs/api.md, "The calls").

A caller's Python value reaches archwheel here, before any work: a wrong type, an empty string,
a NUL byte, a number out of range or a plain string where a list belongs is a ``UsageError``
whose one line names the call and the parameter (``audit: workers must be ...``), never a
``TypeError`` or ``AttributeError`` from deep inside, nor a string split into its characters,
nor ``''`` read as the current folder. The command line needs none of this: argparse gives it
text, and its own checks (``commands/``) say the same with its option names.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from archwheel.errors import UsageError
from archwheel.facts import ArchList
from archwheel.text import literal

# A control character anywhere in a version, or white space around it (as the command line's
# ``options.version_text``): "12.8\n" must not pass for 12.8.
_NOT_EXACT = re.compile(r"[\x00-\x1f\x7f-\x9f]|^\s|\s\Z")


def shown(value: object) -> str:
    """A wrong value as a message shows it: its type and a short, escaped ``repr``."""
    return f"{type(value).__name__} {literal(repr(value), 60)}"


def _fail(call: str, name: str, what: str, value: object) -> UsageError:
    return UsageError(f"{call}: {name} must be {what}, not {shown(value)}")


def _text(call: str, name: str, value: str, what: str) -> str:
    if not value:
        raise UsageError(f"{call}: {name} is empty", hint=f"give {what}")
    if "\0" in value:
        raise UsageError(f"{call}: {name} contains a NUL byte: {literal(value, 60)}")
    return value


def _path_text(
    call: str, name: str, value: object, what: str = "a file or folder ('.' for the current one)"
) -> str:
    if isinstance(value, str | os.PathLike):
        text = os.fspath(value)
        if isinstance(text, str):
            return _text(call, name, text, what)
    raise _fail(call, name, "a path (str or os.PathLike)", value)


def path_argument(call: str, name: str, value: object) -> Path:
    """A path: ``str`` or ``os.PathLike[str]``, not empty (``''`` is not the current folder:
    write ``'.'``), without a NUL byte."""
    return Path(_path_text(call, name, value))


def paths_argument(call: str, name: str, value: object, *, one: bool) -> list[Path]:
    """A list or tuple of paths (``path_argument`` each); ``one``: a single path is taken as a
    list of one, else it is refused (a string is never split into its characters)."""
    if one and isinstance(value, str | os.PathLike):
        return [path_argument(call, name, value)]
    if isinstance(value, str | bytes | os.PathLike) or not isinstance(value, Sequence):
        what = "a path or a list of paths" if one else "a list of paths (a str is one path: [...])"
        raise _fail(call, name, what, value)
    return [path_argument(call, f"{name}[{i}]", item) for i, item in enumerate(value)]


def flag_argument(call: str, name: str, value: object) -> bool:
    """True or False (not 1, nor "yes", which are true as anything but a bool)."""
    if not isinstance(value, bool):
        raise _fail(call, name, "True or False", value)
    return value


def workers_argument(call: str, value: object) -> int | None:
    """None (the default) or a whole number, 1 or more, as ``audit --workers``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(call, "workers", "None or a whole number, 1 or more", value)
    if value < 1:
        raise UsageError(f"{call}: workers must be at least 1, not {value}")
    return value


def expect_argument(call: str, value: object) -> ArchList | None:
    """None, an arch list as text (``"8.0;9.0+PTX"``, as ``--expect``) or an ``ArchList``; a
    list of archs is refused: one text says the list, its separators included."""
    if value is None or isinstance(value, ArchList):
        return value
    if not isinstance(value, str):
        what = 'None, an arch list as text ("8.0;9.0+PTX") or an ArchList'
        raise _fail(call, "expect", what, value)
    return ArchList.parse(_text(call, "expect", value, 'an arch list such as "8.0;9.0+PTX"'))


def names_argument(call: str, name: str, value: object) -> tuple[str, ...]:
    """A list or tuple of text items (GPU names, compute capabilities); a plain string is
    refused, not split into its characters, nor taken as one item."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise _fail(call, name, 'a list of text such as ["A100", "RTX 5090"]', value)
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise _fail(call, f"{name}[{i}]", 'text such as "8.6"', item)
        _text(call, f"{name}[{i}]", item, "a name or a compute capability")
    return tuple(value)


def version_argument(call: str, name: str, value: object, example: str) -> str | None:
    """None or a version as text (``example``: ``"570.86.10"``, ``"12.8"``), exactly: no
    control character, no white space around it, not empty."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise _fail(call, name, f'None or a version as text such as "{example}"', value)
    _text(call, name, value, f'a version such as "{example}", or None')
    if _NOT_EXACT.search(value):
        raise UsageError(
            f"{call}: {name} has a control character, or white space around the version: "
            f"{literal(repr(value), 60)}"
        )
    return value


def interpreter_argument(call: str, value: object) -> str | None:
    """None (this interpreter) or a Python interpreter's path or name, as ``--interpreter``."""
    if value is None:
        return None
    # as written: "./python" is not "python", which PATH finds
    return _path_text(call, "interpreter", value, "a Python interpreter, or None for this one")
