"""The cross-check with real cuobjdump on the nvcc fixture corpus, blind spots accounted for.

- ``crosscheck_input`` on the corpus, wheels and directories made from it, where archwheel's
  side is the inventory the nvcc flags imply (tests/support/nvcc_fixtures.py): this runs without
  archwheel's scanner;
- the acceptance tests, which cross-check the scanner's own inventory of the
  corpus (the real torch 2.14.1 / torchvision 0.29.1 wheels:
  tests/integration/realwheel/test_crosscheck.py);
- ``archwheel audit --cross-check``.

The comparator on written-out entries is in tests/unit/verdicts/test_crosscheck.py.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from archwheel.binary.model import (
    FatbinEntry,
    InputInventory,
    LibraryInventory,
)
from archwheel.crosscheck.cuobjdump import Cuobjdump
from archwheel.crosscheck.inputs import crosscheck_input
from archwheel.crosscheck.run import CrossCheckRequest, run_cross_check
from archwheel.facts.arch import CodeKind
from archwheel.interfaces.render.crosscheck import print_cross_check
from archwheel.verdicts.crosscheck import split_library_path
from tests.support.cuobjdump_support import REL, entry
from tests.support.nvcc_fixtures import SPECS, BuiltFixture, NvccCorpus, Product

SASS, PTX, LTO = CodeKind.SASS, CodeKind.PTX, CodeKind.LTOIR


# -- crosscheck_input with the inventory the nvcc flags imply (no scanner needed) -----------------


def flags_inventory(fixtures: list[BuiltFixture], *, base: Path | None = None) -> InputInventory:
    """archwheel's side as the nvcc flags say it must be; paths relative to ``base``."""
    libraries = []
    for fixture in fixtures:
        name = fixture.path.relative_to(base).as_posix() if base else str(fixture.path)
        by_member: dict[str | None, list[FatbinEntry]] = {}
        for image in fixture.expected:
            for _ in range(image.count):
                by_member.setdefault(image.member, []).append(
                    entry(image.arch, image.section, min(image.compressions))
                )
        for member, entries in sorted(by_member.items(), key=lambda kv: kv[0] or ""):
            libraries.append(
                LibraryInventory(
                    fixture.library_path(member, name),
                    fixture.spec.file_kind,
                    fixture.path.stat().st_size,
                    tuple(entries),
                )
            )
    kind = "directory" if base else "file"
    return InputInventory(str(base or fixtures[0].path), kind, tuple(libraries))


@pytest.mark.nvcc
@pytest.mark.parametrize("name", [s.name for s in SPECS])
def test_cuobjdump_agrees_with_the_flags_on_every_fixture(
    nvcc_corpus: NvccCorpus, cuobjdump: Cuobjdump, name: str
) -> None:
    fixture = nvcc_corpus[name]
    report = crosscheck_input(flags_inventory([fixture]), fixture.path, tool=cuobjdump)
    assert report.disagreements == ()
    assert report.failures == ()
    assert report.files_checked == 1
    hidden = {(r.section, r.arch) for r in report.invisible}
    if fixture.spec.embed_section:
        assert hidden == {(fixture.spec.embed_section, e.arch) for e in fixture.expected}
    elif name == "lto.o":
        assert hidden == {(REL, "lto_90")}
    else:
        assert hidden == set()


@pytest.mark.nvcc
def test_crosscheck_of_a_directory_finds_the_libraries_the_scanner_missed(
    nvcc_corpus: NvccCorpus, cuobjdump: Cuobjdump
) -> None:
    everything = list(nvcc_corpus.fixtures)
    complete = crosscheck_input(
        flags_inventory(everything, base=nvcc_corpus.root), nvcc_corpus.root, tool=cuobjdump
    )
    assert complete.ok
    assert complete.files_checked == len(everything)
    # Leave multi_arch.so out of archwheel's side: cuobjdump still sees it.
    partial = [f for f in everything if f.name != "multi_arch.so"]
    report = crosscheck_input(
        flags_inventory(partial, base=nvcc_corpus.root), nvcc_corpus.root, tool=cuobjdump
    )
    assert {r.library for r in report.disagreements} == {"multi_arch.so"}
    assert all(r.archwheel == 0 and r.cuobjdump > 0 for r in report.disagreements)


@pytest.mark.nvcc
def test_crosscheck_reports_an_archive_member_with_wrong_counts(
    nvcc_corpus: NvccCorpus, cuobjdump: Cuobjdump
) -> None:
    fixture = nvcc_corpus["libkernels.a"]
    honest = flags_inventory([fixture])
    lying = InputInventory(
        honest.source,
        "file",
        tuple(
            lib if not lib.path.endswith("(scale.o)") else LibraryInventory(
                lib.path, lib.file_kind, lib.size, lib.entries[:1]
            )
            for lib in honest.libraries
        ),
    )  # fmt: skip
    report = crosscheck_input(lying, fixture.path, tool=cuobjdump)
    assert [r.library for r in report.disagreements] == [f"{fixture.path}(scale.o)"]


