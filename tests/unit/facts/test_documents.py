"""The one document loader and table validator (facts/documents.py) and the bounded file reader
beside it (effects/files.read_document): every refusal is the caller's error class, one line,
naming the file, the key (where there is one) and what was expected."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archwheel.effects.files import read_document
from archwheel.errors import ArchwheelError, FactsError, InputError, RecipeError, UsageError
from archwheel.facts.documents import (
    DocumentUnreadable,
    Table,
    load_document,
    load_table,
    parse_document,
)
from tests.support.fuzz import FUZZ_SETTINGS

ORIGIN = "where/doc.json"


def _refusal(action: Any, error: type[Exception] = InputError) -> str:
    with pytest.raises(error) as caught:
        action()
    text = (
        caught.value.one_line() if isinstance(caught.value, ArchwheelError) else str(caught.value)
    )
    assert "\n" not in text
    return text


def _line_or_none(action: Any) -> str | None:
    """The one line of the ``ArchwheelError`` that ``action`` raises, or None; any other
    exception propagates and fails the test."""
    try:
        action()
    except ArchwheelError as exc:
        return exc.one_line()
    return None


# -- parsing --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "toml", "words"),
    [
        (b'{"a": "\xff"}', False, "not UTF-8 text"),
        (b"{", False, "not JSON"),
        (b"a = ", True, "not TOML"),
        (b'{"a": 1, "a": 2}', False, "the key 'a' is given twice"),
        (b'{"x": {"b": 1, "b": 1}}', False, "given twice"),
        (b"[" * 40 + b"]" * 40, False, "nested deeper than the limit of 8"),
        (b"[" * 100_000 + b"]" * 100_000, False, "nested deeper than the limit of 8"),
        (b"a = " + b"[" * 20 + b"]" * 20, True, "nested deeper than the limit of 8"),
        (b'{"n": ' + b"9" * 100_000 + b"}", False, "not JSON"),
    ],
)
def test_what_cannot_be_parsed_names_the_file(raw: bytes, toml: bool, words: str) -> None:
    text = _refusal(
        lambda: load_document(raw, origin=ORIGIN, nesting=8, toml=toml, error=UsageError),
        UsageError,
    )
    assert text.startswith(f"{ORIGIN}: ")
    assert words in text
    with pytest.raises(DocumentUnreadable, match=words):  # the primitive: no file, one line
        parse_document(raw, 8, toml=toml)


def test_a_toml_key_given_twice_is_refused_by_toml_itself() -> None:
    text = _refusal(lambda: load_document(b"a = 1\na = 2\n", origin="r.toml", nesting=8, toml=True))
    assert text.startswith("r.toml: not TOML")


def test_a_document_within_the_bounds_is_parsed() -> None:
    assert load_document('{"a": [1, {"b": null}]}', origin=ORIGIN, nesting=3) == {
        "a": [1, {"b": None}]
    }
    assert load_document(b"[t]\nk = 'v'\n", origin="x.toml", nesting=2, toml=True) == {
        "t": {"k": "v"}
    }


def test_the_top_of_a_table_document_must_be_an_object() -> None:
    text = _refusal(lambda: load_table(b"[1]", origin=ORIGIN, nesting=4))
    assert text == f"{ORIGIN}: not a JSON object at the top level"


def test_any_error_factory_is_used() -> None:
    with pytest.raises(ValueError, match="doc: not JSON"):
        load_document("{", origin="doc", nesting=4, error=ValueError)


@FUZZ_SETTINGS
@given(raw=st.one_of(st.binary(max_size=300), st.text(max_size=300)), toml=st.booleans())
def test_any_text_parses_or_is_one_error_of_the_callers_class(raw: bytes | str, toml: bool) -> None:
    line = _line_or_none(
        lambda: load_document(raw, origin=ORIGIN, nesting=6, toml=toml, error=RecipeError)
    )
    assert line is None or (line.startswith(f"{ORIGIN}: ") and "\n" not in line)


@FUZZ_SETTINGS
@given(
    keys=st.lists(st.text(min_size=1, max_size=5), min_size=2, max_size=6),
    value=st.integers(),
)
def test_duplicate_json_keys_are_always_refused(keys: list[str], value: int) -> None:
    body = ", ".join(f"{json.dumps(k)}: {value}" for k in [*keys, keys[0]])
    text = _refusal(lambda: load_document("{" + body + "}", origin=ORIGIN, nesting=4))
    assert "given twice" in text


# -- reading a file -------------------------------------------------------------------------------


def test_a_file_is_read_within_its_bound(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(b'{"a": 1}')
    assert read_document(path, 8, 4) == ({"a": 1}, b'{"a": 1}')
    text = _refusal(
        lambda: read_document(path, 7, 4, error=UsageError, what="a matrix"), UsageError
    )
    assert text == f"{path}: larger than 7 bytes; not a matrix"


def test_a_missing_or_special_file_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "none.toml"
    text = _refusal(
        lambda: read_document(missing, 100, 4, toml=True, error=RecipeError), RecipeError
    )
    assert text == f"{missing}: does not exist (no such file)"
    os.mkfifo(tmp_path / "pipe.json")
    text = _refusal(lambda: read_document(tmp_path / "pipe.json", 100, 4))
    assert text.startswith(f"{tmp_path / 'pipe.json'}: cannot read: not a regular file (FIFO)")
    text = _refusal(lambda: read_document(tmp_path, 100, 4))
    assert "not a regular file (directory)" in text


def test_the_origin_may_name_the_file_otherwise(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text("{")
    assert _refusal(lambda: read_document(path, 10, 4, origin="its result")).startswith(
        "its result: not JSON"
    )


# -- validating tables ----------------------------------------------------------------------------

DOC: dict[str, Any] = {
    "name": "x",
    "count": 3,
    "ratio": 0.5,
    "on": True,
    "names": ["a", "b"],
    "build": {"env": {"PATH": "/bin", "N": 1}, "jobs": "four"},
    "wheels": [{"size": 1}, {"size": "1"}],
}


def _toml(doc: dict[str, Any] = DOC) -> Table:
    return Table(doc, "r.toml", RecipeError, toml_keys=True, toml=True)


def _json(doc: dict[str, Any] = DOC) -> Table:
    return Table(doc, "m.json", InputError)


def test_typed_values_are_returned() -> None:
    table = _json()
    assert table.text("name") == "x" and table.opt_text("nothing") is None
    assert table.integer("count", low=1, high=3) == 3 and table.opt_int("nothing") is None
    assert table.number("ratio", 1.0) == 0.5 and table.number("count", 1.0) == 3.0
    assert table.flag("on", False) is True and table.flag("off", False) is False
    assert table.texts("names") == ("a", "b") and table.texts("name", single=True) == ("x",)
    assert table.table("build").table("env").data["PATH"] == "/bin"
    assert [t.data for t in table.tables("wheels")] == DOC["wheels"]
    assert table.table("absent").data == {} and table.tables("absent") == ()


@pytest.mark.parametrize(
    ("read", "toml_message", "json_message"),
    [
        (lambda t: t.text("count"), "r.toml: count must be a string, not 3",
         "m.json: count must be a string, not 3"),
        (lambda t: t.text("absent"), "r.toml: absent: missing (required)",
         "m.json: missing key 'absent'"),
        (lambda t: t.table("build").text("absent"), "r.toml: [build] absent: missing (required)",
         "m.json: build: missing key 'absent'"),
        (lambda t: t.table("build").text("jobs", required=True) and t.table("build").integer("jobs"),
         "r.toml: [build] jobs must be an integer, not 'four'",
         "m.json: build.jobs must be an integer, not 'four'"),
        (lambda t: t.integer("count", low=4), "r.toml: count: must be at least 4, not 3",
         "m.json: count: must be at least 4, not 3"),
        (lambda t: t.integer("on"), "r.toml: on must be an integer, not True",
         "m.json: on must be an integer, not True"),
        (lambda t: t.flag("name", False), "r.toml: name must be true or false, not 'x'",
         "m.json: name must be true or false, not 'x'"),
        (lambda t: t.texts("build"), "r.toml: build must be a list of strings, not a table",
         "m.json: build must be a list of strings, not an object"),
        (lambda t: t.table("names"), "r.toml: names must be a table, not an array",
         "m.json: names must be an object, not a list"),
        (lambda t: t.table("build").text_map("env"),
         "r.toml: [build] env.N must be a string, not 1",
         "m.json: build.env.N must be a string, not 1"),
        (lambda t: t.tables("wheels")[1].integer("size"),
         "r.toml: wheels[1].size must be an integer, not '1'",
         "m.json: wheels[1].size must be an integer, not '1'"),
        (lambda t: t.tables("wheels")[1].typed("size", int),
         "r.toml: wheels[1].size: missing or not a int",
         "m.json: wheels[1].size: missing or not a int"),
        (lambda t: t.tables("names"), "r.toml: names[0] must be a table, not 'a'",
         "m.json: names[0] must be an object, not 'a'"),
    ],
)  # fmt: skip
def test_each_error_names_the_file_the_key_and_what_was_expected(
    read: Any, toml_message: str, json_message: str
) -> None:
    assert _refusal(lambda: read(_toml()), RecipeError) == toml_message
    assert _refusal(lambda: read(_json()), InputError) == json_message


def test_unknown_keys_are_refused_with_the_known_ones() -> None:
    build = {"comand": "make", "env": {}}
    text = _refusal(lambda: _toml({"build": build}).table("build").refuse_unknown({"command", "env"}),
                    RecipeError)  # fmt: skip
    assert (
        text == "r.toml: [build] comand: unknown key (did you mean 'command'? known: command, env)"
    )
    text = _refusal(lambda: _json({"build": build}).table("build").refuse_unknown({"jobs", "env"}))
    assert text == "m.json: unknown key build.comand (known: env, jobs)"
    assert _json().unknown(["name", "count"]) == ["ratio", "on", "names", "build", "wheels"]
    assert _json({"a": 1}).refuse_unknown(["a"]).data == {"a": 1}


def test_a_long_value_is_shortened_in_the_message() -> None:
    text = _refusal(lambda: _json({"k": "x" * 1000}).integer("k"))
    assert len(text) < 120 and text.endswith("...")


@FUZZ_SETTINGS
@given(
    value=st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
        lambda inner: st.one_of(st.lists(inner, max_size=3),
                                st.dictionaries(st.text(max_size=5), inner, max_size=3)),
        max_leaves=8,
    ),
    accessor=st.sampled_from(["text", "integer", "number", "flag", "texts", "table", "tables",
                              "text_map", "typed"]),
)  # fmt: skip
def test_any_value_is_accepted_or_refused_naming_file_and_key(value: object, accessor: str) -> None:
    table = Table({"top": {"key": value}}, "f.toml", FactsError).table("top")
    calls = {
        "text": lambda: table.text("key"),
        "integer": lambda: table.integer("key", low=0, high=9),
        "number": lambda: table.number("key", 1.0, low=0.0, high=9.0),
        "flag": lambda: table.flag("key", False),
        "texts": lambda: table.texts("key", single=True),
        "table": lambda: table.table("key"),
        "tables": lambda: table.tables("key"),
        "text_map": lambda: table.text_map("key"),
        "typed": lambda: table.typed("key", int),
    }
    line = _line_or_none(calls[accessor])
    assert line is None or (line.startswith("f.toml: ") and "top.key" in line and "\n" not in line)
