"""A parsed document decoded into typed, frozen msgspec Structs, its errors in archwheel's words.

``facts.documents`` keeps the bounds of reading (size, nesting, UTF-8, a key given twice);
msgspec (``msgspec.convert``, strict: a boolean is no integer, a string no number) checks the
types, the required keys and the unknown ones, as the Struct a document is declared with says.
Its one error is turned into the message ``facts.documents.Table`` writes, so every document
speaks alike: the file, the key (``[build] env.PATH``, ``wheels[0].size``) and what was
expected (``must be a string, not 3``; an unknown key with the closest known one).

A field's ``Meta(extra=...)`` may say what its message says instead: ``{"expected": "true,
false or \\"auto\\""}`` (``... must be true, false or "auto", not 3``), ``{"problem": "must be
a template"}`` (``[torch] local_version: must be a template``, for any wrong value) or
``{"invalid": ...}`` (the same, for a value of the right type that its constraint refuses),
``{"mistyped": ...}`` (for a value of another type) and ``{"missing": ...}`` (for its absence);
``NonBlank`` is a string with text in it (``[build] command: must not be empty``);
``missing_or_not`` is the one message of a field archwheel writes itself. msgspec is imported
with the first Struct module (a recipe, a matrix, a manifest, the facts catalog), never by the
command line's start (``--help``, ``--version``: ``docs/maintainers/performance.md``).

Why msgspec: strict typed decoding of dicts into Structs with unknown keys refused, in one C
extension with no dependencies, imported in about 5 ms over what archwheel already imports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

import msgspec
from msgspec import inspect as typeinfo

from archwheel.facts.documents import Table

T = TypeVar("T")

NonBlank = Annotated[str, msgspec.Meta(pattern=r"\S", extra={"invalid": "must not be empty"})]


def missing_or_not(kind: str) -> msgspec.Meta:
    """The one message of a field of a document archwheel writes itself that is absent or of
    another type: ``{file}: {key}: missing or not a {kind}`` (``ok: missing or not a bool``)."""
    message = f"missing or not a {kind}"
    return msgspec.Meta(extra={"mistyped": message, "missing": message})


class Document(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The base of every document Struct: frozen, keyword-only, unknown keys refused."""


def decode(table: Table, kind: type[T]) -> T:
    """``table``'s data as a ``kind`` (a ``Document`` Struct); else the error ``table`` makes
    (``table.error``), naming the file, the key and what was expected."""
    try:
        return msgspec.convert(table.data, kind, strict=True)
    except msgspec.ValidationError as exc:
        raise _translate(table, typeinfo.type_info(kind), str(exc)) from None


_AT = re.compile(r"(?P<what>.*?)(?: - at `\$(?P<path>.*)`)?", re.DOTALL)
_PART = re.compile(r"\.(?P<name>[A-Za-z_][A-Za-z0-9_]*)|\[(?P<index>\d+|\.\.\.)\]")
_FIELD = re.compile(r"Object (?:missing required|contains unknown) field `(?P<name>.*)`\Z")


def _translate(top: Table, info: typeinfo.Type, message: str) -> Exception:
    """msgspec's ``Expected `str`, got `int` - at `$.build.command``` in ``top``'s words."""
    match = _AT.fullmatch(message)
    assert match is not None  # the pattern matches any text
    what, path = match["what"], match["path"] or ""
    table, key, value, info = _walk(top, info, path)
    plain, extra = _plain(info)
    if isinstance(plain, typeinfo.StructType) and isinstance(value, Mapping):
        # the error is about the keys of this table (the walk ended on it)
        inner = top if key is None else table.child(key, value)
        found = _FIELD.match(what)
        name = found["name"] if found else ""
        known = [f.encode_name for f in plain.fields]
        if what.startswith("Object contains unknown"):
            unknown = name if name in inner.data else next(iter(inner.unknown(known)), name)
            return inner.unknown_key(unknown, known)
        if what.startswith("Object missing required"):
            field = next((f for f in plain.fields if f.encode_name == name), None)
            field_type, field_extra = _plain(field.type) if field else (None, {})
            if "missing" in field_extra:
                return inner.fail(name, str(field_extra["missing"]))
            if isinstance(field_type, typeinfo.StructType) and inner.toml_keys:
                return inner.fail(name, "missing table (required)")
            return inner.missing(name)
    assert key is not None  # a type error is about a value, never the top table
    mistyped = ", got `" in what  # else a constraint failed (a pattern, a bound, a literal)
    problem = extra.get("problem") or extra.get("mistyped" if mistyped else "invalid")
    if problem:
        return table.fail(key, str(problem))
    if "expected" in extra:
        return table.expected(key, str(extra["expected"]), value)
    if not mistyped and isinstance(value, (int, float)) and not isinstance(value, bool):
        bounds = _bounds(plain)
        if bounds and isinstance(plain, typeinfo.IntType):
            return table.fail(key, f"must be {bounds}, not {value}")
        if bounds:
            return table.fail(key, f"must be {bounds}")
    return table.expected(key, _wording(plain, table.toml), value)


