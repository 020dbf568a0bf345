"""Property-based: generated recipe and manifest documents end in the documented errors only.

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

from archwheel.build.recipe import load_recipe, parse_recipe
from archwheel.errors import ArchwheelError
from archwheel.verdicts.manifest import load_manifest
from tests.support.fuzz import FUZZ_SETTINGS
from tests.support.paths import ROOT

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
    message = _error_line(lambda: parse_recipe(document, origin=EXAMPLE))
    assert message is None or "\n" not in message


@FUZZ_SETTINGS
@given(text=st.one_of(st.text(max_size=200), st.binary(max_size=200).map(repr)))
def test_generated_recipe_text_fails_only_as_recipe_errors(
    tmp_path_factory: Any, text: str
) -> None:
    path = tmp_path_factory.mktemp("recipe") / "recipe.toml"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    message = _error_line(lambda: load_recipe(path))
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
