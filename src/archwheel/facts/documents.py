"""Documents read from untrusted text: one bounded parser and one table validator.

Every TOML or JSON document archwheel reads (a recipe, a matrix, a manifest, the facts files, a
probe's answer, a package index page) is parsed by ``load_document``: text that is not UTF-8,
not TOML/JSON, nested deeper than a limit (or than the stack), an integer of thousands of
digits, or a JSON object that names a key twice ends in one error of the caller's class whose
one-line message names the file and what is wrong (``recipe.toml: not TOML: ...``). The size
bound is the reader's (``effects.files.read_document`` reads a file of at most N bytes).

``Table`` validates what was parsed: typed accessors (strings, integers with a range, numbers,
booleans, string lists, sub-tables, arrays of tables) and refusal of unknown keys with the list
of known ones; each error names the file, the key as a dotted path (``wheels[0].size``) or as a
TOML file writes it (``[build] env.PATH``), and what was expected.

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


def load_table(
    raw: bytes | str,
    *,
    origin: object,
    nesting: int,
    toml: bool = False,
    error: HintedError = InputError,
    toml_keys: bool = False,
) -> Table:
    """A document whose top level must be a table (TOML always is; JSON: an object)."""
    document = load_document(raw, origin=origin, nesting=nesting, toml=toml, error=error)
    if not isinstance(document, dict):
        raise error(f"{origin}: not a JSON object at the top level")
    return Table(document, str(origin), error, toml_keys=toml_keys, toml=toml)


def _found(value: object, toml: bool) -> str:
    """A wrong value as a message shows it: scalars quoted (shortened), containers by kind."""
    if isinstance(value, dict):
        return "a table" if toml else "an object"
    if isinstance(value, list):
        return "an array" if toml else "a list"
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_text_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


@dataclass(frozen=True)
class Table:
    """One table (a TOML table or a JSON object) of a parsed document, with typed accessors
    whose errors name the file, the key and what was expected.

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

    # -- keys ----------------------------------------------------------------------------------

    def has(self, key: str) -> bool:
        return key in self.data

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def unknown(self, known: Iterable[str]) -> list[str]:
        """The keys of this table not among ``known``, in the document's order."""
        allowed = set(known)
        return [key for key in self.data if key not in allowed]

    def refuse_unknown(self, known: Iterable[str]) -> Table:
        """This table, once no key outside ``known`` is in it; else the error names the first
        unknown key, the closest known one and the list of known keys."""
        allowed = tuple(known)
        for key in self.unknown(allowed):
            raise self.unknown_key(key, allowed)
        return self

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

    # -- values --------------------------------------------------------------------------------

    def text(self, key: str, default: str | None = None, *, required: bool = False) -> str:
        """A string; ``required``: present and not blank. No default and absent: missing."""
        if key not in self.data:
            if required or default is None:
                raise self.missing(key)
            return default
        value = self.data[key]
        if not isinstance(value, str):
            raise self.expected(key, "a string")
        if required and not value.strip():
            raise self.fail(key, "must not be empty")
        return value

    def opt_text(self, key: str) -> str | None:
        """A string, or None where the key is absent."""
        return self.text(key) if key in self.data else None

    def integer(
        self,
        key: str,
        default: int | None = None,
        *,
        low: int | None = None,
        high: int | None = None,
    ) -> int:
        """An integer (not a boolean) in ``low..high`` (inclusive, where given)."""
        if key not in self.data:
            if default is None:
                raise self.missing(key)
            return default
        value = self.data[key]
        if not _is_int(value):
            raise self.expected(key, "an integer")
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = (
                f"between {low} and {high}"
                if low is not None and high is not None
                else (f"at least {low}" if low is not None else f"at most {high}")
            )
            raise self.fail(key, f"must be {bounds}, not {value}")
        return int(value)

    def opt_int(self, key: str, *, low: int | None = None, high: int | None = None) -> int | None:
        return self.integer(key, 0, low=low, high=high) if key in self.data else None

    def number(self, key: str, default: float, *, low: float | None = None,
               high: float | None = None) -> float:  # fmt: skip
        """An integer or a float (not a boolean), as a float, in ``low..high`` where given."""
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.expected(key, "a number")
        if (low is not None and not value >= low) or (high is not None and not value <= high):
            raise self.fail(key, f"must be between {low} and {high}")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            raise self.expected(key, "true or false")
        return value

    def texts(self, key: str, default: Iterable[str] | None = (), *, single: bool = False) -> (
        tuple[str, ...]
    ):  # fmt: skip
        """A list of strings (``default`` where absent; None: required). ``single``: one string
        is also accepted, as a list of one."""
        if key not in self.data:
            if default is None:
                raise self.missing(key)
            return tuple(default)
        value = self.data[key]
        if single and isinstance(value, str):
            return (value,)
        if not _is_text_list(value):
            raise self.expected(key, "a string or a list of strings" if single else
                                "a list of strings")  # fmt: skip
        return tuple(value)

    def typed(self, key: str, kind: type[Any]) -> Any:
        """The value at ``key`` when it is a ``kind`` (a ``bool`` is no ``int``): for documents
        archwheel writes itself, whose fields are plain JSON types; else ``{file}: {key}:
        missing or not a {kind}``."""
        value = self.data.get(key)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise self.fail(key, f"missing or not a {kind.__name__}")
        return value

    def table(self, key: str, *, required: bool = False) -> Table:
        """The sub-table at ``key`` (an empty one where absent, unless ``required``)."""
        if key not in self.data:
            if required:
                raise self.missing(key)
            return self.child(key, {})
        value = self.data[key]
        if not isinstance(value, dict):
            raise self.expected(key, "a table" if self.toml else "an object")
        return self.child(key, value)

    def tables(self, key: str, *, required: bool = False) -> tuple[Table, ...]:
        """The array of tables at ``key`` (``[[key]]`` in TOML), each named by its index."""
        if key not in self.data:
            if required:
                raise self.missing(key)
            return ()
        value = self.data[key]
        if not isinstance(value, list):
            raise self.expected(key, "an array of tables" if self.toml else "a list of objects")
        child = self.child(key, {})
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                what = "a table" if self.toml else "an object"
                found = _found(item, self.toml)
                raise self.error(f"{self.origin}: {child.where(index)} must be {what}, not {found}")
        return tuple(child.child(i, item) for i, item in enumerate(value))

    def text_map(self, key: str) -> dict[str, str]:
        """A table of strings (empty where absent); a value that is not one names its key."""
        table = self.table(key)
        out: dict[str, str] = {}
        for name, value in table.data.items():
            if not isinstance(value, str):
                raise table.expected(name, "a string")
            out[str(name)] = value
        return out

    def child(self, key: str | int, data: Mapping[str, Any]) -> Table:
        """The table ``data`` found at ``key`` of this one (an item of an array: its index)."""
        return Table(data, self.origin, self.error, (*self.path, key), self.toml_keys, self.toml)


def _dotted(parts: Iterable[str | int]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out
