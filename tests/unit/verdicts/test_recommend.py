"""The smallest arch list for a fleet, its toolkit checks, coverage and size estimates."""

from __future__ import annotations

import pytest

from archwheel.binary.model import InputInventory
from archwheel.facts.arch import ArchList
from archwheel.facts.catalog import load_facts
from archwheel.facts.versions import CudaVersion
from archwheel.verdicts.compat.gpus import resolve_gpus
from archwheel.verdicts.recommend import coverage_of, estimate_size, recommend
from tests.support.inventory_builders import inventory, library

FACTS = load_facts()


def _rec(
    gpus: str, cuda: str | None = None, *, ptx: bool = False, variant: str = "plain"
) -> tuple[str | None, tuple[str, ...]]:
    rec = recommend(
        resolve_gpus([gpus], facts=FACTS),
        cuda=CudaVersion.parse(cuda) if cuda else None,
        ptx=ptx,
        variant=variant,
        facts=FACTS,
    )
    return (str(rec.arch_list) if rec.arch_list else None), rec.problems


@pytest.mark.parametrize(
    ("gpus", "cuda", "ptx", "expected"),
    [
        # one plain cubin per major, at the lowest GPU of that major: sm_80 serves A100 and L4
        ("A100,H100,L4,RTX 5090", None, False, "8.0;9.0;12.0"),
        ("A100,H100,L4,RTX 5090", "12.8", True, "8.0;9.0;12.0+PTX"),
        ("A100,A10", "12.8", False, "8.0"),  # not 8.0;8.6
        # Jetson Orin is integrated: sm_86 does not run on it (rule sass-integrated) ...
        ("A10,Jetson Orin,RTX 4090", None, False, "8.6;8.7"),
        ("A10,Jetson Orin,RTX 4090", "13.0", False, "8.6;8.7"),
        # ... except from CUDA 13.2, where sm_86 also runs on 8.7
        ("A10,Jetson Orin,RTX 4090", "13.2", False, "8.6"),
        ("Jetson Orin", "12.8", False, "8.7"),
        ("Jetson Xavier,V100", "12.8", False, "7.0;7.2"),
        ("T4,V100", "12.8", False, "7.0"),
        ("B200,B300", "13.0", False, "10.0"),
        ("B300", "12.9", False, "10.3"),
        # CUDA 12.8 cannot target 10.3; sm_100 runs on it. sm_101 (Thor, renamed 11.0 in 13.0)
        # is another chip and is never offered for a B300.
        ("B300", "12.8", False, "10.0"),
        ("GB10,RTX 5090", "12.8", False, "12.0"),
        ("GB10", "12.9", False, "12.1"),
        ("GB10", "12.8", False, "12.0"),
        ("Jetson Thor", "13.0", False, "11.0"),
    ],
)
def test_smallest_plain_list(gpus: str, cuda: str | None, ptx: bool, expected: str) -> None:
    assert _rec(gpus, cuda, ptx=ptx) == (expected, ())


def test_arch_specific_and_family_variants_only_when_asked() -> None:
    assert _rec("H100,B200", "12.8", variant="a") == ("9.0a;10.0a", ())
    # 'f' where a family variant exists; Hopper has none and gets a plain cubin
    assert _rec("H100,B200,B300,GB10", "12.9", variant="f") == ("9.0;10.0f;12.1f", ())
    # 'a' PTX would JIT only on its own GPU: --ptx adds plain PTX of the highest target
    assert _rec("H100,B200", "12.9", ptx=True, variant="a") == ("9.0a;compute_100;10.0a", ())


