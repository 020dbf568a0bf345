"""Documents read from untrusted text: one bounded parser, and the messages of a refused key.

Every TOML or JSON document archwheel reads (a recipe, a matrix, a manifest, the facts files, a
probe's answer, a package index page) is parsed by ``load_document``: text that is not UTF-8,
not TOML/JSON, nested deeper than a limit (or than the stack), an integer of thousands of
digits, or a JSON object that names a key twice ends in one error of the caller's class whose
one-line message names the file and what is wrong (``recipe.toml: not TOML: ...``). The size
bound is the reader's (``effects.files.read_document`` reads a file of at most N bytes).

``Table`` is where a value sits in a parsed document and the errors that name it: the file,
the key as a dotted path (``wheels[0].size``) or as a TOML file writes it (``[build] env.PATH``),
and what was expected; an unknown key with the closest known one. ``facts.typed.decode``
checks a document against the msgspec Structs it is declared with and writes each refusal
through a ``Table``; the checks beyond a value's type (a version, a sha256) use it after.

Pure: nothing here reads a file; the facts floor and every floor above use it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from archwheel.errors import InputError


def _toml() -> Any:
    """The TOML reader, imported where a TOML document is read (every command imports this
    module; a wheel's audit reads no TOML before its scan's workers start)."""
    if sys.version_info >= (3, 11):
        import tomllib as reader
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as reader
    return reader


# Makes the exception a caller wants from a one-line message (an ``ArchwheelError`` class,
# ``functools.partial(InputError, hint=...)``, or any exception taking one string).
ErrorFactory = Callable[[str], Exception]


class HintedError(Protocol):
    """An exception class taking a message and a hint (every ``ArchwheelError``)."""

    def __call__(self, message: str, /, *, hint: str | None = ...) -> Exception: ...


_SHOWN = 60  # characters of a wrong value quoted in a message


class DocumentUnreadable(ValueError):
    """A JSON or TOML text that cannot be parsed; the message is one line, without the file
    (``load_document`` and ``effects.files.read_document`` add it)."""


def nesting_depth(document: object, stop: int) -> int:
    """How deeply lists and dicts nest in a parsed JSON or TOML ``document`` (iteratively, so a
    hostile document cannot exhaust the stack); counting stops past ``stop``."""
    deepest = 0
    pending: list[tuple[object, int]] = [(document, 0)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            children: Iterator[object] = iter(value.values())
        elif isinstance(value, list):
            children = iter(value)
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > stop:
            return deepest
        pending.extend((child, depth) for child in children)
    return deepest


class _DuplicateKey(ValueError):
    pass


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' object hook: a key named twice is refused (JSON keeps the last one
    silently, so two readers of one document could disagree on what it says)."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _DuplicateKey(f"the key {key[:_SHOWN]!r} is given twice in one object")
        found[key] = value
    return found


def parse_document(raw: bytes | str, nesting: int, *, toml: bool = False) -> object:
    """A JSON (or TOML) document parsed so that a hostile text cannot make a traceback: not
    UTF-8, not JSON/TOML, a key given twice, an integer of thousands of digits, nesting deeper
    than ``nesting`` (or than the stack) are ``DocumentUnreadable``, in one line without the
    file (``load_document`` names it)."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        raise DocumentUnreadable(f"not UTF-8 text (byte {exc.start})") from None
    kind = "TOML" if toml else "JSON"
    try:
        document: object = (
            _toml().loads(text) if toml else json.loads(text, object_pairs_hook=_refuse_duplicates)
        )
    except RecursionError:
        raise DocumentUnreadable(f"nested deeper than the limit of {nesting}") from None
    except _DuplicateKey as exc:
        raise DocumentUnreadable(f"not {kind}: {exc}") from None
    except ValueError as exc:  # not JSON or TOML, or an integer of thousands of digits
        raise DocumentUnreadable(f"not {kind}: {' '.join(str(exc).split())}") from None
    if nesting_depth(document, nesting) > nesting:
        raise DocumentUnreadable(f"nested deeper than the limit of {nesting}")
    return document


def unreadable(origin: object, problem: str, error: ErrorFactory, what: str = "") -> Exception:
    """The one message shape of a document that cannot be read: ``{origin}: {problem}``, and
    ``; not {what}`` where the caller names what the file should have been."""
    return error(f"{origin}: {problem}" + (f"; not {what}" if what else ""))


def load_document(
    raw: bytes | str,
    *,
    origin: object,
    nesting: int,
    toml: bool = False,
    error: ErrorFactory = InputError,
) -> object:
    """``parse_document`` whose failure is ``error("{origin}: {problem}")``."""
    try:
        return parse_document(raw, nesting, toml=toml)
    except DocumentUnreadable as exc:
        raise unreadable(origin, str(exc), error) from None


