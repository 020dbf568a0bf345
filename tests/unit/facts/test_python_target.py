"""Free-threaded CPython (3.14t) as a build target: parsing, tags, pip's selectors."""

from __future__ import annotations

import pytest

from archwheel.facts.python_target import PythonTarget


@pytest.mark.parametrize(
    ("text", "wheel_tag", "interpreter", "free"),
    [
        ("3.11", "cp311-cp311", "python3.11", False),
        ("3.14", "cp314-cp314", "python3.14", False),
        ("3.14t", "cp314-cp314t", "python3.14t", True),
        ("3.13t", "cp313-cp313t", "python3.13t", True),
    ],
)
def test_tags(text: str, wheel_tag: str, interpreter: str, free: bool) -> None:
    target = PythonTarget.parse(text)
    assert str(target) == text
    assert target.wheel_tag == wheel_tag
    assert target.interpreter == interpreter
    assert target.free_threaded is free
    assert target.pip_args()[:2] == ("--python-version", text.removesuffix("t"))
    assert target.pip_args()[-2:] == ("--abi", wheel_tag.split("-")[1])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("3.12t", "free-threaded CPython exists from 3.13 on"),
        ("3.14T", "not a Python version"),
        ("314t", "not a Python version"),
        ("3.14tt", "not a Python version"),
    ],
)
def test_bad_versions(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PythonTarget.parse(text)


@pytest.mark.parametrize(
    ("target", "wheel", "fits"),
    [
        ("3.14t", "torch-2.15.0-cp314-cp314t-manylinux_2_28_x86_64.whl", True),
        ("3.14t", "torch-2.15.0-cp314-cp314-manylinux_2_28_x86_64.whl", False),
        ("3.14", "torch-2.15.0-cp314-cp314t-manylinux_2_28_x86_64.whl", False),
        ("3.14", "torch-2.15.0-cp314-cp314-linux_x86_64.whl", True),
        ("3.14t", "archwheel_example-0.1.0-py3-none-linux_x86_64.whl", True),
        ("3.14t", "ext-1.0-cp312-abi3-linux_x86_64.whl", True),
        ("3.11", "ext-1.0-cp312-cp312-linux_x86_64.whl", False),
    ],
)
def test_built_wheel_tag_must_fit_the_target(target: str, wheel: str, fits: bool) -> None:
    ok, why = PythonTarget.parse(target).accepts(wheel)
    assert ok is fits
    assert (why == "") is fits
    if not fits:
        assert PythonTarget.parse(target).wheel_tag in why
