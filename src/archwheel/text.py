"""How a name or message from an input is shown: ``literal`` (every non-printable character as
a Python escape, cut short). Beside the floors, importing none of them: the renderings use it
for every text they print, and a library error that quotes an input uses it to bound its
message (``interfaces/render/common.py`` re-exports it).
"""

from __future__ import annotations

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
