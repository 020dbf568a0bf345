"""The loader's view of hostile libraries: real gcc-built libraries whose dynamic tables were
rewritten (tests/support/hostile_elf.py). Each table's records are bounded together, not one
by one, and no work is quadratic in a repeated record."""

from __future__ import annotations

import zipfile
from pathlib import Path

from archwheel.binary.dynamic import MAX_NAME_BYTES, MAX_VERSION_ENTRIES, read_file_dynamic
from archwheel.binary.dynamic_wheel import read_wheel_dynamic
from tests.support.can_load_fakes import Fakes, make_wheel
from tests.support.cli import CliRun
from tests.support.fuzz import watchdog
from tests.support.hostile_elf import one_name_symbols, symbols_naming, version_needs_bomb


def test_version_needs_are_bounded_in_all(tmp_path: Path) -> None:
    """65536 version-needs records of 65535 versions each, all pointing at one run of
    entries (2 MiB): bounded per record, that was 4 billion reads and as many list items (a
    97 KB wheel held `can-load` past the 30 s it was given). Now the table's versions are counted together."""
    with watchdog(60):
        info = read_file_dynamic(version_needs_bomb(tmp_path))
    assert info.problems == (
        f"version needs (.gnu.version_r) hold more than {MAX_VERSION_ENTRIES} versions",
    )


def test_one_name_exported_many_times_is_one_entry(tmp_path: Path) -> None:
    """120000 exported symbols of one name: the versions of a name were a tuple copied at
    every symbol (quadratic: 64000 symbols took 4.5 s; the bound of 1000000 would take days). Now each
    version of a name is kept once."""
    with watchdog(60):
        info = read_file_dynamic(one_name_symbols(tmp_path, 120_000))
    assert info.complete, info.problems
    assert info.exports["hello"] == (None,)


def test_the_symbols_of_one_wheel_are_bounded_together(tmp_path: Path) -> None:
    """Each library is bounded alone (MAX_SYMBOLS); a wheel of many such libraries is
    bounded too: past the input's budget a library is kept as a problem, its symbols
    dropped."""
    library = one_name_symbols(tmp_path, 100_000, undefined=True).read_bytes()
    wheel = tmp_path / "many-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for n in range(3):
            zf.writestr(f"many/lib{n}.so", library)
    libraries = read_wheel_dynamic(wheel, workers=1, max_symbols=250_000)
    assert [len(lib.undefined) for lib in libraries] == [99_999, 99_999, 0]
    assert libraries[2].problems == (
        "not read: the input's libraries hold more than 250000 dynamic symbols together",
    )
    assert all(lib.complete for lib in libraries[:2])


def test_a_name_without_an_end_is_refused_not_copied(tmp_path: Path) -> None:
    """1000 symbols naming one 2 MiB run without a NUL were 1000 copies of it (2 GB; a
    million symbols and a 30 MB table, terabytes). A name is at most 64 KiB."""
    info = read_file_dynamic(symbols_naming(tmp_path, 1000, b"A" * (2 << 20)))
    assert len(info.problems) == 1
    assert (
        f"of the dynamic string table is longer than {MAX_NAME_BYTES} bytes" in (info.problems[0])
    )


def test_names_read_are_bounded_by_the_table(tmp_path: Path) -> None:
    """60000 symbols at offsets 0, 1, 2 ... of one 60000-byte name: each a suffix of it (as a
    linker's tail merging makes them), 1.8 GB together. The names read are bounded by twice
    the table's bytes, plus 1 MiB."""
    info = read_file_dynamic(symbols_naming(tmp_path, 60000, b"B" * 60000 + b"\0", spread=True))
    assert len(info.problems) == 1
    assert "the names of the dynamic string table take more than" in info.problems[0]


def test_can_load_of_the_version_needs_bomb_ends_with_a_problem(
    cli_run: CliRun, fakes: Fakes, tmp_path: Path
) -> None:
    """The 97 KB wheel of the bomb against a torch (the g++-built stand-in): one problem, exit 3,
    in about a second (it was hours)."""
    library = version_needs_bomb(tmp_path)
    wheel = make_wheel(tmp_path, "evil", "1.0", {"evil/libevil.so": library}, ("torch",))
    with watchdog(120):
        code, out, err = cli_run("can-load", str(wheel), "--with", str(fakes.torch_new))
    assert code == 3, err
    assert "version needs (.gnu.version_r) hold more than 65536 versions" in out
