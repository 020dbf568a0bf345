"""The Python API (docs/api.md): its example runs as written, on generated wheels."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import archwheel
from archwheel.errors import InputError, UsageError
from tests.support.builders import Entry, container, elf64
from tests.support.inventory_builders import build_wheel

DOC = Path(__file__).resolve().parents[3] / "docs" / "api.md"


def library(*entries: Entry) -> bytes:
    """A shared library whose .nv_fatbin holds one container of ``entries``."""
    return elf64([(".nv_fatbin", container(*entries))])


def two_builds(folder: Path) -> None:
    """dist/ with myext 1.0 (sm_80, sm_90, compute_90) and 1.1 (sm_80, compute_90)."""
    dist = folder / "dist"
    dist.mkdir()
    old = library(Entry(sm=80), Entry(sm=90), Entry(kind=1, sm=90))
    new = library(Entry(sm=80), Entry(kind=1, sm=90))
    build_wheel(dist, "myext", "1.0", {"myext/libmyext.so": old})
    build_wheel(dist, "myext", "1.1", {"myext/libmyext.so": new})


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_the_documented_example_prints_what_the_document_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (example,) = blocks("python")
    (printed,) = blocks("text")
    two_builds(tmp_path)
    monkeypatch.chdir(tmp_path)
    exec(compile(example, str(DOC), "exec"), {"__name__": "__example__"})
    assert capsys.readouterr().out == printed


def test_the_api_is_the_package_s_public_names() -> None:
    assert {"audit", "can_run", "can_load", "diff"} <= set(archwheel.__all__)
    assert {"ArchwheelError", "InputError", "UsageError"} <= set(archwheel.__all__)


def test_results_are_the_commands_results(tmp_path: Path) -> None:
    two_builds(tmp_path)
    wheel = tmp_path / "dist" / "myext-1.1-py3-none-any.whl"
    report = archwheel.audit(str(wheel))
    assert report.ok and report.expect is None  # inventory only
    assert report.to_json_dict()["libraries"][0]["path"] == "myext/libmyext.so"
    fleet = archwheel.can_run([wheel], ccs=["8.0"], driver="570.86.10")
    assert fleet.exit_code == 0
    assert archwheel.diff(wheel, wheel).exit_code == 0


def test_errors_carry_no_exit_code(tmp_path: Path) -> None:
    two_builds(tmp_path)
    wheel = tmp_path / "dist" / "myext-1.1-py3-none-any.whl"
    with pytest.raises(UsageError, match="none of the --with wheels is torch") as caught:
        archwheel.can_load(wheel, with_=[wheel])
    assert not hasattr(caught.value, "exit_code")
    with pytest.raises(UsageError, match="can-load needs the torch"):
        archwheel.can_load(wheel)
    with pytest.raises(InputError, match="no such file"):
        archwheel.diff(tmp_path / "gone.whl", wheel)
    with pytest.raises(UsageError):
        archwheel.audit(wheel, expect="sm_nonsense")
