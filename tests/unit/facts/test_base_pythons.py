"""The table of which CPython each base image offers (facts/base_pythons.toml)."""

from __future__ import annotations

import copy
from importlib import resources
from typing import Any, cast

import pytest

from archwheel.errors import FactsError
from archwheel.facts.base_pythons import DATA_FILE, load_base_pythons, parse_base_pythons
from archwheel.facts.documents import parse_document


def _data() -> dict[str, Any]:
    raw = resources.files("archwheel.facts").joinpath(DATA_FILE).read_bytes()
    return cast("dict[str, Any]", parse_document(raw, 8, toml=True))


def test_each_debian_suite_offers_its_one_cpython_with_a_source() -> None:
    table = load_base_pythons()
    assert [(s.suite, s.python, s.glibc) for s in table.debian] == [
        ("bullseye", "3.9", (2, 31)),
        ("bookworm", "3.11", (2, 36)),
        ("trixie", "3.13", (2, 41)),
        ("sid", "3.14", (2, 43)),
    ]
    assert all(s.source.startswith("https://packages.debian.org/") for s in table.debian)
    assert table.suite_for("3.13") == table.suite("trixie")
    bookworm = table.suite_for("3.11")
    assert bookworm is not None and bookworm.image == "archwheel/debian:bookworm"
    assert table.suite_for("3.12") is None
    assert table.suite_for("3.13t") is None  # Debian's python3 has the GIL
    sid = table.suite_for("3.14")  # unstable: its python3 is 3.14
    assert sid is not None and sid.image == "archwheel/debian:sid"
    assert sid.describe() == "Debian unstable sid (python3.14, glibc 2.43)"
    assert table.debian_offers() == ("3.9 (bullseye), 3.11 (bookworm), 3.13 (trixie), 3.14 (sid)")
    assert table.has_opt_python("pytorch/manylinux2_28-builder:cuda13.0")
    assert table.has_opt_python("quay.io/pypa/manylinux_2_28_x86_64")
    assert not table.has_opt_python("nvidia/cuda:13.0.0-devel-ubuntu24.04")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["debian"][0].update(python="3.13t"), "built with the GIL"),
        (lambda d: d["debian"][0].update(python="three"), "is not a Python version"),
        (lambda d: d["debian"][0].update(glibc="2.x"), "not a glibc version"),
        (lambda d: d["debian"][0].pop("source"), "source"),
        (lambda d: d["debian"].append(dict(d["debian"][0])), "listed twice"),
        (lambda d: d.update(schema_version=2), "schema_version"),
        (lambda d: d["debian"][0].update(pythons="3.11"), "unknown key"),
        (lambda d: d["debian"][1].update(glibc=3), r"debian\[1\]\.glibc must be a string, not 3"),
        (lambda d: d["debian"][2].update(release=" "), r"debian\[2\]\.release: must not be empty"),
        (lambda d: d.pop("opt_python"), "base_pythons.toml: missing key 'opt_python'"),
        (lambda d: d.update(schema_version=0), "schema_version: must be at least 1, not 0"),
    ],
)
def test_a_broken_table_is_one_facts_error(change: Any, message: str) -> None:
    data = copy.deepcopy(_data())
    change(data)
    with pytest.raises(FactsError, match=message):
        parse_base_pythons(data)
