"""The cross-check's comparator: archwheel's entries against cuobjdump's listing, blind spots
accounted for, on entries written out here (pure, no tools), and the report's lines.

crosscheck_input with real cuobjdump on the nvcc corpus: tests/integration/nvcc/test_crosscheck.py;
on the real torch and torchvision wheels: tests/integration/realwheel/test_crosscheck.py.
"""

from __future__ import annotations

import json

from archwheel.facts.arch import CodeKind, Target
from archwheel.verdicts.crosscheck import (
    CountRow,
    CrossCheckReport,
    InvisibleRow,
    LibraryFailure,
    compare_library,
    invisible_reason,
    split_library_path,
    visible_arch,
)
from tests.support.cuobjdump_support import NV, REL, entry

SASS, PTX = CodeKind.SASS, CodeKind.PTX


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
