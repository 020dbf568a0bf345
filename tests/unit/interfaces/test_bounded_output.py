"""Output bounded in the number of libraries (cost stays linear, memory bounded).

A wheel of thousands of tiny libraries (each a valid ELF with a fatbin) took 30 s to print as a
table and 156 s and 880 MB as an HTML report (one chart bar per library): the text, Markdown
and HTML tables now list at most ``MAX_LIBRARY_ROWS`` libraries, failing ones first, with a line
for the rest, and the chart the largest ``MAX_CHART_LIBRARIES``. The JSON keeps every library.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from archwheel.interfaces.render.common import MAX_LIBRARY_ROWS, bounded
from archwheel.interfaces.render.html import MAX_CHART_LIBRARIES
from tests.support.builders import Entry, container, elf64, write_zip
from tests.support.can_load_fakes import EXT, Fakes, compile_so, fakes, make_wheel
from tests.support.cli import CliRun

__all__ = ["fakes"]  # the fixture, imported for the can-load test

EXTRA = 12
# The last three libraries of each generated wheel are the failing ones.
FAILING = {f"{i:04d}" for i in range(MAX_LIBRARY_ROWS + EXTRA - 3, MAX_LIBRARY_ROWS + EXTRA)}


def _dist_info(version: str) -> list[tuple[str, bytes]]:
    metadata = f"Metadata-Version: 2.1\nName: crowded\nVersion: {version}\n"
    return [
        (f"crowded-{version}.dist-info/METADATA", metadata.encode()),
        (f"crowded-{version}.dist-info/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"),
    ]


@pytest.fixture(scope="module")
def crowded_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """MAX_LIBRARY_ROWS + EXTRA libraries with sm_90; the last three lack it (failing)."""
    good = elf64([(".nv_fatbin", container(Entry(sm=90)))])
    bad = elf64([(".nv_fatbin", container(Entry(sm=80, payload=b"\0" * 4096)))])
    count = MAX_LIBRARY_ROWS + EXTRA
    members = [(f"pkg/lib{i:04d}.so", good if i < count - 3 else bad) for i in range(count)]
    members += _dist_info("1.0")
    folder = tmp_path_factory.mktemp("crowded")
    return write_zip(folder / "crowded-1.0-py3-none-any.whl", members)


def _assert_listed_first(
    cli_run: CliRun,
    argv: list[str],
    first: set[str],
    more: str,
    exit_ok: Callable[[int], bool],
    pattern: str = r"pkg/lib(\d{4})\.so",
) -> None:
    """In table and Markdown: exactly MAX_LIBRARY_ROWS libraries listed, ``first`` among them,
    and the line for the EXTRA left out (``more``: what it calls them)."""
    for fmt in ("table", "markdown"):
        code, out, err = cli_run(*argv, "--format", fmt)
        assert exit_ok(code) and "internal error" not in err, (fmt, code, err)
        listed = set(re.findall(pattern, out))
        assert first <= listed and len(listed) == MAX_LIBRARY_ROWS, fmt
        assert f"{EXTRA} more {more}" in out, fmt


def test_the_table_lists_the_first_libraries_and_a_line_for_the_rest(
    cli_run: CliRun, crowded_wheel: Path
) -> None:
    code, out, _ = cli_run("audit", str(crowded_wheel))
    assert code == 0
    listed = set(re.findall(r"pkg/lib(\d{4})\.so", out))
    assert len(listed) == MAX_LIBRARY_ROWS
    assert f"... and {EXTRA} more libraries (at most {MAX_LIBRARY_ROWS} shown" in out


def test_failing_libraries_are_listed_first_when_rows_are_cut(
    cli_run: CliRun, crowded_wheel: Path
) -> None:
    argv = ["audit", str(crowded_wheel), "--expect", "9.0"]
    _assert_listed_first(cli_run, argv, FAILING, "libraries", lambda code: code == 1)


def test_can_run_lists_the_libraries_without_a_kernel_first(
    cli_run: CliRun, crowded_wheel: Path
) -> None:
    argv = ["can-run", str(crowded_wheel), "--cc", "9.0"]
    _assert_listed_first(cli_run, argv, FAILING, "libraries", lambda code: code != 0)


def test_diff_lists_the_libraries_that_dropped_an_arch_first(
    cli_run: CliRun, crowded_wheel: Path, tmp_path: Path
) -> None:
    # NEW: every library of OLD gains sm_100; three of those that had sm_90 lose it.
    count = MAX_LIBRARY_ROWS + EXTRA
    dropping = {f"{i:04d}" for i in (7, 300, count - 5)}
    both = elf64([(".nv_fatbin", container(Entry(sm=90), Entry(sm=100)))])
    lost = elf64([(".nv_fatbin", container(Entry(sm=100)))])
    old_bad = elf64([(".nv_fatbin", container(Entry(sm=80, payload=b"\0" * 4096), Entry(sm=100)))])
    members = [
        (
            f"pkg/lib{i:04d}.so",
            old_bad if i >= count - 3 else lost if f"{i:04d}" in dropping else both,
        )
        for i in range(count)
    ]
    new = write_zip(tmp_path / "crowded-2.0-py3-none-any.whl", members + _dist_info("2.0"))
    argv = ["diff", str(crowded_wheel), str(new)]
    _assert_listed_first(cli_run, argv, dropping, "changed libraries", lambda code: code == 1)


def test_can_load_lists_the_libraries_that_do_not_load_first(
    cli_run: CliRun, fakes: Fakes, tmp_path: Path
) -> None:
    # MAX_LIBRARY_ROWS + EXTRA extension modules that need nothing from torch, and three (the
    # last ones) that call c10::foo, which the older torch lacks: they do not load.
    fine = compile_so(tmp_path / f"_fine.{EXT}", 'extern "C" int fine() { return 1; }\n')
    count = MAX_LIBRARY_ROWS + EXTRA
    files = {f"many/m{i:04d}.{EXT}": fine for i in range(count - 3)}
    files.update({f"many/m{i:04d}.{EXT}": fakes.ext_so for i in range(count - 3, count)})
    wheel = make_wheel(tmp_path, "many", "1.0", files, ("torch",))
    argv = ["can-load", str(wheel), "--with", str(fakes.torch_old)]
    _assert_listed_first(
        cli_run, argv, FAILING, "libraries", lambda code: code == 1, r"many/m(\d{4})\."
    )


def test_json_keeps_every_library(cli_run: CliRun, crowded_wheel: Path) -> None:
    code, out, _ = cli_run("audit", str(crowded_wheel), "--format", "json")
    assert code == 0
    assert len(json.loads(out)["inputs"][0]["libraries"]) == MAX_LIBRARY_ROWS + EXTRA


def test_the_html_chart_draws_the_largest_libraries_only(
    cli_run: CliRun, crowded_wheel: Path, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    code, _, err = cli_run("audit", str(crowded_wheel), "--format", "html", "-o", str(page))
    assert code == 0, err
    text = page.read_text()
    total = MAX_LIBRARY_ROWS + EXTRA
    assert f"(the {MAX_CHART_LIBRARIES} largest of {total})" in text
    figure = text[text.index("<figure") : text.index("</figure>")]
    # The three failing libraries carry the largest payloads: they are among the bars.
    for i in range(total - 3, total):
        assert f"pkg/lib{i:04d}.so" in figure
    assert len(set(re.findall(r"pkg/lib\d{4}\.so", figure))) == MAX_CHART_LIBRARIES
    assert text.count('<tr class="library"') == MAX_LIBRARY_ROWS
    assert f"{EXTRA} more libraries" in text


def test_bounded_keeps_order_and_prefers_the_picked() -> None:
    items = list(range(10))
    assert bounded(items, 20) == (items, 0)
    assert bounded(items, 4) == ([0, 1, 2, 3], 6)
    assert bounded(items, 4, first=lambda i: i >= 8) == ([0, 1, 8, 9], 6)
    assert bounded(items, 2, first=lambda i: i % 3 == 0) == ([0, 3], 8)
