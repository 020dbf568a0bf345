"""ArchList: every spelling users write, every rendering, every error (expected values by hand)."""

from __future__ import annotations

import pytest

from archwheel.errors import ArchListError, UsageError
from archwheel.facts.arch import ArchList, ArchSpec, CodeKind, Target, Variant
from archwheel.facts.catalog import load_facts
from archwheel.facts.versions import ComputeCapability


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("8.0;9.0", "8.0;9.0"),
        ("9.0 8.0", "8.0;9.0"),
        ("8.0, 9.0", "8.0;9.0"),
        ("8.0;  9.0 ;10.0", "8.0;9.0;10.0"),
        ("12.0+PTX", "12.0+PTX"),
        ("12.0+ptx", "12.0+PTX"),
        ("9.0a", "9.0a"),
        ("10.0f", "10.0f"),
        ("sm_90", "9.0"),
        ("sm_100a", "10.0a"),
        ("sm_103f", "10.3f"),
        ("compute_90", "compute_90"),
        ("compute_90;sm_90", "9.0+PTX"),
        ("90", "9.0"),
        ("120", "12.0"),
        ("90-real;90-virtual", "9.0+PTX"),
        ("100a-real", "10.0a"),
        ("8.0;8.0+PTX", "8.0+PTX"),
        ("Ampere", "8.0;8.6+PTX"),
        ("Hopper", "9.0+PTX"),
        ("Ada;Turing", "7.5+PTX;8.9+PTX"),
        ("Blackwell", "10.0;10.3;12.0;12.1+PTX"),
        ("Volta+Tegra", "7.2"),
        ("hopper", "9.0+PTX"),
    ],
)
def test_parse_canonical(text: str, canonical: str) -> None:
    assert str(ArchList.parse(text)) == canonical


def test_renderings() -> None:
    archs = ArchList.parse("8.0;9.0a;12.0+PTX")
    assert archs.to_torch() == "8.0;9.0a;12.0+PTX"
    assert archs.to_cmake() == "80-real;90a-real;120"
    assert archs.to_gencode() == [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90a,code=sm_90a",
        "-gencode=arch=compute_120,code=sm_120",
        "-gencode=arch=compute_120,code=compute_120",
    ]
    assert ArchList.parse("compute_90").to_cmake() == "90-virtual"


def test_targets_sets() -> None:
    archs = ArchList.parse("8.0;9.0+PTX;compute_120")
    cc = ComputeCapability
    assert archs.sass_targets == {Target(cc(8, 0)), Target(cc(9, 0))}
    assert archs.ptx_targets == {Target(cc(9, 0)), Target(cc(12, 0))}
    assert archs.specs[-1] == ArchSpec(Target(cc(12, 0)), sass=False, ptx=True)


def test_target_names() -> None:
    t = Target(ComputeCapability(10, 3), Variant.FAMILY_SPECIFIC)
    assert t.sm == "sm_103f"
    assert t.compute == "compute_103f"
    assert t.name(CodeKind.LTOIR) == "lto_103f"
    assert Target.from_name("sm_90a") == (
        CodeKind.SASS,
        Target(ComputeCapability(9, 0), Variant.ARCH_SPECIFIC),
    )
    assert Target.from_name("compute_120")[0] is CodeKind.PTX


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("9.9", "unknown compute capability 9.9"),
        ("sm_12", "did you mean sm_120"),
        ("8.0++PTX", "'8.0++PTX'"),
        ("8.0;;9.0", "empty item at position 2"),
        ("8.0;", "empty item at position 2"),
        ("", "empty arch list"),
        ("8.0a", "8.0 has no arch-specific 'a' variant"),
        ("9.0f", "9.0 has no family 'f' variant"),
        ("native", "'native'"),
        ("sm90", "'sm90'"),
        ("8.10", "minor version 10"),
        ("compute_12x", "'compute_12x'"),
    ],
)
def test_parse_errors_name_the_token(text: str, fragment: str) -> None:
    with pytest.raises(ArchListError) as info:
        ArchList.parse(text)
    message = info.value.one_line()
    assert fragment in message
    assert "\n" not in message
    if text:
        assert "valid forms" in message or "separator" in message


