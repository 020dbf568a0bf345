"""The cross-check: archwheel's entries against cuobjdump's listing, blind spots accounted for.

Three layers of tests:
- the comparator on entries written out here (pure, no tools);
- ``crosscheck_input`` with real cuobjdump on the nvcc corpus, wheels and directories made from
  it, where archwheel's side is the inventory the nvcc flags imply (tests/nvcc_fixtures.py):
  this runs without archwheel's scanner;
- the acceptance tests of issue 2 item 5, which cross-check the scanner's own inventory of the
  corpus and of the real torch 2.14.1 / torchvision 0.29.1 wheels (they need
  ``archwheel.binary.scan``).
"""

from __future__ import annotations

import importlib
import json
import struct
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from archwheel.binary.cuobjdump import Cuobjdump
from archwheel.binary.model import (
    Compression,
    FatbinEntry,
    InputInventory,
    LibraryInventory,
)
from archwheel.facts.arch import CodeKind, Target
from archwheel.verdicts.crosscheck import (
    CountRow,
    CrossCheckReport,
    InvisibleRow,
    LibraryFailure,
    compare_library,
    crosscheck_input,
    invisible_reason,
    split_library_path,
    visible_arch,
)
from tests.nvcc_fixtures import SPECS, BuiltFixture, NvccCorpus, Product

SASS, PTX, LTO = CodeKind.SASS, CodeKind.PTX, CodeKind.LTOIR
NV, REL = ".nv_fatbin", "__nv_relfatbin"


def entry(arch: str, section: str = NV, compression: Compression = Compression.NONE) -> FatbinEntry:
    kind, target = Target.from_name(arch)
    return FatbinEntry(section, 0, kind, target, compression, 0, 0)


# -- the comparator -------------------------------------------------------------------------------


def test_visible_arch_strips_f_from_cubins_only() -> None:
    assert visible_arch(*Target.from_name("sm_103f")) == "sm_103"
    assert visible_arch(*Target.from_name("sm_90a")) == "sm_90a"
    assert visible_arch(*Target.from_name("compute_120f")) == "compute_120f"
    assert visible_arch(*Target.from_name("compute_120")) == "compute_120"


def test_family_cubins_agree_with_cuobjdumps_plain_name_and_keep_their_f() -> None:
    rows, invisible = compare_library(
        "libx.so",
        [entry("sm_103f"), entry("sm_103f"), entry("sm_100")],
        {(NV, SASS, "sm_103"): 2, (NV, SASS, "sm_100"): 1},
    )
    assert invisible == []
    assert rows == [
        CountRow("libx.so", NV, SASS, "sm_100", 1, 1, ("sm_100",)),
        CountRow("libx.so", NV, SASS, "sm_103", 2, 2, ("sm_103f",)),
    ]
    assert "(archwheel: sm_103f)" in rows[1].one_line()


def test_plain_and_family_cubins_of_one_arch_are_counted_together() -> None:
    rows, _ = compare_library(
        "libx.so", [entry("sm_100"), entry("sm_100f")], {(NV, SASS, "sm_100"): 2}
    )
    assert rows == [CountRow("libx.so", NV, SASS, "sm_100", 2, 2, ("sm_100", "sm_100f"))]


def test_family_ptx_must_match_exactly() -> None:
    rows, _ = compare_library("libx.so", [entry("compute_120f")], {(NV, PTX, "compute_120"): 1})
    assert sorted((r.arch, r.archwheel, r.cuobjdump) for r in rows) == [
        ("compute_120", 0, 1),
        ("compute_120f", 1, 0),
    ]


def test_a_count_mismatch_is_a_disagreement_with_both_numbers() -> None:
    rows, _ = compare_library("libx.so", [entry("sm_80")] * 3, {(NV, SASS, "sm_80"): 4})
    (row,) = rows
    assert not row.agrees
    assert row.one_line() == "libx.so [.nv_fatbin] sm_80: archwheel 3, cuobjdump 4"


def test_the_same_images_in_the_wrong_section_disagree() -> None:
    rows, _ = compare_library("libx.so", [entry("sm_80", REL)], {(NV, SASS, "sm_80"): 1})
    assert {(r.section, r.archwheel, r.cuobjdump) for r in rows} == {(REL, 1, 0), (NV, 0, 1)}


def test_images_only_cuobjdump_sees_are_disagreements() -> None:
    rows, _ = compare_library("libx.so", [], {(REL, PTX, "compute_120"): 2, (NV, SASS, "x"): 0})
    assert rows == [CountRow("libx.so", REL, PTX, "compute_120", 0, 2, ())]