def _walk(
    table: Table, info: typeinfo.Type, path: str
) -> tuple[Table, str | int | None, object, typeinfo.Type]:
    """Follow msgspec's path (``.build.env[...]``, ``.wheels[0].size``) through the data and
    the types: the table holding the value at fault, its key (None: ``table`` itself), the
    value and its declared type. A scalar list's item names the list (``requirements must be
    a list of strings``); a table's item (``[...]``) is the first whose value does not fit."""
    key: str | int | None = None
    value: object = table.data
    for part in _PART.finditer(path):
        plain, _ = _plain(info)
        if part["name"] is not None and isinstance(plain, typeinfo.StructType):
            if key is not None:
                table = table.child(key, value if isinstance(value, Mapping) else {})
            key = part["name"]
            value = table.data.get(key)
            field = next((f for f in plain.fields if f.encode_name == key), None)
            if field is None:
                break
            info = field.type
        elif part["index"] == "..." and isinstance(plain, typeinfo.DictType):
            if key is None or not isinstance(value, Mapping):
                break
            table = table.child(key, value)
            wanted = plain.value_type
            key = next((k for k, v in value.items() if not _fits(v, wanted)), next(iter(value)))
            value = value.get(key)
            info = wanted
        elif part["index"] not in (None, "...") and isinstance(plain, _ARRAYS):
            item = _plain(plain.item_type)[0]
            if not isinstance(item, (typeinfo.StructType, typeinfo.DictType)):
                break  # an item of a scalar list: the list is named
            index = int(part["index"])
            if key is None or not isinstance(value, list) or index >= len(value):
                break
            table = table.child(key, {})
            key, value, info = index, value[index], plain.item_type
        else:
            break
    return table, key, value, info


_ARRAYS = (typeinfo.ListType, typeinfo.VarTupleType)


def _plain(info: typeinfo.Type) -> tuple[typeinfo.Type, Mapping[str, Any]]:
    """A type without its metadata and without ``None`` (an optional key), and the
    ``Meta(extra=...)`` it carried."""
    extra: dict[str, Any] = {}
    while isinstance(info, typeinfo.Metadata):
        extra.update(info.extra or {})
        info = info.type
    if isinstance(info, typeinfo.UnionType):
        kept = [t for t in info.types if not isinstance(t, typeinfo.NoneType)]
        if len(kept) == 1:
            inner, more = _plain(kept[0])
            return inner, {**extra, **more}
    return info, extra


def _fits(value: object, info: typeinfo.Type) -> bool:
    """Whether ``value`` is what ``info`` asks for: a Struct's value is decoded as one, a
    table's or a list's items are checked in turn, a string or a number against its bounds
    (so a table of tables names the item at fault, not its first one)."""
    plain, _ = _plain(info)
    if isinstance(plain, typeinfo.StructType):
        try:
            msgspec.convert(value, plain.cls, strict=True)
        except msgspec.ValidationError:
            return False
        return True
    if isinstance(plain, typeinfo.DictType) and isinstance(value, Mapping):
        return all(_fits(v, plain.value_type) for v in value.values())
    if isinstance(plain, _ARRAYS) and isinstance(value, list):
        return all(_fits(v, plain.item_type) for v in value)
    if not _of_type(value, plain):
        return False
    if isinstance(plain, typeinfo.StrType) and isinstance(value, str):
        return plain.pattern is None or re.search(plain.pattern, value) is not None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        low, high = getattr(plain, "ge", None), getattr(plain, "le", None)
        return (low is None or value >= low) and (high is None or value <= high)
    return True


def _of_type(value: object, plain: typeinfo.Type) -> bool:
    """Whether ``value`` has the JSON type of ``plain`` (a boolean is no number)."""
    kinds: dict[type[Any], type[Any] | tuple[type[Any], ...]] = {
        typeinfo.StrType: str,
        typeinfo.IntType: int,
        typeinfo.FloatType: (int, float),
        typeinfo.BoolType: bool,
        typeinfo.StructType: dict,
        typeinfo.DictType: dict,
        typeinfo.ListType: list,
        typeinfo.VarTupleType: list,
    }
    wanted = kinds.get(type(plain))
    if wanted is None:
        return True
    if isinstance(value, bool) and wanted is not bool:
        return False
    return isinstance(value, wanted)


def _bounds(info: typeinfo.Type) -> str:
    """``between 1 and 5``, ``at least 0``, ``at most 9`` for a number type's bounds."""
    low = getattr(info, "ge", None)
    high = getattr(info, "le", None)
    if low is not None and high is not None:
        return f"between {low} and {high}"
    if low is not None:
        return f"at least {low}"
    return f"at most {high}" if high is not None else ""


def _wording(info: typeinfo.Type, toml: bool) -> str:
    """What a value of type ``info`` is, as the messages say it (``a list of strings``)."""
    table = "a table" if toml else "an object"
    if isinstance(info, typeinfo.UnionType):
        kept = (t for t in info.types if not isinstance(t, typeinfo.NoneType))
        return " or ".join(_wording(_plain(t)[0], toml) for t in kept)
    if isinstance(info, _ARRAYS):
        item = _plain(info.item_type)[0]
        if isinstance(item, typeinfo.StrType):
            return "a list of strings"
        if isinstance(item, (typeinfo.StructType, typeinfo.DictType)):
            return "an array of tables" if toml else "a list of objects"
        return "an array" if toml else "a list"
    simple = {
        typeinfo.StrType: "a string",
        typeinfo.IntType: "an integer",
        typeinfo.FloatType: "a number",
        typeinfo.BoolType: "true or false",
        typeinfo.StructType: table,
        typeinfo.DictType: table,
    }
    return simple.get(type(info), f"a value of type {type(info).__name__}")
