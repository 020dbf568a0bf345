"""The CUDA facts file: loads, validates, answers lookups."""

from __future__ import annotations

import copy
import re
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
        (lambda d: d["toolkit"][2].update(targts=[]), "unknown key toolkit[2].targts"),
        (
            lambda d: d["toolkit"][3].update(verified="no"),
            "toolkit[3].verified must be true or false, not 'no'",
        ),
        (lambda d: d["pytorch"].pop("arch_names"), "pytorch.arch_names: missing or not a list"),
        (lambda d: d["pytorch"]["releases"].update(x=2), "pytorch.releases.x must be a string"),
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


# -- integrated GPUs, the official lists, releases (cuda_facts.toml) --------------------------


def test_integrated_gpus_are_the_tegra_capabilities() -> None:
    facts = load_facts()
    assert sorted(str(cc) for cc in facts.integrated) == [
        "10.1",
        "11.0",
        "5.3",
        "6.2",
        "7.2",
        "8.7",
    ]
    assert facts.same_device(ComputeCapability(10, 1), ComputeCapability(11, 0))
    assert facts.same_device(ComputeCapability(11, 0), ComputeCapability(10, 1))
    assert not facts.same_device(ComputeCapability(10, 0), ComputeCapability(10, 1))
    since = {str(cc): info.desktop_cubins_from for cc, info in facts.integrated.items()}
    assert since == {
        "5.3": None, "6.2": None, "7.2": CudaVersion(13, 2), "8.7": CudaVersion(13, 2),
        "10.1": None, "11.0": None,
    }  # fmt: skip
    # Every Jetson in the GPU catalog is integrated, and nothing else is.
    jetsons = {g.cc for g in facts.gpus if g.name.startswith("Jetson")}
    assert jetsons == {cc for cc in facts.integrated if facts.gpus_for(cc)}


def test_integrated_entries_are_validated() -> None:
    data = raw_facts()
    data["integrated"] = [{"cc": "10.1", "same_as": "11.0"}]
    with pytest.raises(FactsError, match=r"10\.1 is the same device as 11\.0, not listed"):
        parse_facts(data)
    data["integrated"] = [{"cc": "9.9"}]
    with pytest.raises(FactsError, match="integrated"):
        parse_facts(data)


def test_official_lists_are_up_to_date_with_their_sources() -> None:
    facts = load_facts()
    lists = facts.official_arch_lists
    assert lists["cu129"].endswith(";12.0+PTX")
    # what the 2.14.1 cu130 and 2.15.0 cu132 wheels carry; the pipeline adds +PTX to both
    assert lists["cu130"] == lists["cu132"] == "7.5;8.0;8.6;9.0;10.0;12.0"
    assert facts.pipeline_arch_lists["cu130"] == "7.5;8.0;8.6;9.0;10.0;12.0+PTX"
    assert facts.pipeline_arch_list("cu132") == "7.5;8.0;8.6;9.0;10.0;12.0+PTX"
    assert facts.pipeline_arch_list("cu128") == lists["cu128"]
    assert set(facts.official_arch_list_sources) == set(lists)
    for tag, source in facts.official_arch_list_sources.items():
        if tag != "cu118":
            assert re.search(r"[0-9a-f]{40}|audited by archwheel", source), tag
    data = raw_facts()
    del data["pytorch"]["official_arch_list_sources"]["cu132"]
    with pytest.raises(FactsError, match="no source for"):
        parse_facts(data)


def test_cuda_13_2_and_torch_2_15_0_exist() -> None:
    facts = load_facts()
    assert facts.toolkit("13.2").version == CudaVersion(13, 2)
    assert facts.toolkit("13.1").version == CudaVersion(13, 0)  # unrecorded: the one below
    assert facts.toolkit("13.5").version == CudaVersion(13, 2)
    assert "2.15.0" in facts.torch_releases
    assert facts.ptx_isa_min_cuda(PtxIsaVersion(9, 2)) == CudaVersion(13, 2)
