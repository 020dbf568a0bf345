"""Variant properties derived from the audit of real wheels (synthetic fatbins, real zips)."""

from __future__ import annotations

from pathlib import Path

import pytest

from archwheel.binary.scan.inputs import scan_path
from archwheel.facts.arch import ArchList
from archwheel.facts.catalog import load_facts
from archwheel.facts.versions import CudaVersion
from archwheel.verdicts.audit import audit
from archwheel.verdicts.variants import (
    Derivation,
    NoVariant,
    VariantProperties,
    derive,
    duplicates,
    read_claims,
    unbacked,
    variants_document,
)
from tests.support.builders import Entry, container, elf64
from tests.support.index_wheels import device_library, make_dist

CU130 = CudaVersion(13, 0)


def _report(tmp_path: Path, libraries: dict[str, bytes], expect: str | None = None):  # type: ignore[no-untyped-def]
    wheel = make_dist(tmp_path / "w", "vext", "1.0", libraries=libraries)
    return audit(scan_path(wheel), ArchList.parse(expect) if expect else None)


def _derive(tmp_path: Path, libraries: dict[str, bytes], toolkit: CudaVersion | None = CU130,
            expect: str | None = None) -> Derivation | NoVariant:  # fmt: skip
    return derive(_report(tmp_path, libraries, expect), toolkit)


def test_one_arch_gives_its_real_value_and_label(tmp_path: Path) -> None:
    got = _derive(tmp_path, {"_k.so": device_library(80)})
    assert isinstance(got, Derivation)
    assert got.properties.sm_arch == ("80_real",)
    assert got.label == "sm80"
    assert str(got.properties.cuda_lower_bound) == "13.0"
    assert [r.rule for r in got.reasons] == ["runtime-driver"]


def test_only_archs_in_every_library_are_claimed(tmp_path: Path) -> None:
    got = _derive(tmp_path, {"_a.so": device_library(90, 120), "_b.so": device_library(90)})
    assert isinstance(got, Derivation)
    assert got.properties.sm_arch == ("90_real",)  # _b.so has no sm_120
    both = _derive(tmp_path / "2", {"_a.so": device_library(90, 120),
                                    "_b.so": device_library(120, 90)})  # fmt: skip
    assert isinstance(both, Derivation)
    assert both.properties.sm_arch == ("90_real", "120_real")
    assert both.label == "sm90_120"


def test_only_archs_in_every_module_of_a_library_are_claimed(tmp_path: Path) -> None:
    two_modules = elf64(
        [(".nv_fatbin", container(Entry(sm=80), Entry(sm=90)) + container(Entry(sm=80)))]
    )
    got = _derive(tmp_path, {"_k.so": two_modules})
    assert isinstance(got, Derivation)
    assert got.properties.sm_arch == ("80_real",)


def test_ptx_values_and_label(tmp_path: Path) -> None:
    ptx = Entry(kind=1, sm=90, version=(8, 7), payload=b".version 8.7\n")
    got = _derive(tmp_path, {"_k.so": elf64([(".nv_fatbin", container(Entry(sm=80), ptx))])})
    assert isinstance(got, Derivation)
    assert got.properties.sm_arch == ("80_real", "90_virtual")
    assert got.label == "sm80_p90"


def test_ptx_isa_raises_the_lower_bound(tmp_path: Path) -> None:
    ptx = Entry(kind=1, sm=90, version=(9, 1), payload=b".version 9.1\n")
    got = _derive(tmp_path, {"_k.so": elf64([(".nv_fatbin", container(ptx))])})
    assert isinstance(got, Derivation)
    assert str(got.properties.cuda_lower_bound) == "13.1"
    assert {r.rule for r in got.reasons} == {"runtime-driver", "ptx-isa-driver"}


def test_compressed_fatbins_cite_their_rule_and_need_the_toolkit(tmp_path: Path) -> None:
    lz4 = Entry(sm=80, flags=0x11 | 0x2000, compressed_size=64, uncompressed_size=64)
    library = {"_k.so": elf64([(".nv_fatbin", container(lz4))])}
    got = _derive(tmp_path, library, toolkit=CudaVersion(12, 8))
    assert isinstance(got, Derivation)
    assert str(got.properties.cuda_lower_bound) == "12.0"
    assert "fatbin-compression" in {r.rule for r in got.reasons}
    load_facts().rule("fatbin-compression")  # the rule has its sentence
    unknown = _derive(tmp_path / "2", library, toolkit=None)
    assert isinstance(unknown, NoVariant)
    assert "fatbin-compression" in unknown.reason


def test_refusals(tmp_path: Path) -> None:
    none = _derive(tmp_path, {})
    assert isinstance(none, NoVariant) and "no library has device code" in none.reason
    failed = _derive(tmp_path / "2", {"_k.so": device_library(80)}, expect="9.0")
    assert isinstance(failed, NoVariant) and "audit failed" in failed.reason
    disjoint = _derive(tmp_path / "3", {"_a.so": device_library(80), "_b.so": device_library(90)})
    assert isinstance(disjoint, NoVariant) and "every module" in disjoint.reason


def test_long_labels_stay_within_the_limit_and_distinct() -> None:
    a = VariantProperties(tuple(f"{n}_real" for n in (75, 80, 86, 89, 90, 100, 120)), CU130)
    b = VariantProperties(tuple(f"{n}_real" for n in (75, 80, 86, 89, 90, 100, 103)), CU130)
    assert len(a.label) <= 16 and len(b.label) <= 16
    assert a.label != b.label
    assert a.label == VariantProperties(a.sm_arch, CU130).label


def test_identical_properties_and_labels_are_refused() -> None:
    p = VariantProperties(("80_real",), CU130)
    q = VariantProperties(("80_real",), CudaVersion(12, 0))
    assert duplicates([("a.whl", p), ("b.whl", VariantProperties(("90_real",), CU130))]) == []
    (same,) = duplicates([("a.whl", p), ("b.whl", p)])
    assert "same variant properties" in same and "sm80" in same
    (label,) = duplicates([("a.whl", p), ("b.whl", q)])
    assert "same label" in label


def test_document_is_the_shape_uv_accepts() -> None:
    doc = variants_document({"sm90": VariantProperties(("90_real",), CU130),
                             "sm80": VariantProperties(("80_real",), CU130)})  # fmt: skip
    assert list(doc["variants"]) == ["sm80", "sm90"]
    assert doc["variants"]["sm80"] == {
        "nvidia": {"cuda_version_lower_bound": ["13.0"], "sm_arch": ["80_real"]}
    }
    assert "enable-if" not in doc["providers"]["nvidia"]
    assert doc["default-priorities"] == {"namespace": ["nvidia"]}


def test_claims_the_device_code_does_not_back(tmp_path: Path) -> None:
    report = _report(tmp_path, {"_k.so": device_library(90)})
    doc = variants_document({"sm90_120": VariantProperties(("90_real", "120_real"), CU130)})
    claims, problem = read_claims(doc)
    assert problem is None
    (line,) = unbacked(claims, report)
    assert "120_real" in line and "sm_120" in line
    honest, _ = read_claims(variants_document({"sm90": VariantProperties(("90_real",), CU130)}))
    assert unbacked(honest, report) == []


@pytest.mark.parametrize("doc", [[], {"variants": []}, {"variants": {"x": {"nvidia": 1}}},
                                 {"variants": {"x": {"nvidia": {"sm_arch": "80_real"}}}}])  # fmt: skip
def test_unreadable_variant_json_is_one_problem(doc: object) -> None:
    claims, problem = read_claims(doc)
    assert claims == [] and problem
