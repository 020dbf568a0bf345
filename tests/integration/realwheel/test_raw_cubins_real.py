"""Raw cubins in a real NVIDIA wheel: nvidia-cuda-cupti 13.0.85 keeps ELF cubins outside any
fatbin, in .rodata and .data (libnvperf_target.so has no fatbin at all). The oracle is
cuobjdump: it does not see them in the library (it reads only .nv_fatbin and __nv_relfatbin),
and it names the SM of each cubin once the scanner's bytes are written out as a file.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from archwheel.binary.model import Origin
from archwheel.binary.scan.inputs import scan_path
from archwheel.crosscheck.cuobjdump import Cuobjdump
from archwheel.facts.arch import CodeKind
from archwheel.facts.catalog import load_facts
from archwheel.verdicts.compat.gpus import Gpu
from archwheel.verdicts.compat.judge import judge_library
from archwheel.verdicts.vocabulary import Verdict
from tests.support.components import CUPTI_SPEC, fetch_wheel

FACTS = load_facts()

pytestmark = pytest.mark.realwheel

NVPERF = "nvidia/cu13/lib/libnvperf_target.so"


@pytest.fixture(scope="module")
def cupti_wheel() -> Path:
    return fetch_wheel(CUPTI_SPEC)


def test_raw_cubins_agree_with_cuobjdump_cubin_by_cubin(
    cupti_wheel: Path, cuobjdump: Cuobjdump, tmp_path: Path
) -> None:
    inventory = scan_path(cupti_wheel)
    assert inventory.complete, [p.one_line() for p in inventory.problems]
    [lib] = [lib for lib in inventory.libraries if lib.path == NVPERF]
    assert lib.containers == () and lib.raw_cubins == lib.entries
    assert len(lib.entries) >= 10
    with zipfile.ZipFile(cupti_wheel) as zf:
        data = zf.read(NVPERF)
    library = tmp_path / "libnvperf_target.so"
    library.write_bytes(data)
    # cuobjdump finds no device code in the library: the raw cubins are outside its view.
    assert cuobjdump.list_images(library, all_fatbins=True) == ()
    for i, entry in enumerate(lib.entries):
        assert entry.origin is Origin.RAW_CUBIN and entry.section == ".rodata"
        cubin = tmp_path / f"{i}.cubin"
        cubin.write_bytes(data[entry.offset : entry.offset + entry.stored_bytes])
        [listed] = cuobjdump.list_images(cubin, all_fatbins=True)
        assert listed.kind is CodeKind.SASS
        # cuobjdump drops an 'f'; compare without the suffix.
        assert listed.arch.rstrip("af") == entry.arch.rstrip("af"), (i, entry.offset)


def test_raw_cubins_count_in_the_verdict(cupti_wheel: Path) -> None:
    inventory = scan_path(cupti_wheel)
    [lib] = [lib for lib in inventory.libraries if lib.path == NVPERF]
    sass = {e.target.cc for e in lib.entries if e.kind is CodeKind.SASS}
    for cc in sorted(sass):
        assert judge_library(lib, Gpu(cc), facts=FACTS).verdict is Verdict.NATIVE, cc
    # GPUs of a major the library has no cubin for: nothing serves them.
    majors = {cc.major for cc in sass}
    unserved = [cc for cc in sorted(load_facts().capabilities) if cc.major not in majors]
    assert unserved
    for cc in unserved:
        assert judge_library(lib, Gpu(cc), facts=FACTS).verdict is Verdict.NO_KERNEL_IMAGE, cc


def test_old_raw_cubins_beside_fatbins_do_not_fail_a_library(cupti_wheel: Path) -> None:
    """libcheckpoint.so keeps sm_35..sm_62 raw cubins beside fatbins for current GPUs: the raw
    cubins serve none of those GPUs, and that is not a missing module (rule raw-cubin)."""
    inventory = scan_path(cupti_wheel)
    [lib] = [lib for lib in inventory.libraries if lib.path.endswith("/libcheckpoint.so")]
    raw = {e.target.cc for e in lib.raw_cubins}
    fatbin = {e.target.cc for e in lib.entries if e.origin is Origin.FATBIN}
    assert raw and fatbin and max(raw) < min(fatbin)
    for cc in sorted(fatbin):
        judged = judge_library(lib, Gpu(cc), facts=FACTS)
        assert judged.verdict is Verdict.NATIVE, cc
        assert any(r.rule_id == "raw-cubin" for r in judged.reasons)