def test_torch_cannot_express_family_or_ptx_only() -> None:
    with pytest.raises(ArchListError, match="family-specific"):
        ArchList.parse("10.0f").to_torch()
    with pytest.raises(ArchListError, match="PTX without SASS"):
        ArchList.parse("compute_90").to_torch()


@pytest.mark.parametrize(
    ("archs", "cuda", "fragment"),
    [
        ("12.0", "12.6", "sm_120 needs CUDA >= 12.8"),
        ("10.0", "12.4", "sm_100 needs CUDA >= 12.8"),
        ("10.3", "12.8", "sm_103 needs CUDA >= 12.9"),
        ("10.0f", "12.8", "sm_100f needs CUDA >= 12.9"),
        ("7.0", "13.0", "7.0 (Volta) was removed in CUDA 13.0"),
        ("6.1", "13.0", "6.1 (Pascal) was removed in CUDA 13.0"),
        ("5.2", "13.0", "5.2 (Maxwell) was removed in CUDA 13.0"),
        ("10.1", "13.0", "renamed sm_110"),
        ("3.5", "12.0", "removed after CUDA 11.8"),
        ("8.8", "12.9", "sm_88 needs CUDA >= 13.0"),
    ],
)
def test_toolkit_refusals(archs: str, cuda: str, fragment: str) -> None:
    facts = load_facts()
    with pytest.raises(ArchListError) as info:
        ArchList.parse(archs).check_toolkit(facts.toolkit(cuda))
    assert fragment in info.value.one_line()


@pytest.mark.parametrize(
    ("archs", "cuda"),
    [
        ("8.0;9.0+PTX", "12.8"),
        ("7.0;7.5;8.0;8.6;9.0;10.0;12.0", "12.8"),
        ("7.5;8.0;8.6;9.0;10.0;12.0+PTX", "13.0"),
        ("9.0a;10.0a;10.3f;12.0f", "13.0"),
        ("3.5;9.0", "11.8"),
        ("11.0", "13.0"),
    ],
)
def test_toolkit_accepts(archs: str, cuda: str) -> None:
    facts = load_facts()
    assert ArchList.parse(archs).problems_with(facts.toolkit(cuda)) == []


def test_official_arch_lists_build_with_their_toolkits() -> None:
    facts = load_facts()
    for tag, arch_list in facts.official_arch_lists.items():
        toolkit = facts.toolkit(tag)
        assert ArchList.parse(arch_list).problems_with(toolkit) == [], tag


# Python's \d and int() take any Unicode decimal digit: "８.０" (fullwidth) and "٨.٠"
# (Arabic-Indic) were read as 8.0, which no compiler or build system reading the same text does.
NON_ASCII_DIGITS = ["８.０", "٨.٠", "sm_８0", "８0-real", "compute_٩0"]


@pytest.mark.parametrize("text", NON_ASCII_DIGITS)
def test_arch_lists_take_ascii_digits_only(text: str) -> None:
    with pytest.raises(ArchListError):
        ArchList.parse(text)


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        ("cuda", "１２.８"),
        ("cuda", "cu１２８"),
        ("driver", "５７０.８６.１０"),
        ("python", "3.１２"),
        ("cc", "８.０"),
    ],
)
def test_versions_take_ascii_digits_only(parse: str, text: str) -> None:
    from archwheel.facts.python_target import PythonTarget
    from archwheel.facts.versions import CudaVersion, DriverVersion

    parser = {
        "cuda": CudaVersion.parse,
        "driver": DriverVersion.parse,
        "python": PythonTarget.parse,
        "cc": ComputeCapability.parse,
    }[parse]
    with pytest.raises((ValueError, UsageError)):
        parser(text)