def make_wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def wheel_inventory(wheel: Path, fixtures: dict[str, BuiltFixture]) -> InputInventory:
    libraries = []
    for member, fixture in fixtures.items():
        for lib in flags_inventory([fixture]).libraries:
            _, inner = split_library_path(lib.path)
            libraries.append(
                LibraryInventory(
                    fixture.library_path(inner, member), lib.file_kind, lib.size, lib.entries
                )
            )
    return InputInventory(str(wheel), "wheel", tuple(libraries))


@pytest.mark.nvcc
def test_crosscheck_of_a_wheel_extracts_members_privately_and_cleans_up(
    nvcc_corpus: NvccCorpus, cuobjdump: Cuobjdump, tmp_path: Path, private_tmpdir: Path
) -> None:
    chosen = {
        "pkg/lib/libmulti.so": nvcc_corpus["multi_arch.so"],
        "pkg/lib/libkernels.a": nvcc_corpus["libkernels.a"],
        "pkg/lib/libdevice.so": nvcc_corpus["device_linked.so"],
        "pkg/kernels/standalone.fatbin": nvcc_corpus["standalone.fatbin"],
    }
    members = {name: f.path.read_bytes() for name, f in chosen.items()}
    members["pkg/__init__.py"] = b"# not a library\n"
    wheel = make_wheel(tmp_path / "pkg-1.0-py3-none-any.whl", members)
    seen: list[str] = []
    report = crosscheck_input(
        wheel_inventory(wheel, chosen), wheel, tool=cuobjdump, on_progress=seen.append
    )
    assert report.ok, [r.one_line() for r in report.disagreements]
    assert seen == sorted(chosen)
    assert list(private_tmpdir.iterdir()) == []


