"""Choosing the torch wheels of a release range for an extension (``verdicts.torch_releases``)."""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from archwheel.errors import UsageError
from archwheel.verdicts.torch_releases import (
    available_releases,
    choose_torch_files,
    extension_target,
    missing_releases,
    parse_torch_request,
    range_claim,
    serving_python,
)

PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "win_amd64", "macosx_11_0_arm64")


def _files(
    versions: list[str], pythons: tuple[str, ...] = ("cp311", "cp312")
) -> list[tuple[str, str, str | None, int | None]]:
    out: list[tuple[str, str, str | None, int | None]] = []
    for version in versions:
        for py in pythons:
            for platform in PLATFORMS:
                name = f"torch-{version}-{py}-{py}-{platform}.whl"
                out.append((name, f"https://files.example/{name}", None, 1000))
    return out


ALL = ["2.10.0", "2.11.0", "2.12.0rc1", "2.13.0", "2.13.0+cpu", "2.14.1", "2.15.0"]


def _chosen(text: str, interpreter: str = "cp311", machine: str = "x86_64") -> list[str]:
    request = parse_torch_request(text)
    return [c.filename for c in choose_torch_files(_files(ALL), request, interpreter, machine)]


def test_a_range_admits_public_releases_only_oldest_first() -> None:
    assert _chosen(">=2.11") == [
        "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl",
    ]


def test_an_explicit_list_takes_exactly_its_versions_local_labels_too() -> None:
    assert _chosen("2.13.0+cpu,2.15.0", machine="aarch64") == [
        "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_aarch64.whl",
        "torch-2.15.0-cp311-cp311-manylinux_2_28_aarch64.whl",
    ]


def test_a_range_naming_a_prerelease_admits_it() -> None:
    assert _chosen(">=2.12.0rc1,<2.13", interpreter="cp312") == [
        "torch-2.12.0rc1-cp312-cp312-manylinux_2_28_x86_64.whl"
    ]


def test_missing_exact_versions_are_named() -> None:
    request = parse_torch_request("2.14.1,2.14.9")
    chosen = choose_torch_files(_files(ALL), request, "cp311", "x86_64")
    assert [str(c.version) for c in chosen] == ["2.14.1"]
    assert missing_releases(request, chosen) == ("2.14.9",)


def test_the_newest_manylinux_wins_and_the_choice_is_stable() -> None:
    files = [
        (f"torch-2.14.1-cp311-cp311-{p}.whl", "u", None, None)
        for p in ("manylinux2014_x86_64", "manylinux_2_28_x86_64", "linux_x86_64")
    ]
    chosen = choose_torch_files(files, parse_torch_request("2.14.1"), "cp311", "x86_64")
    assert chosen[0].filename == "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"


@pytest.mark.parametrize("text", ["", "2.13,", "banana", ">=2.11,banana", "=>2.11"])
def test_a_bad_request_is_one_usage_error(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_torch_request(text)
    assert "\n" not in caught.value.one_line()


def test_the_extension_names_its_python_and_machine() -> None:
    assert extension_target(["cp311-cp311-linux_x86_64"], None) == ("cp311", "x86_64")
    assert extension_target(["cp39-abi3-manylinux_2_28_aarch64"], "3.12") == ("cp312", "aarch64")
    with pytest.raises(UsageError, match="depends on the Python"):
        extension_target(["cp39-abi3-manylinux_2_28_x86_64"], None)
    with pytest.raises(UsageError, match="one Linux machine"):
        extension_target(["cp311-cp311-win_amd64"], None)


def test_an_abi3_or_py3_wheel_serves_the_host_else_its_lowest_python() -> None:
    assert serving_python(["cp39-abi3-manylinux_2_28_x86_64"], "3.11") == (
        "3.11",
        "its tag cp39-abi3 serves this host's Python 3.11",
    )
    assert serving_python(["cp312-abi3-linux_x86_64"], "3.11") == (
        "3.12",
        "its tag cp312-abi3 does not serve this host's Python 3.11: the lowest it serves",
    )
    assert serving_python(["py3-none-manylinux_2_34_x86_64"], "3.13")[0] == "3.13"  # type: ignore[index]
    assert serving_python(["py3-none-any"], "3.11")[0] == "3.11"  # type: ignore[index]
    assert serving_python(["cp311-cp311-linux_x86_64"], "3.11") is None  # its own ABI
    assert serving_python(["py2-none-any"], "3.11") is None
    # a py3-none-any wheel is judged for this host's machine
    assert extension_target(["py3-none-any"], "3.11", host_machine="aarch64") == (
        "cp311",
        "aarch64",
    )


def test_exact_versions_are_versions() -> None:
    assert parse_torch_request("2.13.0, 2.14.1").exact == (Version("2.13.0"), Version("2.14.1"))


def test_available_releases_are_the_public_ones_with_a_wheel_for_the_extension() -> None:
    files = _files(ALL) + _files(["2.16.0"], pythons=("cp312",))
    assert available_releases(files, "cp311", "x86_64") == (
        "2.10.0", "2.11.0", "2.13.0", "2.14.1", "2.15.0",
    )  # fmt: skip
    assert "2.16.0" in available_releases(files, "cp312", "aarch64")


AVAILABLE = ["2.11.0", "2.12.0", "2.12.1", "2.13.0", "2.14.0", "2.14.1", "2.15.0"]


@pytest.mark.parametrize(
    ("passed", "failed", "requirement", "unchecked"),
    [
        # only the build's own torch loads it: the pin alone
        ([], ["2.13.0"], "torch==2.14.1", []),
        ([], [], "torch==2.14.1", []),
        # every release between the oldest and the newest that passed was checked
        (["2.14.0", "2.15.0"], [], "torch>=2.14.0,<2.16", []),
        # 2.14.0 lies inside and was never checked: shut out, said so
        (["2.12.1", "2.13.0"], [], "torch>=2.12.1,!=2.14.0,<2.15", ["2.14.0"]),
        # a release that failed inside the range is shut out; one outside needs nothing
        (["2.12.1", "2.14.0"], ["2.13.0", "2.15.0"], "torch>=2.12.1,!=2.13.0,<2.15", []),
    ],
)
def test_a_range_claim_admits_exactly_the_checked_releases_that_passed(
    passed: list[str], failed: list[str], requirement: str, unchecked: list[str]
) -> None:
    claim = range_claim("2.14.1", passed, failed, AVAILABLE)
    assert claim.requirement == requirement
    assert list(claim.unchecked) == unchecked
    assert "2.14.1" in claim.passed
    spec = SpecifierSet(claim.requirement.removeprefix("torch"))
    if claim.is_range:
        admitted = {v for v in AVAILABLE if Version(v) in spec}
        assert admitted == set(claim.passed)  # not one release more, not one less
    assert not set(claim.failed) & set(claim.passed)
