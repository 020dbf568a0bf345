"""``archwheel matrix --variants``: per-arch cells of the shipped example recipe published as
variants of one version, built by the fake builder (real wheels, synthetic fatbins; every cell
makes the same file name, as real builds of one recipe with other arch lists do) through the
command's own request and publish wiring. Adding an arch builds only the new cell and leaves
the published wheels' files as they were; the plan says which cells are reused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from archwheel.interfaces.cli import build_parser
from archwheel.interfaces.commands.matrix import MatrixCommand, run_request
from archwheel.matrix import read_index
from tests.support.cli import CliRun
from tests.support.matrix_fakes import FakeCellBuilder
from tests.support.schemas import matrix_plan_schema, matrix_result_schema

BASE = ("--recipe", "example", "--python", "3.11", "--variants")


def _archs(*archs: str) -> list[str]:
    return [a for arch in archs for a in ("--arch", arch)]


def _run(index: Path, work: Path, builder: FakeCellBuilder, *args: str) -> int:
    """``archwheel matrix BASE ARGS --index INDEX --work WORK --format json`` with ``builder``."""
    argv = ["matrix", *BASE, *args, "--index", str(index), "--work", str(work), "--format", "json"]
    return run_request(MatrixCommand.from_args(build_parser("matrix").parse_args(argv)), builder)


def _published(index: Path) -> dict[str, tuple[int, str]]:
    """Every file of the current tree's wheels folder (label folders too): inode and sha256."""
    wheels = (index / "current" / "wheels").resolve()
    return {
        str(p.relative_to(wheels)): (p.stat().st_ino, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(wheels.rglob("*.whl"))
    }


def _plan(cli_run: CliRun, index: Path, *args: str) -> dict[str, Any]:
    code, out, err = cli_run("matrix", *BASE, *args, "--index", str(index), "--plan",
                             "--format", "json")  # fmt: skip
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    jsonschema.validate(document, matrix_plan_schema())
    return document


def test_adding_an_arch_builds_only_its_cell_and_touches_no_published_wheel(
    cli_run: CliRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index, work = tmp_path / "index", tmp_path / "work"
    first = FakeCellBuilder(same_name=True)
    assert _run(index, work, first, *_archs("8.0", "9.0")) == 0
    capsys.readouterr()
    assert [c.arch for c in first.calls] == ["8.0", "9.0"]
    before = _published(index)
    assert sorted(before) == [
        "example-1.0+1-cp311-none-linux_x86_64-sm80.whl",
        "example-1.0+1-cp311-none-linux_x86_64-sm90.whl",
        "sm80/example-1.0+1-cp311-none-linux_x86_64.whl",
        "sm90/example-1.0+1-cp311-none-linux_x86_64.whl",
    ]

    # The plan of the grown axis: the two published cells are reused, the new one is built,
    # and each cell names its label and properties.
    plan = _plan(cli_run, index, *_archs("8.0", "9.0", "12.0"))
    actions = {c["arch"]: c["action"] for c in plan["cells"]}
    assert actions == {"8.0": "skip", "9.0": "skip", "12.0": "build"}
    rows = {row["cell"]: row for row in plan["variants"]}
    assert rows["example py3.11 [12.0]"] == {
        "cell": "example py3.11 [12.0]",
        "action": "build",
        "label": "sm120",
        "properties": {"nvidia": {"cuda_version_lower_bound": ["13.0"], "sm_arch": ["120_real"]}},
        "plain": False,
        "published": [],
    }
    assert rows["example py3.11 [8.0]"]["action"] == "skip"
    assert rows["example py3.11 [8.0]"]["published"] == ["sm80"]
    code, out, _ = cli_run("matrix", *BASE, *_archs("8.0", "9.0", "12.0"), "--index", str(index),
                           "--plan")  # fmt: skip
    assert code == 0
    assert "1 to build, 2 already in the index" in out
    assert "example py3.11 [12.0] -> sm120: sm_arch 120_real; cuda_version_lower_bound 13.0" in out
    assert "example py3.11 [9.0] -> sm90: sm_arch 90_real; cuda_version_lower_bound 13.0 " in (
        out.replace("\n", " ")
    )
    assert "(published: sm90)" in out

    # The run: one build; the result says which cells were reused and with which files.
    second = FakeCellBuilder(same_name=True)
    assert _run(index, work, second, *_archs("8.0", "9.0", "12.0")) == 0
    assert [c.arch for c in second.calls] == ["12.0"]
    result = json.loads(capsys.readouterr().out)
    jsonschema.validate(result, matrix_result_schema())
    cells = {c["arch"]: c for c in result["cells"]}
    assert {a: c["verdict"] for a, c in cells.items()} == {
        "8.0": "skipped", "9.0": "skipped", "12.0": "published",
    }  # fmt: skip
    assert cells["8.0"]["wheels"] == ["example-1.0+1-cp311-none-linux_x86_64-sm80.whl"]
    after = _published(index)
    assert {name: after[name] for name in before} == before  # same inodes, same bytes
    assert sorted(set(after) - set(before)) == [
        "example-1.0+1-cp311-none-linux_x86_64-sm120.whl",
        "sm120/example-1.0+1-cp311-none-linux_x86_64.whl",
    ]
    wheels = index / "current" / "wheels"
    labels = json.loads((wheels / "example-1.0+1-variants.json").read_text())["variants"]
    assert sorted(labels) == ["sm120", "sm80", "sm90"]


def test_default_arch_publishes_its_cell_plain_beside_the_variants(
    cli_run: CliRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index, work = tmp_path / "index", tmp_path / "work"
    args = (*_archs("8.0", "9.0"), "--default-arch", "8.0;9.0")
    plan = _plan(cli_run, index, *args)
    rows = {row["cell"]: row for row in plan["variants"]}
    assert sorted(rows) == [
        "example py3.11 [8.0;9.0]",
        "example py3.11 [8.0]",
        "example py3.11 [9.0]",
    ]  # the default arch list joined the axis
    assert rows["example py3.11 [8.0;9.0]"]["plain"] is True
    assert rows["example py3.11 [8.0;9.0]"]["label"] is None
    builder = FakeCellBuilder(same_name=True)
    assert _run(index, work, builder, *args) == 0
    capsys.readouterr()
    assert len(builder.calls) == 3
    files = sorted(e.file for e in read_index(index))
    assert files == [
        "example-1.0+1-cp311-none-linux_x86_64-sm80.whl",
        "example-1.0+1-cp311-none-linux_x86_64-sm90.whl",
        "example-1.0+1-cp311-none-linux_x86_64.whl",  # the default, plain: pip gets it
    ]
    plain = next(e for e in read_index(index) if e.file.endswith("x86_64.whl"))
    assert plain.expect == "8.0;9.0"


def test_default_arch_needs_variants_and_arch_lists_need_it_to_share_an_index(
    cli_run: CliRun, tmp_path: Path
) -> None:
    index = str(tmp_path / "i")
    code, _, err = cli_run("matrix", "--recipe", "example", "--python", "3.11",
                           "--default-arch", "8.0", "--index", index, "--plan")  # fmt: skip
    assert code == 2 and "--default-arch applies to --variants" in err
    code, _, err = cli_run("matrix", "--recipe", "example", "--python", "3.11",
                           *_archs("8.0", "9.0"), "--index", index, "--plan")  # fmt: skip
    assert code == 2 and "same wheel file name" in err
    code, _, err = cli_run("matrix", *BASE, *_archs("8.0", "9.0"), "--default-arch", "8.0",
                           "--default-arch", "9.0", "--index", index, "--plan")  # fmt: skip
    assert code == 0, err