def test_lto_ir_and_other_sections_are_invisible_not_disagreements() -> None:
    entries = [entry("lto_90", REL), entry("sm_80", ".cask_resource"), entry("sm_80", ".mydata")]
    rows, invisible = compare_library("libx.so", entries, {})
    assert rows == []
    assert sorted((r.section, r.arch, r.count) for r in invisible) == [
        (".cask_resource", "sm_80", 1),
        (".mydata", "sm_80", 1),
        (REL, "lto_90", 1),
    ]
    assert all(r.reason.startswith("invisible to cuobjdump") for r in invisible)
    assert invisible_reason(entry("sm_80", "(fatbin)")) is None  # a raw .fatbin: visible
    assert invisible_reason(entry("sm_90", "(cubin)")) is None
    assert invisible_reason(entry("sm_90", "(no section)")) is not None


def test_split_library_path_recognizes_archive_members() -> None:
    assert split_library_path("torch/lib/libx.a(k.o)") == ("torch/lib/libx.a", "k.o")
    assert split_library_path("torch/lib/libx.so") == ("torch/lib/libx.so", None)
    assert split_library_path("a(b)/c.so") == ("a(b)/c.so", None)


def test_report_is_ok_only_without_disagreements_and_failures() -> None:
    agree = CountRow("l", NV, SASS, "sm_80", 1, 1)
    differ = CountRow("l", NV, SASS, "sm_90", 1, 0)
    assert CrossCheckReport("s", "t", 1, (agree,)).ok
    assert not CrossCheckReport("s", "t", 1, (agree, differ)).ok
    assert CrossCheckReport("s", "t", 1, (agree, differ)).disagreements == (differ,)
    assert not CrossCheckReport("s", "t", 1, (agree,), failures=(LibraryFailure("l", "x"),)).ok
    hidden = InvisibleRow("l", ".mydata", SASS, "sm_80", 1, "invisible")
    assert CrossCheckReport("s", "t", 1, (agree,), invisible=(hidden,)).ok


def test_report_json_is_serializable_and_lists_disagreements() -> None:
    report = CrossCheckReport(
        "w.whl", "cuobjdump 13.5.37", 2,
        (CountRow("l", NV, SASS, "sm_103", 2, 1, ("sm_103f",)),),
        (InvisibleRow("l", ".mydata", SASS, "sm_80", 1, "invisible to cuobjdump"),),
        (LibraryFailure("m", "cuobjdump failed"),),
    )  # fmt: skip
    document = json.loads(json.dumps(report.to_json_dict()))
    assert document["ok"] is False
    assert document["schema_version"] == 1
    assert document["disagreements"][0]["archwheel_archs"] == ["sm_103f"]
    assert document["invisible"][0]["section"] == ".mydata"
    assert document["failures"] == [{"library": "m", "message": "cuobjdump failed"}]


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


@pytest.fixture
def private_tmpdir(tmp_path: Path) -> Iterator[Path]:
    """Point tempfile at an empty folder, to prove the cross-check leaves nothing behind."""
    folder = tmp_path / "tmpdir"
    folder.mkdir()
    old = tempfile.tempdir
    tempfile.tempdir = str(folder)
    try:
        yield folder
    finally:
        tempfile.tempdir = old


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


@pytest.mark.realwheel
def test_crosscheck_sees_every_device_library_of_torchvision_even_if_the_scanner_sees_none(
    torchvision_wheel: Path, cuobjdump: Cuobjdump, private_tmpdir: Path
) -> None:
    empty = InputInventory(str(torchvision_wheel), "wheel", ())
    report = crosscheck_input(empty, torchvision_wheel, tool=cuobjdump)
    assert report.failures == ()
    assert report.files_checked >= 9  # every ELF member: torchvision/*.so, torchvision.libs/*
    assert "torchvision/_C_stable.so" in {r.library for r in report.disagreements}
    assert all(r.archwheel == 0 and r.cuobjdump > 0 for r in report.rows)
    assert list(private_tmpdir.iterdir()) == []


# -- acceptance: archwheel's scanner against cuobjdump (issue 2, item 5) --------------------------


@pytest.fixture(scope="module")
def scan() -> ModuleType:
    """archwheel's scanner; these tests fail (not skip) until it exists."""
    return importlib.import_module("archwheel.binary.scan")


@pytest.mark.nvcc
@pytest.mark.parametrize("name", [s.name for s in SPECS])
def test_scanner_and_cuobjdump_agree_on_every_fixture(
    scan: ModuleType, nvcc_corpus: NvccCorpus, cuobjdump: Cuobjdump, name: str
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
    scan: ModuleType, nvcc_corpus: NvccCorpus, cuobjdump: Cuobjdump, tmp_path: Path
) -> None:
    members = {f"pkg/lib/{f.name}": f.path.read_bytes() for f in nvcc_corpus.fixtures}
    wheel = make_wheel(tmp_path / "pkg-1.0-py3-none-linux_x86_64.whl", members)
    report = crosscheck_input(scan.scan_path(wheel), wheel, tool=cuobjdump)
    problems = [r.one_line() for r in report.disagreements]
    assert report.ok, problems + [f.one_line() for f in report.failures]
    assert report.files_checked == len(nvcc_corpus.fixtures)


