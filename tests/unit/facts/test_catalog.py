"""The CUDA facts file: loads, validates, answers lookups."""

from __future__ import annotations

import copy
import sys
from typing import Any

import pytest

from archwheel.errors import FactsError, UsageError
from archwheel.facts.catalog import load_facts, parse_facts
from archwheel.facts.versions import ComputeCapability, CudaVersion, DriverVersion, PtxIsaVersion

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def raw_facts() -> dict[str, Any]:
    from importlib import resources

    text = resources.files("archwheel.facts").joinpath("cuda_facts.toml").read_text("utf-8")
    return dict(tomllib.loads(text))


def test_loads_and_is_cached() -> None:
    facts = load_facts()
    assert facts is load_facts()
    assert facts.toolkit("13.0").ptx_isa == PtxIsaVersion(9, 0)
    assert facts.toolkit("cu128").min_driver == DriverVersion.parse("570.26")


def test_every_rule_cited_exists() -> None:
    facts = load_facts()
    for rule in ("sass-same-major", "sass-arch-specific", "sass-family-specific", "ptx-jit",
                 "ptx-isa-driver", "toolkit-targets", "runtime-driver", "no-kernel-image"):  # fmt: skip
        assert facts.rule(rule)
    with pytest.raises(FactsError):
        facts.rule("no-such-rule")


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda d: d.update(schema_version=99), "schema_version"),
        (lambda d: d["toolkit"][0].pop("targets"), "missing key 'targets'"),
        (lambda d: d["toolkit"][0].update(targets=["9.9"]), "not in compute_capability"),
        (lambda d: d["gpu"][0].update(cc="1.0"), "not in compute_capability"),
        (lambda d: d["toolkit"][0].update(min_driver="abc"), "invalid driver version"),
        (lambda d: d["toolkit"][-1].update(arch_specific=["7.0"]), "'a'/'f' targets"),
    ],
)
def test_malformed_facts_name_the_key(mutate: Any, fragment: str) -> None:
    data = copy.deepcopy(raw_facts())
    mutate(data)
    with pytest.raises(FactsError) as info:
        parse_facts(data)
    assert fragment in info.value.one_line()


@pytest.mark.parametrize(
    ("query", "cc"),
    [
        ("RTX 5090", "12.0"),
        ("rtx5090", "12.0"),
        ("NVIDIA GeForce RTX 5090", "12.0"),
        ("NVIDIA A100-SXM4-80GB", "8.0"),
        ("NVIDIA H200", "9.0"),
        ("Tesla T4", "7.5"),
        ("B200", "10.0"),
        ("GB10", "12.1"),
        ("NVIDIA L40S", "8.9"),
        ("A10G", "8.6"),
        ("Jetson AGX Thor", "11.0"),
    ],
)
def test_find_gpu(query: str, cc: str) -> None:
    assert load_facts().find_gpu(query).cc == ComputeCapability.parse(cc)


def test_unknown_gpu_suggests() -> None:
    with pytest.raises(UsageError) as info:
        load_facts().find_gpu("RTX 9999")
    assert "unknown GPU 'RTX 9999'" in info.value.one_line()


def test_driver_to_cuda() -> None:
    facts = load_facts()
    assert facts.driver_cuda_version(DriverVersion.parse("570.86.10")) == CudaVersion(12, 8)
    assert facts.driver_cuda_version(DriverVersion.parse("580.65.06")) == CudaVersion(13, 0)
    assert facts.driver_cuda_version(DriverVersion.parse("535.104.05")) == CudaVersion(12, 2)
    assert facts.driver_cuda_version(DriverVersion.parse("390.1")) is None


def test_newer_minor_falls_back_to_newest_known() -> None:
    assert load_facts().toolkit("13.1").version == CudaVersion(13, 0)
    with pytest.raises(UsageError):
        load_facts().toolkit("14.0")


@pytest.mark.parametrize("text", ["12", "cuda", "12.8.x", "cu1"])
def test_bad_cuda_versions(text: str) -> None:
    with pytest.raises(UsageError):
        CudaVersion.parse(text)


def test_version_spellings() -> None:
    assert CudaVersion.parse("cu130") == CudaVersion(13, 0)
    assert CudaVersion.parse("12.8.1") == CudaVersion(12, 8)
    assert CudaVersion.parse("cu118") == CudaVersion(11, 8)
    assert str(CudaVersion(12, 8).tag) == "cu128"
    assert DriverVersion.parse("570.86.10") > DriverVersion.parse("570.26")
