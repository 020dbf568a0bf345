"""Names from inputs are printed literally (issue 13, class 4): rich markup in a member name is
shown, never applied or parsed (``[/]`` crashed the audit); control characters (ESC, OSC, BEL,
CR, bidirectional overrides) reach no terminal raw, in any text format or error line; JSON keeps
every name exact.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archwheel.interfaces.render.common import literal, md_code, safe
from tests.support.builders import Entry, container, elf64, write_zip
from tests.support.cli import CliRun

HOSTILE = (
    "pkg/lib[/]x.so",
    "pkg/lib[bold red]x[/bold red].so",
    "pkg/lib\x1b]0;owned\x07y.so",
    "pkg/lib\x1b[2J\rz.so",
    "pkg/lib\u202eos.so",
    "pkg/lib`tick`|pipe*.so",
)
RAW_CONTROLS = ("\x1b", "\x07", "\r", "\u202e")


@pytest.fixture
def hostile_wheel(tmp_path: Path) -> Path:
    lib = elf64([(".nv_fatbin", container(Entry(sm=80)))])
    broken = elf64([(".nv_fatbin", container(Entry(sm=80), declared=4096))])
    members = [(name, lib) for name in HOSTILE] + [("pkg/bad[/]\x1b[31m.so", broken)]
    return write_zip(tmp_path / "demo-1.0-py3-none-any.whl", members)


def _assert_no_raw_controls(text: str) -> None:
    for char in RAW_CONTROLS:
        assert char not in text, f"{char!r} reached the output raw"


@pytest.mark.parametrize(
    "extra",
    [
        (),
        ("--detail",),
        ("--quiet",),
        ("--format", "markdown"),
        ("--format", "markdown", "--detail"),
    ],
)
def test_audit_text_formats_show_names_literally(
    cli_run: CliRun, hostile_wheel: Path, extra: tuple[str, ...]
) -> None:
    code, out, err = cli_run("audit", str(hostile_wheel), "--expect", "8.0", *extra)
    assert code == 3, err  # the damaged member makes it incomplete; no crash (4)
    _assert_no_raw_controls(out + err)
    if "--quiet" not in extra:
        for name in HOSTILE:
            assert (
                literal(name).replace("`", "") in out.replace("`", "").replace("\\", "")
                or literal(name) in out
            ), name
    assert "bad[/]" in out or "bad\\[/\\]" in out


def test_audit_table_shows_markup_as_text(cli_run: CliRun, hostile_wheel: Path) -> None:
    _, out, _ = cli_run("audit", str(hostile_wheel))
    assert "lib[/]x.so" in out
    assert "lib[bold red]x[/bold red].so" in out
    assert "lib\\x1b]0;owned\\x07y.so" in out
    assert "lib\\u202eos.so" in out


def test_audit_json_keeps_names_exact(cli_run: CliRun, hostile_wheel: Path) -> None:
    code, out, _ = cli_run("audit", str(hostile_wheel), "--format", "json")
    assert code == 3
    paths = {lib["path"] for lib in json.loads(out)["inputs"][0]["libraries"]}
    assert set(HOSTILE) <= paths


def test_audit_output_file_is_complete(
    cli_run: CliRun, hostile_wheel: Path, tmp_path: Path
) -> None:
    target = tmp_path / "report.txt"
    code, _, err = cli_run("audit", str(hostile_wheel), "-o", str(target))
    assert code == 3, err
    text = target.read_text(encoding="utf-8")
    assert "lib[/]x.so" in text and text.rstrip().splitlines()[-1].startswith("verdict:")


def test_error_lines_escape_controls_and_cut_huge_arguments(cli_run: CliRun) -> None:
    code, _, err = cli_run("audit", "missing\x1b]0;owned\x07" + "x" * 200_000 + ".whl")
    assert code == 3
    _assert_no_raw_controls(err)
    assert "missing\\x1b]0;owned\\x07" in err
    assert len(err) < 5000


def test_helpers() -> None:
    assert literal("a\x1bb\x00c\u202e") == "a\\x1bb\\x00c\\u202e"
    assert literal("é ü 中") == "é ü 中"  # printable text stays as it is
    assert literal("x" * 10, limit=5) == "xx..."
    assert safe("[bold]x[/]") == "\\[bold]x\\[/]"
    assert md_code("a`b") == "`` a`b ``" and md_code("ab") == "`ab`"