@pytest.mark.realwheel
@pytest.mark.slow
def test_scanner_and_cuobjdump_agree_on_the_torch_wheel(
    scan: ModuleType, torch_wheel: Path, cuobjdump: Cuobjdump
) -> None:
    report = crosscheck_input(scan.scan_path(torch_wheel), torch_wheel, tool=cuobjdump)
    assert report.failures == ()
    assert report.disagreements == (), [r.one_line() for r in report.disagreements]
    cuda = {r.arch: r for r in report.rows if r.library == "torch/lib/libtorch_cuda.so"}
    assert cuda["sm_103"].archwheel_archs == ("sm_103f",)  # the f restored
    ptx = {(r.library, r.section, r.arch) for r in report.rows if r.kind is PTX}
    assert ptx == {("torch/lib/libtorch_nvshmem.so", REL, "compute_120")}


@pytest.mark.realwheel
@pytest.mark.slow
def test_scanner_and_cuobjdump_agree_on_the_torchvision_wheel(
    scan: ModuleType, torchvision_wheel: Path, cuobjdump: Cuobjdump
) -> None:
    report = crosscheck_input(scan.scan_path(torchvision_wheel), torchvision_wheel, tool=cuobjdump)
    assert report.ok, [r.one_line() for r in report.disagreements]
    assert report.rows


# -- the report's lines and exit codes, and archwheel audit --cross-check -------------------------


def test_report_lines_say_agreement_in_one_line_and_list_each_finding() -> None:
    hidden = InvisibleRow("l", ".mydata", SASS, "sm_80", 2, "invisible to cuobjdump: x")
    agree = CrossCheckReport("w.whl", "cuobjdump 13.5", 1, (CountRow("l", NV, SASS, "sm_80", 3, 3),),
                             (hidden,))  # fmt: skip
    assert agree.lines() == [
        "cross-check of w.whl: cuobjdump 13.5 agrees on 3 images in 1 files; "
        "2 images are invisible to it",
        "  l [.mydata] sm_80 x2: invisible to cuobjdump: x",
    ]
    assert agree.lines(quiet=True) == []
    assert agree.exit_code == 0
    differ = CrossCheckReport("w.whl", "c", 1, (CountRow("l", NV, SASS, "sm_80", 3, 4),))
    assert differ.lines(quiet=True) == [
        "cross-check of w.whl: 1 disagreements with c",
        "  disagrees: l [.nv_fatbin] sm_80: archwheel 3, cuobjdump 4",
    ]
    assert differ.exit_code == 1
    failed = CrossCheckReport("w.whl", "c", 0, (), failures=(LibraryFailure("m", "broken"),))
    assert failed.lines(quiet=True) == ["  not checked: m: broken"]
    assert failed.exit_code == 4


def test_an_installed_inventory_without_its_root_cannot_be_cross_checked() -> None:
    from archwheel.errors import ToolError
    from archwheel.verdicts.crosscheck import source_of

    with pytest.raises(ToolError, match="did not record where its files are"):
        source_of(InputInventory("torch==2.14.1 (python)", "installed", ()))
    rooted = InputInventory("torch", "installed", (), metadata={"root": "/site"})
    assert source_of(rooted) == Path("/site")


@pytest.mark.nvcc
def test_audit_cross_check_prints_to_stderr_and_keeps_json_clean(
    scan: ModuleType, nvcc_corpus: NvccCorpus, cli_run: Any
) -> None:
    fixture = nvcc_corpus["multi_arch.so"]
    code, out, err = cli_run("audit", str(fixture.path), "--cross-check", "--format", "json")
    assert code == 0
    assert json.loads(out)["schema_version"]
    images = sum(e.count for e in fixture.expected)  # all visible to cuobjdump here
    assert f"agrees on {images} images in 1 files" in err


@pytest.mark.nvcc
def test_audit_cross_check_reports_invisible_images_of_an_embedded_fatbin(
    scan: ModuleType, nvcc_corpus: NvccCorpus, cli_run: Any
) -> None:
    code, _, err = cli_run("audit", str(nvcc_corpus["embedded_incbin.so"].path), "--cross-check")
    assert code == 0
    assert err.count("invisible to cuobjdump: it reads only .nv_fatbin") == 3
