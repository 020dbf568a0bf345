"""Compatibility verdicts: the rules exhaustively, modules, drivers, wheels, and torch's wheel by
hand-built inventory (the real wheel: tests/integration/realwheel/test_compat.py).

The expected verdicts below are written out by hand from cuda-facts.md section 2, not computed
by the code under test:

- cubin sm_XY runs on X.Z with Z >= Y (same major only);
- sm_XYa runs only on exactly X.Y; sm_XYf on the same major with minor >= Y;
- integrated GPUs (5.3, 6.2, 7.2, 8.7, 10.1 = 11.0) are apart (torch 2.14.1's
  torch/cuda/__init__.py DEVICE_REQUIREMENT): their cubins run on that device only, and other
  cubins of the same major do not run on them; from CUDA 13.2 sm_70/sm_80/sm_86 also run on
  7.2/8.7 (DEVICE_REQUIREMENT_POST_JETSON_SBSA_UNIFICATION);
- PTX compute_XY JITs on every GPU >= X.Y (across majors); 'a' PTX only on X.Y; 'f' PTX within
  the family with minor >= Y.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from archwheel.binary.model import InputInventory, LibraryInventory, Problem
from archwheel.errors import UsageError
from archwheel.facts.arch import Target
from archwheel.facts.catalog import load_facts
from archwheel.facts.rules import ptx_jits_on, sass_runs_on
from archwheel.facts.versions import ComputeCapability, CudaVersion, DriverVersion
from archwheel.verdicts.compat.explain import best_sass_target, fixes_for, pytorch_install_advice
from archwheel.verdicts.compat.gpus import Gpu, resolve_gpus
from archwheel.verdicts.compat.judge import check_runtime, judge_input, judge_library, split_modules
from archwheel.verdicts.compat.report import build_report
from archwheel.verdicts.vocabulary import Verdict
from tests.support.builders import Entry, container, elf64
from tests.support.cli import CliRun
from tests.support.inventory_builders import build_wheel, inventory, library, torch_2_14_1_cu130
from tests.support.real_torch import check_torch_verdicts

FACTS = load_facts()

CATALOG = [
    "3.5", "3.7", "5.0", "5.2", "5.3", "6.0", "6.1", "6.2", "7.0", "7.2", "7.5", "8.0", "8.6",
    "8.7", "8.8", "8.9", "9.0", "10.0", "10.1", "10.3", "10.7", "11.0", "12.0", "12.1",
]  # fmt: skip

# image -> the catalog GPUs it serves (SASS: natively; PTX: by JIT). Every other GPU: nothing.
SERVES: dict[str, str] = {
    # plain cubins: same major, equal or higher minor
    "sm_35": "3.5 3.7",
    "sm_37": "3.7",
    "sm_50": "5.0 5.2",
    "sm_52": "5.2",
    "sm_53": "5.3",
    "sm_60": "6.0 6.1",
    "sm_61": "6.1",
    "sm_62": "6.2",
    "sm_70": "7.0 7.5",
    "sm_72": "7.2",
    "sm_75": "7.5",
    "sm_80": "8.0 8.6 8.8 8.9",
    "sm_86": "8.6 8.8 8.9",
    "sm_87": "8.7",
    "sm_88": "8.8 8.9",
    "sm_89": "8.9",
    "sm_90": "9.0",
    "sm_100": "10.0 10.3 10.7",
    "sm_101": "10.1 11.0",
    "sm_103": "10.3 10.7",
    "sm_107": "10.7",
    "sm_110": "10.1 11.0",
    "sm_120": "12.0 12.1",
    "sm_121": "12.1",
    # arch-specific cubins: exactly one compute capability
    "sm_90a": "9.0",
    "sm_100a": "10.0",
    "sm_101a": "10.1 11.0",
    "sm_103a": "10.3",
    "sm_110a": "10.1 11.0",
    "sm_120a": "12.0",
    "sm_121a": "12.1",
    # family-specific cubins: the same major, equal or higher minor
    "sm_100f": "10.0 10.3 10.7",
    "sm_101f": "10.1 11.0",
    "sm_103f": "10.3 10.7",
    "sm_110f": "10.1 11.0",
    "sm_120f": "12.0 12.1",
    "sm_121f": "12.1",
    # plain PTX: every GPU at or above it, across majors
    "compute_35": "3.5 3.7 5.0 5.2 5.3 6.0 6.1 6.2 7.0 7.2 7.5 8.0 8.6 8.7 8.8 8.9 9.0 "
    "10.0 10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_37": "3.7 5.0 5.2 5.3 6.0 6.1 6.2 7.0 7.2 7.5 8.0 8.6 8.7 8.8 8.9 9.0 "
    "10.0 10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_50": "5.0 5.2 5.3 6.0 6.1 6.2 7.0 7.2 7.5 8.0 8.6 8.7 8.8 8.9 9.0 "
    "10.0 10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_52": "5.2 5.3 6.0 6.1 6.2 7.0 7.2 7.5 8.0 8.6 8.7 8.8 8.9 9.0 "
    "10.0 10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_53": "5.3 6.0 6.1 6.2 7.0 7.2 7.5 8.0 8.6 8.7 8.8 8.9 9.0 "
    "10.0 10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_60": "6.0 6.1 6.2 7.0 7.2 7.5 8.0 8.6 8.7 8.8 8.9 9.0 "
    "10.0 10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_61": "6.1 6.2 7.0 7.2 7.5 8.0 8.6 8.7 8.8 8.9 9.0 10.0 10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_62": "6.2 7.0 7.2 7.5 8.0 8.6 8.7 8.8 8.9 9.0 10.0 10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_70": "7.0 7.2 7.5 8.0 8.6 8.7 8.8 8.9 9.0 10.0 10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_72": "7.2 7.5 8.0 8.6 8.7 8.8 8.9 9.0 10.0 10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_75": "7.5 8.0 8.6 8.7 8.8 8.9 9.0 10.0 10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_80": "8.0 8.6 8.7 8.8 8.9 9.0 10.0 10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_86": "8.6 8.7 8.8 8.9 9.0 10.0 10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_87": "8.7 8.8 8.9 9.0 10.0 10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_88": "8.8 8.9 9.0 10.0 10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_89": "8.9 9.0 10.0 10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_90": "9.0 10.0 10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_100": "10.0 10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_101": "10.1 10.3 10.7 11.0 12.0 12.1",
    "compute_103": "10.3 10.7 11.0 12.0 12.1",
    "compute_107": "10.7 11.0 12.0 12.1",
    "compute_110": "11.0 12.0 12.1",
    "compute_120": "12.0 12.1",
    "compute_121": "12.1",
    # arch-specific PTX: exactly one compute capability
    "compute_90a": "9.0",
    "compute_100a": "10.0",
    "compute_101a": "10.1",
    "compute_103a": "10.3",
    "compute_110a": "11.0",
    "compute_120a": "12.0",
    "compute_121a": "12.1",
    # family-specific PTX: within the family, equal or higher minor
    "compute_100f": "10.0 10.1 10.3 10.7",
    "compute_101f": "10.1 10.3 10.7",
    "compute_103f": "10.3 10.7",
    "compute_110f": "11.0",
    "compute_120f": "12.0 12.1",
    "compute_121f": "12.1",
}


def test_table_covers_every_compute_capability_and_variant_in_the_facts() -> None:
    facts = load_facts()
    assert [str(cc) for cc in sorted(facts.capabilities)] == CATALOG
    a_targets = {cc for tk in facts.toolkits for cc in tk.arch_specific}
    f_targets = {cc for tk in facts.toolkits for cc in tk.family_specific}
    expected = set()
    for cc in facts.capabilities:
        expected |= {f"sm_{cc.number}", f"compute_{cc.number}"}
        if cc in a_targets:
            expected |= {f"sm_{cc.number}a", f"compute_{cc.number}a"}
        if cc in f_targets:
            expected |= {f"sm_{cc.number}f", f"compute_{cc.number}f"}
    assert set(SERVES) == expected


@pytest.mark.parametrize("image", sorted(SERVES))
def test_rules_match_the_table(image: str) -> None:
    _, target = Target.from_name(image)
    rule = sass_runs_on if image.startswith("sm_") else ptx_jits_on
    served = [cc for cc in CATALOG if rule(target, ComputeCapability.parse(cc))]
    assert served == SERVES[image].split()


# Under a CUDA >= 13.2 runtime, only these entries change (DEVICE_REQUIREMENT_POST_JETSON_SBSA_
# UNIFICATION in torch 2.14.1: 70, 80 and 86 become plain intervals).
SERVES_FROM_13_2: dict[str, str] = {
    **SERVES,
    "sm_70": "7.0 7.2 7.5",
    "sm_80": "8.0 8.6 8.7 8.8 8.9",
    "sm_86": "8.6 8.7 8.8 8.9",
}

# torch 2.14.1 torch/cuda/__init__.py, DEVICE_REQUIREMENT and its post-13.2 form, written out
# (code SM -> the device SMs it runs on, from this project's catalog); the rule must agree.
TORCH_DEVICE_REQUIREMENT = {
    50: ({50, 52}, {50, 52}),
    52: ({52}, {52}),
    53: ({53}, {53}),
    60: ({60, 61}, {60, 61}),
    61: ({61}, {61}),
    62: ({62}, {62}),
    70: ({70, 75}, {70, 72, 75}),
    72: ({72}, {72}),
    75: ({75}, {75}),
    80: ({80, 86, 88, 89}, {80, 86, 87, 88, 89}),
    86: ({86, 88, 89}, {86, 87, 88, 89}),
    87: ({87}, {87}),
    89: ({89}, {89}),
    90: ({90}, {90}),
    100: ({100, 103, 107}, {100, 103, 107}),
    101: ({101, 110}, {101, 110}),
    103: ({103, 107}, {103, 107}),
    110: ({101, 110}, {101, 110}),
    120: ({120, 121}, {120, 121}),
    121: ({121}, {121}),
}


@pytest.mark.parametrize("image", sorted(i for i in SERVES if i.startswith("sm_")))
def test_rules_from_cuda_13_2_match_the_table(image: str) -> None:
    _, target = Target.from_name(image)
    for cuda, table in ((CudaVersion(13, 2), SERVES_FROM_13_2), (CudaVersion(13, 4), SERVES_FROM_13_2),
                        (CudaVersion(13, 1), SERVES), (CudaVersion(12, 8), SERVES), (None, SERVES)):  # fmt: skip
        served = [
            cc for cc in CATALOG if sass_runs_on(target, ComputeCapability.parse(cc), cuda=cuda)
        ]
        assert served == table[image].split(), (image, cuda)


@pytest.mark.parametrize("code", sorted(TORCH_DEVICE_REQUIREMENT))
def test_rules_agree_with_torch_device_requirement(code: int) -> None:
    before, after = TORCH_DEVICE_REQUIREMENT[code]
    target = Target(ComputeCapability.from_number(code))
    for cuda, expected in ((CudaVersion(13, 0), before), (CudaVersion(13, 2), after)):
        served = {
            c.number
            for c in load_facts().capabilities
            if sass_runs_on(target, c, cuda=cuda) and c.number not in (35, 37)
        }
        assert served == expected, (code, cuda)


@pytest.mark.parametrize("image", sorted(SERVES))
def test_single_image_library_verdict_on_every_gpu(image: str) -> None:
    lib = library("libk.so", [[image]])
    expected_when_served = Verdict.NATIVE if image.startswith("sm_") else Verdict.JIT
    got = {}
    for cc in CATALOG:
        verdict = judge_library(lib, Gpu(ComputeCapability.parse(cc)), facts=FACTS).verdict
        got[cc] = verdict
    expected = {
        cc: expected_when_served if cc in SERVES[image].split() else Verdict.NO_KERNEL_IMAGE
        for cc in CATALOG
    }
    assert got == expected


# -- modules ------------------------------------------------------------------------------------


def test_modules_are_recovered_from_offsets() -> None:
    lib = library("libk.so", [["sm_80", "sm_90"], ["sm_80"], ["sm_90", "compute_90"]])
    modules, exact = split_modules(lib)
    assert exact
    assert [[e.arch for e in m.entries] for m in modules] == [
        ["sm_80", "sm_90"],
        ["sm_80"],
        ["sm_90", "compute_90"],
    ]


def test_one_module_without_an_image_fails_the_library() -> None:
    # Library-wide the archs look fine for 8.6 (sm_80 exists), but the second module has only
    # sm_90: its kernels have no image on an 8.6 GPU.
    lib = library("libk.so", [["sm_80", "sm_90"], ["sm_90"]])
    v = judge_library(lib, Gpu(ComputeCapability(8, 6)), facts=FACTS)
    assert v.verdict is Verdict.NO_KERNEL_IMAGE
    assert v.missing_modules == 1
    assert v.native_archs() == (("sm_80", 1),)
    assert "1 of 2 modules" in v.summary()


def test_mixed_native_and_jit_modules_give_jit() -> None:
    lib = library("libk.so", [["sm_80"], ["compute_80"]])
    v = judge_library(lib, Gpu(ComputeCapability(8, 9)), facts=FACTS)
    assert v.verdict is Verdict.JIT
    assert v.native_archs() == (("sm_80", 1),)
    assert v.jit_archs() == (("compute_80", 1),)
    assert any(r.rule_id == "ptx-jit-cost" for r in v.reasons)


def test_inconsistent_container_count_falls_back_to_sections() -> None:
    lib = library("libk.so", [["sm_80"], ["sm_90"]])
    lying = LibraryInventory(lib.path, lib.file_kind, lib.size, lib.entries, lib.containers[:1])
    v = judge_library(lying, Gpu(ComputeCapability(9, 0)), facts=FACTS)
    assert not v.exact_modules
    assert v.verdict is Verdict.NATIVE  # one module per section: sm_90 serves it


def test_relocatable_images_serve_nothing() -> None:
    only_relocatable = library("libk.a", [["sm_90", "compute_90"]], section="__nv_relfatbin")
    v = judge_library(only_relocatable, Gpu(ComputeCapability(9, 0)), facts=FACTS)
    assert v.verdict is Verdict.LINK_ONLY
    mixed = library(
        "libk.so", [["sm_80"], ["compute_80"]], sections=[".nv_fatbin", "__nv_relfatbin"]
    )
    v = judge_library(mixed, Gpu(ComputeCapability(12, 0)), facts=FACTS)
    assert v.verdict is Verdict.NO_KERNEL_IMAGE  # the relocatable PTX does not rescue it
    assert v.link_only == ("compute_80",)
    said = [r.text for r in v.reasons if r.rule_id == "relocatable-link-only"]
    assert said == [
        "relocatable compute_80 (__nv_relfatbin) would serve 12.0 only if the runtime JIT-links "
        "relocatable code (unverified; not counted)"
    ]


def test_most_specific_cubin_is_named_first_and_rule_cited() -> None:
    lib = library("libk.so", [["sm_90", "sm_90a"]])
    v = judge_library(lib, Gpu(ComputeCapability(9, 0)), facts=FACTS)
    assert v.native_archs() == (("sm_90a", 1),)
    assert [r.rule_id for r in v.reasons] == ["sass-arch-specific"]


def test_why_not_explains_cross_major_folklore() -> None:
    lib = library("libk.so", [["sm_90"]])
    v = judge_library(lib, Gpu(ComputeCapability(12, 0)), facts=FACTS)
    texts = {r.rule_id: r.text for r in v.reasons}
    assert "never crosses major versions" in texts["sass-same-major"]
    assert texts["no-kernel-image"] == "1 of 1 modules have no kernel image for 12.0"


# -- drivers ------------------------------------------------------------------------------------


def test_ptx_newer_than_the_driver_is_driver_too_old() -> None:
    lib = library("libk.so", [["compute_120"]], isa="9.0")  # PTX ISA 9.0 needs CUDA 13.0
    gpu = Gpu(ComputeCapability(12, 0))
    old = judge_library(lib, gpu, driver=DriverVersion.parse("575.51.03"), facts=FACTS)
    assert old.verdict is Verdict.DRIVER_TOO_OLD
    assert old.driver_blocked_modules == 1
    new = judge_library(lib, gpu, driver=DriverVersion.parse("580.65.06"), facts=FACTS)
    assert new.verdict is Verdict.JIT
    unknown = judge_library(lib, gpu, facts=FACTS)
    assert unknown.verdict is Verdict.JIT
    isa = next(r.text for r in unknown.reasons if r.rule_id == "ptx-isa-driver")
    assert isa == (
        "PTX ISA 9.0 needs a driver for CUDA >= 13.0 (>= 580.65.06); no --driver given, not checked"
    )


@pytest.mark.parametrize(
    ("runtime", "driver", "status"),
    [
        ("13.0", "580.65.06", "full"),
        ("13.0", "575.51.03", "unsupported"),
        ("12.8", "570.86.10", "full"),
        ("12.8", "550.54.14", "minor-compat"),  # 12.x runs on >= 525 with limited features
        ("12.8", "520.61.05", "unsupported"),
        ("11.8", "470.57.02", "minor-compat"),  # 11.x runs on >= 450
    ],
)
def test_runtime_against_driver(runtime: str, driver: str, status: str) -> None:
    check = check_runtime(
        CudaVersion.parse(runtime), "test", DriverVersion.parse(driver), facts=FACTS
    )
    assert check.status == status
    assert check.reason.rule_id == "runtime-driver"
    assert check.blocks == (status == "unsupported")


def test_runtime_unknown_and_driver_missing_are_said() -> None:
    assert (
        check_runtime(None, None, DriverVersion.parse("580.65.06"), facts=FACTS).status
        == "unknown-runtime"
    )
    assert check_runtime(CudaVersion(13, 0), "x", None, facts=FACTS).status == "no-driver"


# -- fixes --------------------------------------------------------------------------------------


def test_fix_for_volta_on_cuda_13_points_at_an_older_toolkit() -> None:
    fixes = fixes_for(ComputeCapability(7, 0), CudaVersion(13, 0), pytorch=True, facts=FACTS)
    assert fixes[0].startswith("7.0 (Volta) was removed in CUDA 13.0")
    assert "CUDA 12.9 or older" in fixes[0]
    assert fixes[-1] == (
        "or install an official torch build for cu118, cu126, cu128, cu129 "
        "(official builds with native code for 7.0)"
    )


@pytest.mark.parametrize(
    ("cc", "advice"),
    [
        ("12.0", "a cu128-or-later build of torch >= 2.7"),
        ("12.1", "a cu128-or-later build of torch >= 2.7"),
        ("10.3", "a cu128-or-later build of torch >= 2.7"),
        ("8.9", "a cu118-or-later build of torch >= 2.0"),
        ("7.0", "an official torch build for cu118, cu126, cu128, cu129"),
        ("11.0", None),
    ],
)
def test_pytorch_install_advice(cc: str, advice: str | None) -> None:
    assert pytorch_install_advice(ComputeCapability.parse(cc), facts=FACTS) == advice


def test_fix_uses_a_lower_minor_when_the_toolkit_cannot_target_the_gpu() -> None:
    fixes = fixes_for(ComputeCapability(10, 3), CudaVersion(12, 8), facts=FACTS)
    assert fixes[0].startswith("rebuild with SASS sm_100, which also runs on 10.3")


def test_best_sass_target() -> None:
    facts = load_facts()
    assert best_sass_target(ComputeCapability(8, 9), facts.toolkit("13.0"), facts=FACTS) == Target(
        ComputeCapability(8, 9)
    )
    assert best_sass_target(ComputeCapability(7, 0), facts.toolkit("13.0"), facts=FACTS) is None
    assert best_sass_target(ComputeCapability(12, 1), facts.toolkit("12.8"), facts=FACTS) == Target(
        ComputeCapability(12, 0)
    )


# -- GPUs ---------------------------------------------------------------------------------------


def test_resolve_gpus_accepts_names_ccs_and_comma_lists() -> None:
    gpus = resolve_gpus(["A100,RTX 5090", "NVIDIA H100 80GB HBM3"], ["12.1, 8.6"], facts=FACTS)
    assert [(g.name, str(g.cc)) for g in gpus] == [
        ("A100", "8.0"),
        ("RTX 5090", "12.0"),
        ("H100", "9.0"),
        ("", "12.1"),
        ("", "8.6"),
    ]


@pytest.mark.parametrize(
    ("names", "ccs"), [(["Voodoo 5"], []), ([], ["9.9"]), ([], ["8,"]), ([], [])]
)
def test_resolve_gpus_rejects_nonsense(names: list[str], ccs: list[str]) -> None:
    with pytest.raises(UsageError):
        resolve_gpus(names, ccs, facts=FACTS)


# -- wheels -------------------------------------------------------------------------------------


def test_torch_inventory_verdicts_by_hand_built_inventory() -> None:
    check_torch_verdicts(torch_2_14_1_cu130())


def test_torch_on_t4_names_the_broken_library() -> None:
    judged = judge_input(
        torch_2_14_1_cu130(), [Gpu(ComputeCapability(7, 5), "T4")], name="torch", facts=FACTS
    )
    t4 = judged.per_gpu[0]
    assert t4.libraries_with(Verdict.NO_KERNEL_IMAGE) == ["torch/lib/libtorch_cuda_linalg.so"]
    assert t4.headline() == (
        "no kernel image in libtorch_cuda_linalg.so; "
        "native in libtorch_cuda.so, libtorch_nvshmem.so"
    )
    linalg = t4.libraries[1]
    assert linalg.fixes[0].startswith("rebuild with SASS for 7.5: TORCH_CUDA_ARCH_LIST='7.5'")


def test_torch_fix_does_not_recommend_the_build_that_lacks_the_arch() -> None:
    judged = judge_input(
        torch_2_14_1_cu130(),
        [Gpu(ComputeCapability(7, 5), "T4")],
        runtime=CudaVersion(13, 0),
        name="torch",
        facts=FACTS,
    )
    linalg = judged.per_gpu[0].libraries[1]
    assert linalg.fixes[-2:] == (
        "or install an official torch build for cu118, cu126, cu128, cu129, cu132 "
        "(official builds with native code for 7.5)",
        "note: the official cu130 arch list includes 7.5, yet this library lacks it: check any "
        "wheel with `archwheel can-run WHEEL --cc 7.5` before installing it",
    )


def test_cpu_only_input_says_so() -> None:
    inv = inventory("cpu.whl", LibraryInventory("x.so", "shared-object", 10))
    judged = judge_input(inv, [Gpu(ComputeCapability(9, 0))], facts=FACTS)
    assert judged.per_gpu[0].verdict is Verdict.NO_DEVICE_CODE
    assert build_report([judged], [Gpu(ComputeCapability(9, 0))], None, facts=FACTS).exit_code == 0


def test_exit_codes_follow_the_documented_precedence() -> None:
    gpu = Gpu(ComputeCapability(12, 0))
    jit = judge_input(inventory("a", library("a.so", [["compute_90"]])), [gpu], facts=FACTS)
    native = judge_input(inventory("b", library("b.so", [["sm_120"]])), [gpu], facts=FACTS)
    missing = judge_input(inventory("c", library("c.so", [["sm_90"]])), [gpu], facts=FACTS)
    old_driver = judge_input(
        inventory("d", library("d.so", [["sm_120"]])),
        [gpu],
        driver=DriverVersion.parse("570.86.10"),
        runtime=CudaVersion(13, 0),
        facts=FACTS,
    )
    assert build_report([native], [gpu], None, facts=FACTS).exit_code == 0
    assert build_report([native, jit], [gpu], None, facts=FACTS).exit_code == 10
    assert build_report([jit, old_driver], [gpu], None, facts=FACTS).exit_code == 12
    assert build_report([old_driver, missing, jit], [gpu], None, facts=FACTS).exit_code == 11
    incomplete = judge_input(
        InputInventory(
            "e",
            "wheel",
            (library("e.so", [["compute_90"]]),),
            problems=(Problem("e", "truncated"),),
        ),
        [gpu],
        facts=FACTS,
    )
    assert build_report([incomplete], [gpu], None, facts=FACTS).exit_code == 3


def test_report_json_names_rules_it_cites() -> None:
    gpu = Gpu(ComputeCapability(7, 5), "T4")
    report = build_report(
        [judge_input(torch_2_14_1_cu130(), [gpu], facts=FACTS)], [gpu], None, facts=FACTS
    )
    doc = report.to_json_dict()
    assert doc["schema_version"] == 1
    assert doc["exit_code"] == 11
    cited = {
        r["rule"]
        for item in doc["inputs"]
        for g in item["gpus"]
        for lib in g["libraries"]
        for r in lib["reasons"]
    }
    assert cited <= set(doc["rules"])
    assert doc["rules"]["no-kernel-image"].startswith("Without a compatible cubin")


# -- the command on a toy wheel -----------------------------------------------------------------

TOY_LIB = elf64([(".nv_fatbin", container(Entry(sm=80), Entry(kind=1, sm=90, version=(9, 0))))])


def can_run_schema() -> dict[str, Any]:
    text = (
        resources.files("archwheel.interfaces").joinpath("schema/can-run.schema.json").read_text()
    )
    doc: dict[str, Any] = json.loads(text)
    return doc


@pytest.fixture
def toy_wheel(tmp_path: Path) -> Path:
    """sm_80 SASS + compute_90 PTX (ISA 9.0, which needs a CUDA 13.0 driver), built for 12.8."""
    return build_wheel(
        tmp_path, "myext", "1.0+cu128", {"myext/__init__.py": b"", "myext/libk.so": TOY_LIB}
    )


@pytest.mark.parametrize(
    ("gpu", "driver", "code", "verdict"),
    [
        ("A100", "580.65.06", 0, "native"),
        ("H100", "580.65.06", 10, "jit"),
        ("H100", "575.51.03", 12, "driver-too-old"),  # runtime 12.8 fine, PTX ISA 9.0 is not
        ("T4", "580.65.06", 11, "no-kernel-image"),
        ("A100", "520.61.05", 12, "driver-too-old"),  # too old for the CUDA 12.8 runtime
    ],
)
def test_can_run_exit_codes(
    toy_wheel: Path, cli_run: CliRun, gpu: str, driver: str, code: int, verdict: str
) -> None:
    got, out, _ = cli_run(
        "can-run", str(toy_wheel), "--gpu", gpu, "--driver", driver, "--format", "json"
    )
    doc = json.loads(out)
    jsonschema.validate(doc, can_run_schema())
    assert (got, doc["verdict"]) == (code, verdict)
    assert doc["exit_code"] == code
    runtime = doc["inputs"][0]["gpus"][0]["runtime"]
    assert runtime["cuda_runtime"] == "12.8"
    assert runtime["cuda_runtime_source"] == "CUDA 12.8 from local version (Version: 1.0+cu128)"


def test_can_run_fleet_matrix_and_markdown(toy_wheel: Path, cli_run: CliRun) -> None:
    code, out, _ = cli_run("can-run", str(toy_wheel), "--gpu", "A100,H100", "--cc", "7.5")
    assert code == 11
    lines = [" ".join(line.split()) for line in out.splitlines()]
    matrix = next(line for line in lines if "myext/libk.so" in line)
    assert "native sm_80" in matrix
    assert "JIT compute_90" in matrix
    assert "NO KERNEL IMAGE" in matrix
    assert any(line.startswith("rule ptx-jit: PTX compute_XY is JIT-compiled") for line in lines)
    code, out, _ = cli_run("can-run", str(toy_wheel), "--cc", "9.0", "--format", "markdown")
    assert code == 10
    assert "| `myext/libk.so` | JIT: compute_90, compiled at first launch |" in out


def test_can_run_bad_input_is_one_line(tmp_path: Path, cli_run: CliRun) -> None:
    code, _, err = cli_run("can-run", str(tmp_path / "missing.whl"), "--gpu", "A100")
    assert code == 3
    assert err.startswith("archwheel: error: ")
    broken = tmp_path / "broken-1.0-py3-none-any.whl"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    code, _, err = cli_run("can-run", str(broken), "--gpu", "A100")
    assert code == 3
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("runtime", "verdict"),
    [(None, Verdict.NO_KERNEL_IMAGE), (CudaVersion(13, 0), Verdict.NO_KERNEL_IMAGE),
     (CudaVersion(13, 2), Verdict.NATIVE)],
)  # fmt: skip
def test_torch_on_jetson_orin_follows_the_integrated_rule(
    runtime: CudaVersion | None, verdict: Verdict
) -> None:
    # The cu130 wheel's sm_80/sm_86 cubins serve Orin (8.7, integrated) only from CUDA 13.2.
    [orin] = resolve_gpus(["Jetson AGX Orin"], facts=FACTS)
    judged = judge_input(torch_2_14_1_cu130(), [orin], runtime=runtime, name="torch", facts=FACTS)
    assert judged.per_gpu[0].verdict is verdict
    if verdict is Verdict.NO_KERNEL_IMAGE:
        lib = judged.per_gpu[0].libraries[0]
        said = [r.text for r in lib.reasons if r.rule_id == "sass-integrated"]
        assert said and "integrated (Jetson) GPU runs only cubins built for it (sm_87)" in said[0]
        assert any("TORCH_CUDA_ARCH_LIST='8.7'" in f for f in lib.fixes)