@pytest.mark.nvcc
def test_hostile_member_names_are_checked_without_writing_where_they_point(
    nvcc_corpus: NvccCorpus,
    cuobjdump: Cuobjdump,
    tmp_path: Path,
    private_tmpdir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fixture = nvcc_corpus["multi_arch.so"]
    names = ["../../escaped.so", "/absolute/escaped.so", "pkg/..\\..\\escaped.so"]
    wheel = make_wheel(tmp_path / "w.whl", dict.fromkeys(names, fixture.path.read_bytes()))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    report = crosscheck_input(
        wheel_inventory(wheel, dict.fromkeys(names, fixture)), wheel, tool=cuobjdump
    )
    assert report.ok
    assert report.files_checked == len(names)
    assert not list(tmp_path.rglob("escaped.so"))
    assert not Path("/absolute").exists()
    assert list(cwd.iterdir()) == []
    assert list(private_tmpdir.iterdir()) == []


def corrupt_member_data(wheel: Path, member: str) -> None:
    """Flip a byte inside a stored member's data so its CRC no longer matches."""
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo(member)
    data = bytearray(wheel.read_bytes())
    name_length, extra_length = struct.unpack_from("<HH", data, info.header_offset + 26)
    start = info.header_offset + 30 + name_length + extra_length
    data[start + info.compress_size // 2] ^= 0xFF
    wheel.write_bytes(bytes(data))


@pytest.mark.nvcc
def test_a_crc_mismatch_fails_that_member_only(
    nvcc_corpus: NvccCorpus, cuobjdump: Cuobjdump, tmp_path: Path, private_tmpdir: Path
) -> None:
    good, bad = nvcc_corpus["multi_arch.so"], nvcc_corpus["ptx_only.so"]
    wheel = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("good.so", good.path.read_bytes())
        zf.writestr("bad.so", bad.path.read_bytes())
    corrupt_member_data(wheel, "bad.so")
    report = crosscheck_input(
        wheel_inventory(wheel, {"good.so": good, "bad.so": bad}), wheel, tool=cuobjdump
    )
    assert [f.library for f in report.failures] == ["bad.so"]
    assert "CRC" in report.failures[0].message or "Bad" in report.failures[0].message
    assert "\n" not in report.failures[0].one_line()
    assert {r.library for r in report.rows} == {"good.so"}
    assert not report.ok
    assert list(private_tmpdir.iterdir()) == []


@pytest.mark.nvcc
def test_a_member_that_inflates_past_its_declared_size_is_refused(
    nvcc_corpus: NvccCorpus, cuobjdump: Cuobjdump, tmp_path: Path, private_tmpdir: Path
) -> None:
    fixture = nvcc_corpus["multi_arch.so"]
    wheel = make_wheel(tmp_path / "bomb.whl", {"lib.so": fixture.path.read_bytes()})
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("lib.so")
    data = bytearray(wheel.read_bytes())
    declared = 1000  # the member really inflates to ~1 MB
    struct.pack_into("<I", data, info.header_offset + 22, declared)  # local header
    central = data.rfind(b"PK\x01\x02")
    struct.pack_into("<I", data, central + 24, declared)  # central directory
    wheel.write_bytes(bytes(data))
    report = crosscheck_input(wheel_inventory(wheel, {"lib.so": fixture}), wheel, tool=cuobjdump)
    assert [f.library for f in report.failures] == ["lib.so"]
    assert list(private_tmpdir.iterdir()) == []


@pytest.mark.nvcc
def test_duplicate_member_names_are_refused(
    nvcc_corpus: NvccCorpus, cuobjdump: Cuobjdump, tmp_path: Path
) -> None:
    fixture = nvcc_corpus["multi_arch.so"]
    wheel = tmp_path / "dup.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("lib.so", fixture.path.read_bytes())
        with pytest.warns(UserWarning, match="Duplicate name"):
            zf.writestr("lib.so", nvcc_corpus["ptx_only.so"].path.read_bytes())
    report = crosscheck_input(wheel_inventory(wheel, {"lib.so": fixture}), wheel, tool=cuobjdump)
    assert [f.library for f in report.failures] == ["lib.so"]
    assert "appears 2 times" in report.failures[0].message


# -- acceptance: archwheel's scanner against cuobjdump -----------------------------------------


@pytest.mark.nvcc
@pytest.mark.parametrize("name", [s.name for s in SPECS])
def test_scanner_and_cuobjdump_agree_on_every_fixture(
    scan: SimpleNamespace, nvcc_corpus: NvccCorpus, cuobjdump: Cuobjdump, name: str
) -> None:
    fixture = nvcc_corpus[name]
    inventory = scan.scan_path(fixture.path)
    report = crosscheck_input(inventory, fixture.path, tool=cuobjdump)
    assert report.disagreements == (), [r.one_line() for r in report.disagreements]
    assert report.failures == ()
    if fixture.spec.product in (Product.EMBEDDED_INCBIN, Product.EMBEDDED_OBJCOPY):
        assert report.invisible, "the scanner must find the fatbin cuobjdump cannot see"


@pytest.mark.nvcc
def test_scanner_and_cuobjdump_agree_on_a_wheel_of_fixtures(
    scan: SimpleNamespace, nvcc_corpus: NvccCorpus, cuobjdump: Cuobjdump, tmp_path: Path
) -> None:
    members = {f"pkg/lib/{f.name}": f.path.read_bytes() for f in nvcc_corpus.fixtures}
    wheel = make_wheel(tmp_path / "pkg-1.0-py3-none-linux_x86_64.whl", members)
    report = crosscheck_input(scan.scan_path(wheel), wheel, tool=cuobjdump)
    problems = [r.one_line() for r in report.disagreements]
    assert report.ok, problems + [f.one_line() for f in report.failures]
    assert report.files_checked == len(nvcc_corpus.fixtures)


@pytest.mark.nvcc
def test_audit_cross_check_prints_to_stderr_and_keeps_json_clean(
    scan: SimpleNamespace, nvcc_corpus: NvccCorpus, cli_run: Any
) -> None:
    fixture = nvcc_corpus["multi_arch.so"]
    code, out, err = cli_run("audit", str(fixture.path), "--cross-check", "--format", "json")
    assert code == 0
    assert json.loads(out)["schema_version"]
    images = sum(e.count for e in fixture.expected)  # all visible to cuobjdump here
    assert f"agrees on {images} images in 1 files" in err


@pytest.mark.nvcc
def test_audit_cross_check_reports_invisible_images_of_an_embedded_fatbin(
    scan: SimpleNamespace, nvcc_corpus: NvccCorpus, cli_run: Any
) -> None:
    code, _, err = cli_run("audit", str(nvcc_corpus["embedded_incbin.so"].path), "--cross-check")
    assert code == 0
    assert err.count("invisible to cuobjdump: it reads only .nv_fatbin") == 3


@pytest.mark.nvcc
def test_run_cross_check_gives_one_report_per_input_and_the_worst_exit_code(
    nvcc_corpus: NvccCorpus, cuobjdump: Cuobjdump
) -> None:
    fixture = nvcc_corpus["multi_arch.so"]
    honest = flags_inventory([fixture])
    lying = InputInventory(
        honest.source,
        "file",
        tuple(
            LibraryInventory(lib.path, lib.file_kind, lib.size, lib.entries[1:])
            for lib in honest.libraries
        ),
    )
    seen: list[tuple[str, str]] = []
    request = CrossCheckRequest((honest, lying))
    result = run_cross_check(request, tool=cuobjdump, on_progress=lambda *a: seen.append(a))
    assert [r.ok for r in result.reports] == [True, False]
    assert result.exit_code == 1
    assert seen == [(str(fixture.path), str(fixture.path))] * 2
    assert run_cross_check(CrossCheckRequest((honest,)), tool=cuobjdump).exit_code == 0
    out = io.StringIO()
    print_cross_check(result, quiet=True, stream=out)
    assert out.getvalue().splitlines() == result.reports[1].lines(quiet=True)