@pytest.mark.parametrize(
    ("gpus", "cuda", "expected", "problem"),
    [
        (
            "A100,RTX 5090",
            "12.6",
            "8.0",
            "RTX 5090 (12.0): sm_120 needs CUDA >= 12.8; this build uses CUDA 12.6",
        ),
        (
            "V100,B300",
            "13.0",
            "10.3",
            "V100 (7.0): 7.0 (Volta) was removed in CUDA 13.0; the last toolkit that targets "
            "it is CUDA 12.9",
        ),
        (
            "Jetson Thor",
            "12.9",
            None,
            "Jetson Thor (11.0): sm_110 needs CUDA >= 13.0; this build uses CUDA 12.9 "
            "(CUDA 12.9 calls this GPU 10.1: build sm_101 for it with CUDA 12.9)",
        ),
        (
            "V100,Jetson Thor",
            None,
            "7.0;11.0",
            "no single toolkit compiles this list: sm_70 needs CUDA 11.8 to 12.9; "
            "sm_110 needs CUDA 13.0 to 13.2",
        ),
    ],
)
def test_toolkit_problems_name_the_gpu_and_the_cuda_needed(
    gpus: str, cuda: str | None, expected: str | None, problem: str
) -> None:
    assert _rec(gpus, cuda) == (expected, (problem,))


def test_buildable_with_lists_the_toolkits() -> None:
    rec = recommend(resolve_gpus(["A100,RTX 5090"], facts=FACTS), facts=FACTS)
    assert [str(v) for v in rec.buildable_with] == ["12.8", "12.9", "13.0", "13.2"]


def test_coverage_of_a_given_list() -> None:
    gpus = resolve_gpus(["L4,RTX 5090,T4"], facts=FACTS)
    plain = coverage_of(ArchList.parse("8.0;9.0"), gpus)
    assert [(c.gpu.name, c.mode, c.image) for c in plain] == [
        ("L4", "native", "sm_80"),
        ("RTX 5090", "none", None),
        ("T4", "none", None),
    ]
    assert plain[1].reason.rule_id == "no-kernel-image"
    with_ptx = coverage_of(ArchList.parse("8.0;9.0+PTX"), gpus)
    assert [(c.mode, c.image, c.reason.rule_id) for c in with_ptx] == [
        ("native", "sm_80", "sass-same-major"),
        ("jit", "compute_90", "ptx-jit"),
        ("none", None, "no-kernel-image"),
    ]


# -- size estimates -----------------------------------------------------------------------------

_SIZES = {"sm_80": 100, "sm_90": 200, "sm_90a": 50, "sm_89": 30}


def _reference() -> tuple[int, InputInventory]:
    lib = library("a.so", [["sm_80", "sm_90", "sm_90a"], ["sm_80", "sm_90", "sm_89"]], sizes=_SIZES)
    return 10_000, inventory("ref.whl", lib)


def test_estimate_removes_unrequested_images_and_extrapolates_missing_ones() -> None:
    reference_bytes, inv = _reference()
    estimate = estimate_size(ArchList.parse("8.0;12.0"), inv, reference_bytes)
    # kept: sm_80 (2 x 100); removed: sm_90 (2 x 200), sm_90a (50, no 9.x plain target),
    # sm_89 (30, a plain target not asked for) = 480; added: sm_120 at the mean of the fully
    # built plain cubins sm_80 (200) and sm_90 (400) = 300.
    assert estimate.removed_bytes == 480
    assert estimate.added_bytes == 300
    assert estimate.estimated_bytes == 10_000 - 480 + 300
    (lib,) = estimate.libraries
    assert lib.reference_device_bytes == 680
    assert lib.estimated_device_bytes == 200 + 300
    assert lib.extrapolated == ("sm_120",)
    assert not estimate.lower_bound


def test_estimate_keeps_arch_specific_cubins_of_built_majors() -> None:
    reference_bytes, inv = _reference()
    estimate = estimate_size(ArchList.parse("9.0"), inv, reference_bytes)
    # kept: sm_90 (400) and sm_90a (50); removed: sm_80 (200) and sm_89 (30)
    assert estimate.removed_bytes == 230
    assert estimate.added_bytes == 0


def test_estimate_without_reference_ptx_is_a_lower_bound() -> None:
    reference_bytes, inv = _reference()
    estimate = estimate_size(ArchList.parse("8.0+PTX"), inv, reference_bytes)
    assert estimate.libraries[0].unestimated == ("compute_80",)
    assert estimate.lower_bound
    assert any("lower bound" in c for c in estimate.caveats)
