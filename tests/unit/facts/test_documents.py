"""The one document loader and table validator (facts/documents.py) and the bounded file reader
beside it (effects/files.read_document): every refusal is the caller's error class, one line,
naming the file, the key (where there is one) and what was expected."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Annotated, Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec import Meta

from archwheel.effects.files import read_document
from archwheel.errors import ArchwheelError, FactsError, InputError, RecipeError, UsageError
from archwheel.facts.documents import DocumentUnreadable, Table, load_document, parse_document
from archwheel.facts.typed import Document, decode, missing_or_not
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


# -- validating tables (through msgspec Structs, in Table's words) --------------------------------


class Build(Document, frozen=True, kw_only=True):
    command: str
    env: dict[str, str] = {}  # noqa: RUF012 (msgspec copies an empty default)
    jobs: int = 1


class Wheel(Document, frozen=True, kw_only=True):
    size: int = 0
    file: Annotated[str, missing_or_not("str")]


class Doc(Document, frozen=True, kw_only=True):
    name: str
    count: Annotated[int, Meta(ge=1, le=3)] = 1
    ratio: Annotated[float, Meta(ge=0.0, le=1.0)] = 1.0
    on: bool = False
    names: tuple[str, ...] = ()
    build: Build | None = None
    wheels: tuple[Wheel, ...] = ()


DOC: dict[str, Any] = {
    "name": "x",
    "count": 3,
    "ratio": 0.5,
    "on": True,
    "names": ["a", "b"],
    "build": {"command": "make", "env": {"PATH": "/bin"}, "jobs": 4},
    "wheels": [{"size": 1, "file": "a.whl"}, {"size": 2, "file": "b.whl"}],
}


def _changed(change: Any) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    change(doc)
    return doc


def _toml(doc: dict[str, Any] = DOC) -> Table:
    return Table(doc, "r.toml", RecipeError, toml_keys=True, toml=True)


def _json(doc: dict[str, Any] = DOC) -> Table:
    return Table(doc, "m.json", InputError)


def test_typed_values_are_returned() -> None:
    doc = decode(_json(), Doc)
    assert (doc.name, doc.count, doc.ratio, doc.on, doc.names) == ("x", 3, 0.5, True, ("a", "b"))
    assert doc.build is not None and doc.build.env["PATH"] == "/bin" and doc.build.jobs == 4
    assert [w.size for w in doc.wheels] == [1, 2]
    bare = decode(_json({"name": "x", "ratio": 1}), Doc)
    assert bare.build is None and bare.wheels == () and bare.ratio == 1.0


def test_a_decoded_document_names_its_places() -> None:
    """``table``/``tables`` find the place of a decoded value, for the checks after its type."""
    top = _toml()
    assert top.table("build").fail("jobs", "too many").args[0] == "r.toml: [build] jobs: too many"
    assert [t.where() for t in top.tables("wheels")] == ["wheels[0]", "wheels[1]"]
    assert top.table("absent").data == {} and top.tables("absent") == ()
    assert _json().unknown(["name", "count"]) == ["ratio", "on", "names", "build", "wheels"]


@pytest.mark.parametrize(
    ("change", "toml_message", "json_message"),
    [
        (lambda d: d.update(count="3"), "r.toml: count must be an integer, not '3'",
         "m.json: count must be an integer, not '3'"),
        (lambda d: d.update(name=3), "r.toml: name must be a string, not 3",
         "m.json: name must be a string, not 3"),
        (lambda d: d.pop("name"), "r.toml: name: missing (required)",
         "m.json: missing key 'name'"),
        (lambda d: d["build"].pop("command"), "r.toml: [build] command: missing (required)",
         "m.json: build: missing key 'command'"),
        (lambda d: d["build"].update(jobs="four"),
         "r.toml: [build] jobs must be an integer, not 'four'",
         "m.json: build.jobs must be an integer, not 'four'"),
        (lambda d: d.update(count=4), "r.toml: count: must be between 1 and 3, not 4",
         "m.json: count: must be between 1 and 3, not 4"),
        (lambda d: d.update(count=True), "r.toml: count must be an integer, not True",
         "m.json: count must be an integer, not True"),
        (lambda d: d.update(ratio=2), "r.toml: ratio: must be between 0.0 and 1.0",
         "m.json: ratio: must be between 0.0 and 1.0"),
        (lambda d: d.update(ratio=True), "r.toml: ratio must be a number, not True",
         "m.json: ratio must be a number, not True"),
        (lambda d: d.update(on="x"), "r.toml: on must be true or false, not 'x'",
         "m.json: on must be true or false, not 'x'"),
        (lambda d: d.update(names=d["build"]), "r.toml: names must be a list of strings, not a table",
         "m.json: names must be a list of strings, not an object"),
        (lambda d: d.update(build=["a"]), "r.toml: build must be a table, not an array",
         "m.json: build must be an object, not a list"),
        (lambda d: d["build"]["env"].update(N=1), "r.toml: [build] env.N must be a string, not 1",
         "m.json: build.env.N must be a string, not 1"),
        (lambda d: d["wheels"][1].update(size="1"),
         "r.toml: wheels[1].size must be an integer, not '1'",
         "m.json: wheels[1].size must be an integer, not '1'"),
        (lambda d: d["wheels"][1].update(file=1), "r.toml: wheels[1].file: missing or not a str",
         "m.json: wheels[1].file: missing or not a str"),
        (lambda d: d["wheels"][1].pop("file"), "r.toml: wheels[1].file: missing or not a str",
         "m.json: wheels[1].file: missing or not a str"),
        (lambda d: d.update(wheels=["a"]), "r.toml: wheels[0] must be a table, not 'a'",
         "m.json: wheels[0] must be an object, not 'a'"),
    ],
)  # fmt: skip
def test_each_error_names_the_file_the_key_and_what_was_expected(
    change: Any, toml_message: str, json_message: str
) -> None:
    doc = _changed(change)
    assert _refusal(lambda: decode(_toml(doc), Doc), RecipeError) == toml_message
    assert _refusal(lambda: decode(_json(doc), Doc), InputError) == json_message


def test_unknown_keys_are_refused_with_the_known_ones() -> None:
    doc = _changed(lambda d: d["build"].update(comand="make"))
    text = _refusal(lambda: decode(_toml(doc), Doc), RecipeError)
    assert text == (
        "r.toml: [build] comand: unknown key (did you mean 'command'? known: command, env, jobs)"
    )
    doc = _changed(lambda d: d["build"].update(xyz=1))
    text = _refusal(lambda: decode(_json(doc), Doc))
    assert text == "m.json: unknown key build.xyz (known: command, env, jobs)"


def test_a_long_value_is_shortened_in_the_message() -> None:
    text = _refusal(lambda: decode(_json(_changed(lambda d: d.update(count="x" * 1000))), Doc))
    assert len(text) < 120 and text.endswith("...")


KINDS: dict[str, Any] = {
    "text": str,
    "integer": Annotated[int, Meta(ge=0, le=9)],
    "number": Annotated[float, Meta(ge=0.0, le=9.0)],
    "flag": bool,
    "texts": str | tuple[str, ...],
    "table": Build,
    "tables": tuple[Build, ...],
    "text_map": dict[str, str],
    "typed": Annotated[int, missing_or_not("int")],
}


@FUZZ_SETTINGS
@given(
    value=st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
        lambda inner: st.one_of(st.lists(inner, max_size=3),
                                st.dictionaries(st.text(max_size=5), inner, max_size=3)),
        max_leaves=8,
    ),
    kind=st.sampled_from(sorted(KINDS)),
)  # fmt: skip
def test_any_value_is_accepted_or_refused_naming_file_and_key(value: object, kind: str) -> None:
    inner = msgspec.defstruct("Inner", [("key", KINDS[kind])], bases=(Document,), kw_only=True)
    outer = msgspec.defstruct("Outer", [("top", inner)], bases=(Document,), kw_only=True)
    table = Table({"top": {"key": value}}, "f.toml", FactsError)
    line = _line_or_none(lambda: decode(table, outer))
    assert line is None or (line.startswith("f.toml: ") and "top.key" in line and "\n" not in line)
