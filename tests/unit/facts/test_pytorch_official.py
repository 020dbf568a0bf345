"""The pin tables of PyTorch's official wheels (facts/pytorch_official.toml): a broken table is
one ``FactsError`` naming the file, the key and what was expected."""

from __future__ import annotations

import copy
from importlib import resources
from typing import Any, cast

import pytest

from archwheel.errors import FactsError
from archwheel.facts.documents import parse_document
from archwheel.facts.pytorch_official import DATA_FILE, load_official, parse_official


def _data() -> dict[str, Any]:
    raw = resources.files("archwheel.facts").joinpath(DATA_FILE).read_bytes()
    return cast("dict[str, Any]", parse_document(raw, 16, toml=True))


def _last_variant(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The dotted key of the last release's last variant, and its table (not the first: the
    message must name the one at fault)."""
    release = list(data["releases"])[-1]
    name = list(data["releases"][release])[-1]
    return f"releases.{release}.{name}", data["releases"][release][name]


def test_the_packaged_table_is_read() -> None:
    official = load_official()
    assert official.known() and all(v.requirements_source.file for v in official.variants.values())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d, v: v.update(cuda=13), "{v}.cuda must be a string, not 13"),
        (lambda d, v: v.pop("platform"), "{v}: missing key 'platform'"),
        (lambda d, v: v.update(bundel=[]), "unknown key {v}.bundel"),
        (lambda d, v: v.update(in_official_matrix="yes"),
         "{v}.in_official_matrix must be true or false, not 'yes'"),
        (lambda d, v: v.update(provided=["a", 1]), "{v}.provided must be a list of strings"),
        (lambda d, v: v.update(layout="nowhere"), "{v}.layout: unknown layout 'nowhere'"),
        (lambda d, v: v.update(requirements_source="nowhere"),
         "{v}.requirements_source: unknown source 'nowhere'"),
        (lambda d, v: v.update(requirements=["nvidia-x ==="]), "{v}.requirements: "),
        (lambda d, v: v["env"].update(X=["1"]), "{v}.env.X must be [value, source], not an array"),
        (lambda d, v: v["env"].update(X=3), "{v}.env.X must be a list of strings, not 3"),
        (lambda d, v: d.update(schema_version=2), "schema_version must be 1, not 2"),
        (lambda d, v: d.update(schema_version=True), "schema_version must be an integer, not True"),
        (lambda d, v: d["sources"].update(x={"file": "f"}), "sources.x: needs a commit or a sha256"),
        (lambda d, v: d["deliberate"].update(x=1), "deliberate.x must be a string, not 1"),
    ],
)  # fmt: skip
def test_a_broken_table_is_one_facts_error_naming_the_key(change: Any, message: str) -> None:
    data = copy.deepcopy(_data())
    where, variant = _last_variant(data)
    change(data, variant)
    with pytest.raises(FactsError) as info:
        parse_official(data)
    assert f"{DATA_FILE}: {message.format(v=where)}" in info.value.one_line()
