"""archwheel reads METADATA as pip does: the standard library's ``email.parser`` (``compat32``)
and ``packaging.metadata.parse_email`` are the oracles, on generated text, on METADATA shapes
the build backends write, and on every METADATA installed here."""

from __future__ import annotations

import email.parser
import email.policy
import importlib.metadata
import re
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.metadata import parse_email
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from archwheel.binary.coremetadata import parse_core_metadata
from archwheel.binary.wheelmeta import read_wheel_metadata
from tests.support.inventory_builders import build_wheel
from tests.support.metadata_shapes import Shape, shapes

# Pieces that meet every branch of the header grammar: envelope lines, folds of spaces and tabs,
# the three line ends, lines that end the headers, characters str.splitlines breaks at.
_PIECES = ("From ", "Name", "Requires-Dist", ":", ": ", " ", "\t", "\n", "\r", "\r\n", "a",
           "é", "\x0c", "\x1c", "\x85", "\u2028", "From", "-", "x: y\n", "        \n", "\t\n",
           "\n\n", "torch==2.14.1", "[", "@")  # fmt: skip


def _oracle(text: str) -> tuple[tuple[tuple[str, str], ...], str]:
    message = email.parser.HeaderParser(policy=email.policy.compat32).parsestr(text)
    payload = message.get_payload()
    assert isinstance(payload, str)
    return tuple((k, str(v)) for k, v in message.items()), payload


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join))
def test_the_same_headers_and_body_as_email_parser(text: str) -> None:
    parsed = parse_core_metadata(text)
    assert (parsed.headers, parsed.body) == _oracle(text)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_PIECES), min_size=1, max_size=30).map("".join),
    st.lists(st.sampled_from(_PIECES), max_size=30).map("".join),
    st.integers(0, 300),
)
def test_the_same_past_the_parsers_chunks(fold: str, tail: str, pad: int) -> None:
    """Headers longer than the 8192 characters email.parser is fed at a time (a line end split
    between two of them): one field folded over and over, then anything."""
    folded = re.sub(r"(\r\n|\r|\n)", r"\1 ", fold) + "\n "
    text = "Name: " + "x" * pad + "\n " + folded * (9000 // len(folded) + 1) + tail
    parsed = parse_core_metadata(text)
    assert (parsed.headers, parsed.body) == _oracle(text)


def _pip_reads(text: str) -> tuple[str, str, list[str], str | None]:
    """Name, version, requirements and Requires-Python as packaging reads them; a
    requirement's ends stripped as pip strips them."""
    raw, unparsed = parse_email(text)
    assert "name" in raw and "version" in raw, unparsed
    return (
        raw["name"],
        raw["version"],
        [r.strip() for r in raw.get("requires_dist", [])],
        raw.get("requires_python"),
    )


@settings(max_examples=200, deadline=None)
@given(shapes())
def test_backend_shapes_read_as_packaging_reads_them(shape: Shape) -> None:
    parsed = parse_core_metadata(shape.text)
    assert (parsed.headers, parsed.body) == _oracle(shape.text)
    name, version, requires, python = _pip_reads(shape.text)
    assert (name, version, requires) == (shape.name, shape.version, list(shape.requires))
    assert parsed.get("name") == name and parsed.get("Version") == version
    assert [r.strip() for r in parsed.get_all("Requires-Dist")] == requires
    assert parsed.get("requires-python") == python
    raw, _ = parse_email(shape.text)
    assert parsed.get_all("Provides-Extra") == raw.get("provides_extra", [])
    header = parsed.get("Description")
    description = header if header is not None else parsed.body or None
    assert description == raw.get("description")


def _read_as_wheel(folder: Path, shape: Shape) -> tuple[str, str, list[str]]:
    """read_wheel_metadata of a wheel whose METADATA is the shape's text."""
    wheel = build_wheel(folder, "shape", "1.0", {"shape/__init__.py": b""})
    rewritten = folder / f"{canonicalize_name(shape.name).replace('-', '_')}-x.whl"
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(rewritten, "w") as out:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("/METADATA"):
                data = shape.text.encode()
            out.writestr(info, data)
    meta = read_wheel_metadata(rewritten)
    return meta.name, meta.version, [str(p) for p in meta.requires]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(shapes())
def test_backend_shapes_in_a_wheel(tmp_path: Path, shape: Shape) -> None:
    """read_wheel_metadata: the name, version and every requirement pip would see, even after a
    licence folded with whitespace-only lines."""
    name, version, requires, _ = _pip_reads(shape.text)
    got_name, got_version, got_requires = _read_as_wheel(tmp_path, shape)
    assert got_name == canonicalize_name(name)
    assert got_version == version
    expected = []
    for text in requires:
        req = Requirement(text)
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        expected.append(f"{canonicalize_name(req.name)}{extras}{req.specifier}")
    assert got_requires == expected


KIWI_LIKE = """\
Metadata-Version: 2.4
Name: myext
Version: 1.0+pt2.14.1cu130
Summary: CUDA kernels
License: =========================
         The licensing terms
        =========================
        Licensed under the terms of the Modified BSD License:
        \n        Copyright (c) 2013-2026, the authors
        \n        All rights reserved.
Requires-Python: >=3.11
Description-Content-Type: text/markdown
License-File: LICENSE
Requires-Dist: torch==2.14.1
Requires-Dist: numpy>=1.26
Provides-Extra: test
Requires-Dist: pytest; extra == "test"

# myext

Requires-Dist: not-a-requirement
"""


def test_a_licence_with_whitespace_only_lines_hides_no_requirement(tmp_path: Path) -> None:
    """setuptools folds an empty line of a licence as eight spaces: the fields after it are
    still headers (a reader that stopped there saw no Requires-Dist at all)."""
    assert "\n        \n" in KIWI_LIKE
    parsed = parse_core_metadata(KIWI_LIKE)
    assert parsed.get_all("requires-dist") == [
        "torch==2.14.1",
        "numpy>=1.26",
        'pytest; extra == "test"',
    ]
    assert parsed.get("Requires-Python") == ">=3.11"
    assert parsed.body == "# myext\n\nRequires-Dist: not-a-requirement\n"
    license_text = parsed.get("License")
    assert license_text is not None and license_text.endswith("All rights reserved.")
    shape = Shape("setuptools", KIWI_LIKE, "myext", "1.0+pt2.14.1cu130", (), ">=3.11")
    _, _, requires = _read_as_wheel(tmp_path, shape)
    assert requires == ["torch==2.14.1", "numpy>=1.26", "pytest"]


def test_a_form_feed_does_not_end_a_line() -> None:
    """str.splitlines breaks at a form feed; email does not: the text after it stays the
    licence's, not a line of its own that would end the headers."""
    text = "Name: a\nVersion: 1\nLicense: GPL\n        \x0cEND OF TERMS\nRequires-Dist: torch==2.14.1\n"
    parsed = parse_core_metadata(text)
    assert parsed.get_all("Requires-Dist") == ["torch==2.14.1"]
    assert parsed.get("License") == "GPL\n        \x0cEND OF TERMS"


def test_a_line_that_is_no_header_begins_the_body() -> None:
    text = "Name: a\nVersion: 1\nnot a header\nRequires-Dist: torch==2.14.1\n"
    parsed = parse_core_metadata(text)
    assert parsed.get_all("Requires-Dist") == []
    assert parsed.body == "not a header\nRequires-Dist: torch==2.14.1\n"
    assert (parsed.headers, parsed.body) == _oracle(text)


def _installed_metadata() -> list[tuple[str, str]]:
    found = []
    for dist in importlib.metadata.distributions():
        text = dist.read_text("METADATA") or dist.read_text("PKG-INFO")
        if text:
            found.append((str(dist.metadata["Name"]), text))
    return found


def test_every_metadata_installed_here() -> None:
    """The METADATA files of this environment, written by setuptools, hatchling, flit, maturin,
    scikit-build-core, meson-python, poetry: read field for field as email reads them."""
    installed = _installed_metadata()
    if len(installed) < 5:
        pytest.skip("fewer than five distributions installed here")
    for name, text in installed:
        parsed = parse_core_metadata(text)
        assert (parsed.headers, parsed.body) == _oracle(text), name
