"""Names from inputs are printed literally: rich markup in a member name is
shown, never applied or parsed (``[/]`` crashed the audit); control characters (ESC, OSC, BEL,
CR, bidirectional overrides) reach no terminal raw, in any text format or error line; JSON keeps
every name exact.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from archwheel.effects.process import quote_command
from archwheel.facts.catalog import load_facts
from archwheel.interfaces.render.build import build_output
from archwheel.interfaces.render.common import literal, md_code, safe
from archwheel.wheelbuild.recipes.recipe import load_recipe
from tests.support.builders import Entry, container, elf64, write_zip
from tests.support.cli import CliRun
from tests.support.paths import ROOT

FACTS = load_facts()

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


def test_audit_html_shows_names_literally(
    cli_run: CliRun, hostile_wheel: Path, tmp_path: Path
) -> None:
    """In the HTML report too, table and chart: each name in its literal form, HTML-escaped."""
    import html

    page = tmp_path / "report.html"
    code, _, err = cli_run("audit", str(hostile_wheel), "--format", "html", "-o", str(page))
    assert code == 3, err
    text = page.read_text(encoding="utf-8")
    _assert_no_raw_controls(text)
    shown = html.unescape(text)
    for name in HOSTILE:
        assert literal(name) in shown, name


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


HOSTILE_COMMAND = "make \x1b]0;owned\x07 [bold red]x[/bold red] \x1b[2J\rdone"


def _hostile_recipe(tmp_path: Path) -> Path:
    text = (ROOT / "recipes" / "example.toml").read_text(encoding="utf-8")
    source = (ROOT / "examples" / "cuda-kernels").resolve()
    text = text.replace('path = "../examples/cuda-kernels"', f'path = "{source}"')
    # TOML's own escapes: the file is plain text, the command holds the control characters.
    escapes = {"\x1b": "\\u001b", "\x07": "\\u0007", "\r": "\\r"}
    start = text.index('command = """')
    end = text.index('"""', start + 13) + 3
    command = "".join(escapes.get(c, c) for c in HOSTILE_COMMAND)
    text = text[:start] + f'command = "{command}"' + text[end:]
    recipe = tmp_path / "hostile.toml"
    recipe.write_text(text, encoding="utf-8")
    return recipe


def test_build_echo_shows_recipe_commands_and_build_lines_literally(tmp_path: Path) -> None:
    # The recipe's command is echoed as the container command line, and build output comes back
    # line by line: ESC/OSC sequences and rich markup in either reach no terminal.
    recipe = load_recipe(_hostile_recipe(tmp_path), facts=FACTS)
    assert recipe.build.command.strip() == HOSTILE_COMMAND  # the recipe holds it as written
    stream = io.StringIO()
    log = io.StringIO()
    output = build_output(log, Console(file=stream, width=400), None, quiet=False)
    output.stage("compile", HOSTILE_COMMAND)
    output.echo(quote_command(["docker", "run", "img", "bash", "-c", recipe.build.command]))
    output.line(f"building: {HOSTILE_COMMAND}")
    shown = stream.getvalue()
    _assert_no_raw_controls(shown)
    assert "\\x1b]0;owned\\x07 [bold red]x[/bold red]" in shown
    assert shown.count("[bold red]x[/bold red]") == 3
    assert HOSTILE_COMMAND in log.getvalue()  # the saved log keeps the exact bytes


def test_build_plan_of_a_hostile_recipe_is_shown_literally(cli_run: CliRun, tmp_path: Path) -> None:
    code, out, err = cli_run("build", "--recipe", str(_hostile_recipe(tmp_path)), "--plan")
    assert code == 0, err
    _assert_no_raw_controls(out + err)


AR_MEMBER = "m\x1b]0;owned\x07[bold]x[/bold].o"
SECTION = "sec\x1b[2J[red]s[/red]\u202e"


@pytest.fixture
def named_inside_wheel(tmp_path: Path) -> Path:
    """An ar member (BSD long name) and an ELF section whose names hold controls and markup."""
    name = AR_MEMBER.encode()
    member = elf64([(".nv_fatbin", container(Entry(sm=80)))])
    head = f"#1/{len(name)}".encode().ljust(16) + b"0".ljust(12) + b"0".ljust(6) * 2
    head += b"100644".ljust(8) + str(len(name) + len(member)).encode().ljust(10) + b"`\n"
    archive = b"!<arch>\n" + head + name + member
    library = elf64([(SECTION, container(Entry(sm=90)))])
    return write_zip(
        tmp_path / "demo-1.0-py3-none-any.whl", [("pkg/libh.a", archive), ("pkg/libs.so", library)]
    )


def test_ar_member_and_section_names_are_exact_in_json(
    cli_run: CliRun, named_inside_wheel: Path
) -> None:
    # The scanner keeps names as stored: JSON escaping is exact.
    code, out, err = cli_run("audit", str(named_inside_wheel), "--format", "json", "--detail")
    assert code == 0, err
    libraries = json.loads(out)["inputs"][0]["libraries"]
    assert [lib["path"] for lib in libraries] == [f"pkg/libh.a({AR_MEMBER})", "pkg/libs.so"]
    assert libraries[1]["images"][0]["section"] == SECTION


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_ar_member_and_section_names_are_shown_escaped(
    cli_run: CliRun, named_inside_wheel: Path, fmt: str
) -> None:
    code, out, err = cli_run("audit", str(named_inside_wheel), "--format", fmt, "--detail")
    assert code == 0, err
    _assert_no_raw_controls(out + err)
    # Markdown source escapes backslashes and brackets; what it shows is the same as the table.
    shown = out.replace("\\\\", "\\").replace("\\[", "[").replace("\\]", "]")
    assert "m\\x1b]0;owned\\x07[bold]x[/bold].o" in shown
    assert "sec\\x1b[2J[red]s[/red]\\u202e" in shown