def _found(value: object, toml: bool) -> str:
    """A wrong value as a message shows it: scalars quoted (shortened), containers by kind."""
    if isinstance(value, dict):
        return "a table" if toml else "an object"
    if isinstance(value, list):
        return "an array" if toml else "a list"
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


@dataclass(frozen=True)
class Table:
    """One table (a TOML table or a JSON object) of a parsed document, and the errors that
    name its keys: the file, the key and what was expected.

    ``path`` is where the table sits in its document (``("wheels", 0)``); ``toml_keys`` writes
    keys as a recipe's documentation does (``[build] env.PATH``; a missing key is ``[build]
    command: missing (required)``, an unknown one ``[build] comand: unknown key``) instead of as
    a dotted path (``build.env.PATH``; ``build: missing key 'command'``, ``unknown key
    build.comand``); ``toml``: values are called tables and arrays, not objects and lists.
    ``error`` makes the exception (``RecipeError``, ``FactsError``, ...).
    """

    data: Mapping[str, Any]
    origin: str
    error: HintedError = InputError
    path: tuple[str | int, ...] = ()
    toml_keys: bool = False
    toml: bool = False

    # -- naming and failing -----------------------------------------------------------------

    def where(self, key: str | int | None = None) -> str:
        """The key (None: this table) as messages write it."""
        parts = (*self.path, key) if key is not None else self.path
        # "[build] env.PATH", "[build]"; an array's item stays dotted ("wheels[1].size")
        plain = len(parts) > 1 and isinstance(parts[1], int)
        if self.toml_keys and parts and (len(parts) > 1 or key is None) and not plain:
            head, *rest = parts
            return f"[{head}]" + (" " + _dotted(rest) if rest else "")
        return _dotted(parts)

    def fail(self, key: str | int | None, problem: str, hint: str | None = None) -> Exception:
        """``{file}: {key}: {problem}`` (``{file}: {problem}`` for the top level itself)."""
        where = self.where(key)
        message = f"{self.origin}: {where}: {problem}" if where else f"{self.origin}: {problem}"
        return self.error(message, hint=hint)

    def expected(self, key: str | int, what: str, value: object = None) -> Exception:
        """``{file}: {key} must be {what}, not {the value}`` (``value``: the wrong value where
        the key is no key of this table's data, an item of an array)."""
        given = self.data.get(key) if isinstance(key, str) and value is None else value
        found = _found(given, self.toml)
        return self.error(f"{self.origin}: {self.where(key)} must be {what}, not {found}")

    def missing(self, key: str) -> Exception:
        """``{file}: [table] key: missing (required)`` (TOML keys), ``{file}: table: missing key
        'key'`` (dotted)."""
        if self.toml_keys:
            return self.fail(key, "missing (required)")
        return self.fail(None, f"missing key {key!r}")

    # -- keys and places ------------------------------------------------------------------

    def unknown(self, known: Iterable[str]) -> list[str]:
        """The keys of this table not among ``known``, in the document's order."""
        allowed = set(known)
        return [key for key in self.data if key not in allowed]

    def unknown_key(self, key: str, known: Iterable[str]) -> Exception:
        """The error of ``key``, not among ``known``: it names the closest known key and the
        list of known keys."""
        import difflib  # a misspelt key only

        allowed = sorted(set(known))
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        known_text = f"known: {', '.join(allowed)}"
        hint = f"did you mean {close[0]!r}? {known_text}" if close else known_text
        if self.toml_keys:
            return self.fail(key, "unknown key", hint=hint)
        return self.error(f"{self.origin}: unknown key {self.where(key)}", hint=hint)

    def table(self, key: str) -> Table:
        """The sub-table at ``key`` (an empty one where absent) of a document already decoded
        (``facts.typed.decode`` checked its types), to name its keys in messages."""
        value = self.data.get(key)
        return self.child(key, value if isinstance(value, Mapping) else {})

    def tables(self, key: str) -> tuple[Table, ...]:
        """The array of tables at ``key`` (``[[key]]`` in TOML) of a decoded document, each
        named by its index (``wheels[1]``)."""
        value = self.data.get(key)
        items = self.child(key, {})
        found = value if isinstance(value, list) else []
        return tuple(items.child(i, v if isinstance(v, dict) else {}) for i, v in enumerate(found))

    def child(self, key: str | int, data: Mapping[str, Any]) -> Table:
        """The table ``data`` found at ``key`` of this one (an item of an array: its index)."""
        return Table(data, self.origin, self.error, (*self.path, key), self.toml_keys, self.toml)


def _dotted(parts: Iterable[str | int]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out
