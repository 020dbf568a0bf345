"""Which base runs a wheel for a CPython this host does not: the wheel's Python from its tags,
and the Debian suite that packages it, or a one-line refusal naming the Pythons there are."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from archwheel.effects.python_bases import (
    host_python,
    other_python,
    other_python_of,
    suite_for,
    wheel_python,
)
from archwheel.errors import UsageError

HOST = f"cp{sys.version_info.major}{sys.version_info.minor}"


@pytest.mark.parametrize(
    ("tags", "python"),
    [
        (["cp313-cp313-manylinux_2_28_x86_64"], "3.13"),
        (["cp314-cp314t-linux_x86_64"], "3.14t"),
        (["cp39-abi3-manylinux_2_17_x86_64"], None),  # abi3 serves many
        (["py3-none-any"], None),
        (["cp313-none-linux_x86_64"], None),
    ],
)
def test_the_wheels_python_is_read_from_its_tags(tags: list[str], python: str | None) -> None:
    assert wheel_python(tags) == python


def test_only_another_python_than_this_hosts_is_other() -> None:
    assert other_python([f"{HOST}-{HOST}-linux_x86_64"]) is None
    assert other_python(["cp312-cp312-linux_x86_64", f"{HOST}-{HOST}-linux_x86_64"]) is None
    other = "cp313" if host_python() != "3.13" else "cp311"
    assert other_python([f"{other}-{other}-linux_x86_64"]) == f"3.{other[3:]}"
    assert other_python_of(Path(f"x-1.0-{other}-{other}-linux_x86_64.whl")) == f"3.{other[3:]}"
    assert other_python_of(Path("not-a-wheel.whl")) is None


def test_the_suite_of_a_python_or_a_refusal_naming_those_there_are() -> None:
    assert suite_for("3.13", Path("x.whl")).image == "archwheel/debian:trixie"
    assert suite_for("3.14", Path("x.whl")).image == "archwheel/debian:sid"
    with pytest.raises(UsageError, match=r"x\.whl: built for Python 3\.12, .*3\.13 \(trixie\)"):
        suite_for("3.12", Path("x.whl"))
