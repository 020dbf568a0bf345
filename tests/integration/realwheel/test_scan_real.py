"""The scanner on the real torch 2.14.1+cu130 and torchvision 0.29.1 wheels.

Expected contents come from cuda-facts.md section 6 (established with NVIDIA's cuobjdump,
independently of this code); the entry-by-entry agreement with cuobjdump is in
tests/integration/realwheel/test_crosscheck.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from archwheel.binary.scan.inputs import scan_path
from archwheel.facts.arch import CodeKind
from archwheel.verdicts.audit import audit, audit_document
from tests.support.cli import CliRun
from tests.support.schemas import audit_schema

pytestmark = pytest.mark.realwheel


@pytest.fixture(scope="module")
def torch_inventory(torch_wheel: Path):  # type: ignore[no-untyped-def]
    return scan_path(torch_wheel)


def archs(inv, lib_suffix: str, kind: CodeKind) -> set[str]:  # type: ignore[no-untyped-def]
    (lib,) = [lib for lib in inv.libraries if lib.path.endswith(lib_suffix)]
    return {e.arch for e in lib.entries if e.kind is kind}


def test_torch_wheel_facts(torch_inventory) -> None:  # type: ignore[no-untyped-def]
    inv = torch_inventory
    assert inv.complete, [p.one_line() for p in inv.problems]
    cuda_sass = archs(inv, "/libtorch_cuda.so", CodeKind.SASS)
    # get_arch_list() says sm_75..sm_120; the library also carries a few more.
    assert {"sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"} <= cuda_sass
    assert {"sm_89", "sm_90a", "sm_100a", "sm_103f", "sm_120a", "sm_121a"} <= cuda_sass
    assert "sm_75" not in archs(inv, "/libtorch_cuda_linalg.so", CodeKind.SASS)
    ptx = [(lib.path, e.section, e.arch) for lib in inv.libraries for e in lib.entries
           if e.kind is CodeKind.PTX]  # fmt: skip
    assert {p[2] for p in ptx} == {"compute_120"}
    assert {(p[0], p[1]) for p in ptx} == {("torch/lib/libtorch_nvshmem.so", "__nv_relfatbin")}


def test_every_entry_is_zstd(torch_inventory) -> None:  # type: ignore[no-untyped-def]
    compressions = {e.compression.value for lib in torch_inventory.libraries for e in lib.entries}
    assert compressions == {"zstd"}  # cuda-facts.md: official wheels are entirely ZSTD


def test_audit_json_of_real_wheel(torch_inventory, torch_wheel: Path) -> None:  # type: ignore[no-untyped-def]
    from archwheel.facts.arch import ArchList

    report = audit(torch_inventory, ArchList.parse("7.5;8.0;8.6;9.0;10.0;12.0+PTX"))
    doc = audit_document([report])
    jsonschema.validate(doc, audit_schema())
    failing = {v.library.path: v.missing for v in report.failing}
    assert failing["torch/lib/libtorch_cuda_linalg.so"] == ("sm_75", "compute_120")
    assert failing["torch/lib/libtorch_cuda.so"] == ("compute_120",)
    assert "torch/lib/libtorch_nvshmem.so" not in failing


def test_torchvision(torchvision_wheel: Path, cli_run: CliRun) -> None:
    code, out, _ = cli_run("audit", str(torchvision_wheel), "--format", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, audit_schema())
    assert code == 0
    paths = [lib["path"] for lib in doc["inputs"][0]["libraries"]]
    assert "torchvision/_C_stable.so" in paths or any(p.startswith("torchvision/_C") for p in paths)


def test_the_official_cu130_list_in_the_facts_is_what_the_wheel_carries(  # type: ignore[no-untyped-def]
    torch_inventory,
) -> None:
    """cuda_facts.toml records cu130 as the release wheel shows it (no +PTX), while the
    pipeline's list (build_env_setup.py, _PTX_ARCHES {120}) keeps +PTX: both checked here."""
    from archwheel.facts.arch import ArchList
    from archwheel.facts.catalog import load_facts

    facts = load_facts()
    official = ArchList.parse(facts.official_arch_lists["cu130"])
    pipeline = ArchList.parse(facts.pipeline_arch_lists["cu130"])
    assert official.sass_targets == pipeline.sass_targets
    cuda_sass = archs(torch_inventory, "/libtorch_cuda.so", CodeKind.SASS)
    assert {t.sm for t in official.sass_targets} <= cuda_sass
    assert archs(torch_inventory, "/libtorch_cuda.so", CodeKind.PTX) == set()
    assert {t.compute for t in official.ptx_targets} == set()  # as the wheel shows
    assert {t.compute for t in pipeline.ptx_targets} == {"compute_120"}  # as the pipeline says
    # No raw cubins in torch: every image sits in a fatbin container.
    assert all(not lib.raw_cubins for lib in torch_inventory.libraries)
