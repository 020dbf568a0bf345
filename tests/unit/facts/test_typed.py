"""Typed documents: msgspec decodes, and each of its errors reads as facts.documents.Table's."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from msgspec import Meta

from archwheel.errors import FactsError, InputError, UsageError
from archwheel.facts.documents import Table
from archwheel.facts.typed import Document, NonBlank, decode
from archwheel.matrix.plan import load_matrix


class Item(Document, frozen=True, kw_only=True):
    path: NonBlank
    size: Annotated[int, Meta(ge=0, le=9)] = 0


class Inner(Document, frozen=True, kw_only=True):
    mode: Annotated[bool | Literal["auto"], Meta(extra={"expected": 'true, false or "auto"'})] = (
        "auto"
    )
    ratio: Annotated[float, Meta(ge=0.5, le=2)] = 1.0


class Top(Document, frozen=True, kw_only=True):
    name: str
    names: str | tuple[str, ...] = ()
    env: dict[str, str] = {}  # noqa: RUF012 (msgspec copies an empty default)
    inner: Inner = Inner()
    items: tuple[Item, ...] = ()
    label: Annotated[str | bool | None, Meta(extra={"problem": "must be a template or false"})] = (
        None
    )


def _error(data: dict[str, Any], *, toml: bool = False) -> str:
    table = Table(data, "f.toml" if toml else "f.json", FactsError, toml_keys=toml, toml=toml)
    with pytest.raises(FactsError) as info:
        decode(table, Top)
    return info.value.one_line()


def test_a_good_document_is_decoded_into_frozen_structs() -> None:
    table = Table({"name": "a", "names": "b", "items": [{"path": "p", "size": 3}]}, "f", InputError)
    top = decode(table, Top)
    assert (top.name, top.names, top.items[0].size, top.inner.mode) == ("a", "b", 3, "auto")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "f.json: missing key 'name'"),
        ({"name": 3}, "f.json: name must be a string, not 3"),
        ({"name": "a", "nmae": 1}, "f.json: unknown key nmae"),
        ({"name": "a", "names": 3}, "names must be a string or a list of strings, not 3"),
        ({"name": "a", "names": ["x", 3]}, "names must be a string or a list of strings"),
        ({"name": "a", "env": {"A": "x", "B": 3}}, "f.json: env.B must be a string, not 3"),
        ({"name": "a", "inner": 3}, "f.json: inner must be an object, not 3"),
        ({"name": "a", "inner": {"mode": 2}}, 'inner.mode must be true, false or "auto", not 2'),
        ({"name": "a", "inner": {"mode": "x"}}, "inner.mode must be true, false or \"auto\""),
        ({"name": "a", "inner": {"ratio": 3}}, "f.json: inner.ratio: must be between 0.5 and 2"),
        ({"name": "a", "inner": {"ratio": True}}, "inner.ratio must be a number, not True"),
        ({"name": "a", "items": [3]}, "f.json: items[0] must be an object, not 3"),
        ({"name": "a", "items": [{"path": " "}]}, "f.json: items[0].path: must not be empty"),
        ({"name": "a", "items": [{"path": 1}]}, "f.json: items[0].path must be a string, not 1"),
        ({"name": "a", "items": [{"path": "p", "size": 10}]}, "size: must be between 0 and 9, not 10"),
        ({"name": "a", "items": [{}]}, "f.json: items[0]: missing key 'path'"),
        ({"name": "a", "label": 3}, "f.json: label: must be a template or false"),
    ],
)  # fmt: skip
def test_each_error_names_the_file_the_key_and_what_was_expected(
    data: dict[str, Any], message: str
) -> None:
    assert message in _error(data)


def test_toml_documents_write_keys_as_toml_does() -> None:
    assert "f.toml: [inner] mode must be" in _error({"name": "a", "inner": {"mode": 1}}, toml=True)
    assert "f.toml: [inner] mood: unknown key" in _error(
        {"name": "a", "inner": {"mood": 1}}, toml=True
    )
    assert "f.toml: name: missing (required)" in _error({}, toml=True)


def test_an_unknown_key_names_the_closest_known_one() -> None:
    table = Table({"name": "a", "inner": {"rato": 1}}, "f.json", FactsError)
    with pytest.raises(FactsError) as info:
        decode(table, Top)
    assert info.value.hint is not None
    assert "did you mean 'ratio'?" in info.value.hint


def test_a_boolean_is_no_number_and_no_schema_version(tmp_path: Path) -> None:
    """A strict decode: ``schema_version = true`` passed the hand-written check (true == 1)."""
    path = tmp_path / "m.toml"
    path.write_text("schema_version = true\n[matrix]\nrecipes = ['a']\n")
    with pytest.raises(UsageError, match=r"m.toml: schema_version must be 1, not True"):
        load_matrix(path)


def test_a_matrix_without_recipes_is_read_not_a_traceback(tmp_path: Path) -> None:
    """The recipes may come from --recipe; the plan refuses a matrix with none, in one line."""
    path = tmp_path / "m.toml"
    path.write_text("[matrix]\npython = ['3.11']\n")
    spec = load_matrix(path)
    assert spec.recipes == () and spec.python == ("3.11",)


class Pair(Document, frozen=True, kw_only=True):
    cuda: str
    size: Annotated[int, Meta(ge=0, le=9)] = 0


class Nested(Document, frozen=True, kw_only=True):
    releases: dict[str, dict[str, Pair]] = {}  # noqa: RUF012 (msgspec copies an empty default)


def test_a_table_of_tables_names_the_item_at_fault_not_its_first() -> None:
    """msgspec says ``releases[...][...]``: the message names the release and variant at fault."""
    data = {"releases": {"2.9": {"cu128": {"cuda": "12.8"}}, "2.10": {"cu130": {"cuda": 13}}}}
    table = Table(data, "p.toml", FactsError, toml=True)
    with pytest.raises(FactsError) as info:
        decode(table, Nested)
    assert info.value.one_line() == "p.toml: releases.2.10.cu130.cuda must be a string, not 13"


@pytest.mark.parametrize("value", [1.5, 1e999])
def test_a_fraction_where_a_bounded_integer_belongs_is_no_integer(value: float) -> None:
    """A mistyped value is named by its type, not by the bounds of the type it should have."""
    table = Table({"path": "p", "size": value}, "f.json", InputError)
    with pytest.raises(InputError) as info:
        decode(table, Item)
    assert info.value.one_line() == f"f.json: size must be an integer, not {value!r}"
