"""How a name or message from an input is shown: ``literal`` (every non-printable character as
a Python escape, cut short). Beside the floors, importing none of them: the renderings use it
for every text they print, and a library error that quotes an input uses it to bound its
message (``interfaces/render/common.py`` re-exports it).
"""

from __future__ import annotations

import re

# The most characters of one name or message shown in text output (JSON keeps everything).
MAX_SHOWN = 2048


def literal(text: object, limit: int = MAX_SHOWN) -> str:
    """Text from an input as it is shown: every character that is not printable (ESC, OSC,
    CR, BEL, bidirectional overrides, NUL ...) as a Python escape, cut to ``limit`` characters.

    The one helper for every name and message that reaches a terminal, a log or Markdown; rich
    markup is escaped on top by ``safe``. JSON output never goes through it: it stays exact.
    """
    raw = str(text)
    if len(raw) > limit:
        raw = raw[:limit]
        cut = True
    else:
        cut = False
    if not raw.isprintable():
        raw = "".join(c if c.isprintable() else _escaped(c) for c in raw)
    if cut or len(raw) > limit:
        raw = raw[: max(0, limit - 3)] + "..."
    return raw


def _escaped(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


# How a boolean setting (``ARCHWHEEL_DEBUG``, ``ARCHWHEEL_KEEP_CONTAINERS``,
# ``ARCHWHEEL_PURE_PYTHON``) is written: case-insensitive, white space around it ignored; empty
# is unset (the default, off). One spelling table for every switch (docs/settings.md).
SWITCH_ON = frozenset({"1", "true", "yes"})
SWITCH_OFF = frozenset({"0", "false", "no", ""})


def switch_value(text: str) -> bool | None:
    """A boolean setting's value as written: True (``1``, ``true``, ``yes``), False (``0``,
    ``false``, ``no``, empty), None for anything else, which the caller refuses (a typo must
    not read as on, nor ``0`` as on because it is not empty)."""
    word = text.strip().lower()
    if word in SWITCH_ON:
        return True
    if word in SWITCH_OFF:
        return False
    return None


# A number a user writes (an option, a setting): ASCII digits only, as every other program
# reading the same text takes it. Python's int() and float() also take any Unicode digit
# (``８``, ``١``), underscores between digits (``1_000``) and white space around; nan and inf.
_WHOLE = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
MAX_NUMBER_CHARS = 40  # characters of a number a user writes; more is no number of ours


def whole_number(text: str) -> int:
    """A whole number a user wrote (an option, a setting): an optional sign and ASCII digits,
    at most ``MAX_NUMBER_CHARS`` characters; ``ValueError`` (one line, the text quoted and cut)
    for anything else (``８``, ``1_000``, `` 3``, ``3.0``). The caller checks its range."""
    if len(text) > MAX_NUMBER_CHARS or not _WHOLE.fullmatch(text):
        raise ValueError(f"{literal(text, 40)!r} is not a whole number (ASCII digits)")
    return int(text)


def decimal_number(text: str) -> float:
    """A number a user wrote (a time limit): an optional sign, ASCII digits with an optional
    fraction and exponent (``0.5``, ``1e3``), at most ``MAX_NUMBER_CHARS`` characters;
    ``ValueError`` for anything else (``８``, ``1_000``, ``nan``, ``inf``, ``0x10``). The
    caller checks its range."""
    if len(text) > MAX_NUMBER_CHARS or not _DECIMAL.fullmatch(text):
        raise ValueError(f"{literal(text, 40)!r} is not a number (ASCII digits)")
    return float(text)
