"""Property-based: generated recipe, manifest and audit documents end in the documented errors
only (audit documents: what `diff` reads).

A recipe (TOML) or a manifest (JSON) comes from anywhere; whatever it holds (any value where a
table, string or number belongs, deep nesting, huge integers, text that is not TOML or JSON), its
loading ends in ``RecipeError`` / ``InputError`` (exit 2 / 3) or succeeds: never another
exception, which the CLI would report as an internal error (exit 4).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from archwheel.errors import ArchwheelError
from archwheel.facts.catalog import load_facts
from archwheel.verdicts.manifest import load_manifest
from archwheel.wheelbuild.recipes.recipe import load_recipe, parse_recipe
from tests.support.fuzz import FUZZ_SETTINGS
from tests.support.paths import ROOT

FACTS = load_facts()

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

EXAMPLE = ROOT / "recipes" / "example.toml"
VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(1 << 70), max_value=1 << 70),
        st.floats(allow_nan=True),
        st.text(max_size=30),
        st.sampled_from(["/", "..", "file:///dev/zero", "-rf", "8.0;9.0+PTX", "a" * 64]),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)


def _error_line(action: Callable[[], object]) -> str | None:
    """The one-line message of the ``ArchwheelError`` that ``action`` raises, or None; any other
    exception propagates and fails the test."""
    try:
        action()
    except ArchwheelError as exc:
        return exc.one_line()
    return None


def _replace(document: Any, path: list[str], value: object) -> Any:
    if not path or not isinstance(document, dict):
        return value
    key = path[0]
    copy = dict(document)
    copy[key] = _replace(document.get(key, {}), path[1:], value)
    return copy


@st.composite
def recipes(draw: st.DrawFn) -> dict[str, Any]:
    document: dict[str, Any] = tomllib.loads(EXAMPLE.read_text())
    for _ in range(draw(st.integers(1, 3))):
        table = draw(st.sampled_from(sorted(document)))
        keys = sorted(document[table]) if isinstance(document[table], dict) else []
        key = draw(st.one_of(st.sampled_from(keys), st.text(max_size=8))) if keys else None
        path = [table] if key is None else [table, key]
        document = _replace(document, path, draw(VALUES))
    return document


@FUZZ_SETTINGS
@given(document=recipes())
def test_generated_recipes_fail_only_as_recipe_errors(document: dict[str, Any]) -> None:
    message = _error_line(lambda: parse_recipe(document, origin=EXAMPLE, facts=FACTS))
    assert message is None or "\n" not in message


@FUZZ_SETTINGS
@given(text=st.one_of(st.text(max_size=200), st.binary(max_size=200).map(repr)))
def test_generated_recipe_text_fails_only_as_recipe_errors(
    tmp_path_factory: Any, text: str
) -> None:
    path = tmp_path_factory.mktemp("recipe") / "recipe.toml"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    message = _error_line(lambda: load_recipe(path, facts=FACTS))
    assert message is None or "\n" not in message


@st.composite
def manifests(draw: st.DrawFn) -> str:
    base: dict[str, Any] = {
        "kind": "archwheel-manifest",
        "schema_version": 1,
        "wheels": [
            {"file": "a-1.0-py3-none-any.whl", "sha256": "0" * 64, "size": 1, "name": "a",
             "version": "1.0", "cuda": {}, "requires_cuda": {}, "native_libraries": {}}
        ],
    }  # fmt: skip
    document: Any = base
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            key = draw(st.sampled_from(sorted(base["wheels"][0])))
            document = _replace(
                document, ["wheels"], [_replace(base["wheels"][0], [key], draw(VALUES))]
            )
        else:
            document = _replace(document, [draw(st.sampled_from(sorted(base)))], draw(VALUES))
    return json.dumps(document)


@FUZZ_SETTINGS
@given(text=st.one_of(manifests(), st.text(max_size=100)))
def test_generated_manifests_fail_only_as_input_errors(text: str) -> None:
    message = _error_line(lambda: load_manifest(text, "manifest.json"))
    assert message is None or "\n" not in message


def _audit_document() -> dict[str, Any]:
    from archwheel.binary.model import InputInventory
    from archwheel.binary.scan.binary import scan_bytes
    from archwheel.verdicts.audit import audit, audit_document
    from tests.support.builders import Entry, container, elf64

    lib = scan_bytes("pkg/lib.so", elf64([(".nv_fatbin", container(Entry(sm=80)))]))
    inventory = InputInventory("a-1.0-py3-none-any.whl", "wheel", libraries=(lib,))
    return audit_document([audit(inventory, None)])


AUDIT_DOCUMENT = _audit_document()


@st.composite
def audit_documents(draw: st.DrawFn) -> str:
    """An audit document (as `audit --format json` writes it) with values replaced anywhere
    down to an image's fields."""
    document: Any = json.loads(json.dumps(AUDIT_DOCUMENT))
    entry = document["inputs"][0]
    library = entry["libraries"][0]
    image = library["images"][0]
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from([document, entry, library, image]))
        where[draw(st.sampled_from(sorted(where)))] = draw(VALUES)
    return json.dumps(document)


@FUZZ_SETTINGS
@given(text=st.one_of(audit_documents(), st.text(max_size=100)))
def test_generated_audit_documents_fail_only_as_input_errors(
    tmp_path_factory: Any, text: str
) -> None:
    """What `diff` reads as an audit document: an `InputError`/`UsageError` (one line) or a
    side; never another exception (an image of `null` was an AttributeError, exit 4)."""
    from archwheel.inspection.diffing import side_from_document

    path = tmp_path_factory.mktemp("audit") / "old.json"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    message = _error_line(lambda: side_from_document(path))
    assert message is None or "\n" not in message
