"""cuobjdump as an oracle on the real torch 2.14.1 wheel, against facts about it (cuda-facts.md
section 6). Its parser and runner on written-out listings: tests/unit/binary/test_cuobjdump.py.
"""

from __future__ import annotations

import zipfile
from collections import Counter
from pathlib import Path

import pytest

from archwheel.crosscheck.cuobjdump import Cuobjdump
from archwheel.facts.arch import CodeKind
from tests.support.cuobjdump_support import NV, REL

SASS, PTX = CodeKind.SASS, CodeKind.PTX


# -- the real torch 2.14.1 wheel (cuda-facts.md section 6) ----------------------------------------


def extract_member(wheel: Path, member: str, dest: Path) -> Path:
    with zipfile.ZipFile(wheel) as zf:
        target = dest / Path(member).name
        with zf.open(member) as src, target.open("wb") as dst:
            while block := src.read(1 << 20):
                dst.write(block)
    return target


def arch_counts(
    counts: Counter[tuple[str, CodeKind, str]], section: str, kind: CodeKind
) -> dict[str, int]:
    return {arch: n for (s, k, arch), n in counts.items() if s == section and k is kind}


@pytest.mark.realwheel
def test_torch_nvshmem_keeps_the_wheels_only_ptx_in_its_relocatable_fatbin(
    torch_wheel: Path, cuobjdump: Cuobjdump, tmp_path: Path
) -> None:
    lib = extract_member(torch_wheel, "torch/lib/libtorch_nvshmem.so", tmp_path)
    seen = cuobjdump.inventory(lib)
    counts = seen.counts[None]
    assert {s for s, _, _ in counts} == {NV, REL}
    assert arch_counts(counts, NV, PTX) == {}
    assert set(arch_counts(counts, REL, PTX)) == {"compute_120"}
    every = cuobjdump.list_images(lib, all_fatbins=True)
    assert seen.total == len(every)  # the two sections partition the -all listing


@pytest.mark.realwheel
def test_torch_cuda_linalg_has_no_sm_75_and_the_same_kernels_for_every_arch(
    torch_wheel: Path, cuobjdump: Cuobjdump, tmp_path: Path
) -> None:
    lib = extract_member(torch_wheel, "torch/lib/libtorch_cuda_linalg.so", tmp_path)
    counts = cuobjdump.inventory(lib).counts[None]
    sass = arch_counts(counts, NV, SASS)
    # cu130 wheels are built for 7.5;8.0;8.6;9.0;10.0;12.0, yet this library lacks sm_75.
    assert set(sass) == {"sm_80", "sm_86", "sm_90", "sm_100", "sm_120"}
    assert len(set(sass.values())) == 1
    assert arch_counts(counts, NV, PTX) == {}
    assert arch_counts(counts, REL, SASS) == {}


@pytest.mark.realwheel
@pytest.mark.slow
def test_torch_cuda_carries_kernels_beyond_its_arch_list(
    torch_wheel: Path, cuobjdump: Cuobjdump, tmp_path: Path
) -> None:
    # About 17 s and 5.5 GB of RAM; memoized by the session's cuobjdump fixture.
    lib = extract_member(torch_wheel, "torch/lib/libtorch_cuda.so", tmp_path)
    counts = cuobjdump.inventory(lib).counts[None]
    sass = arch_counts(counts, NV, SASS)
    listed = {"sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"}
    # sm_103f is printed sm_103 by cuobjdump: the f is lost here, restored by archwheel.
    extras = {"sm_89", "sm_90a", "sm_100a", "sm_103", "sm_120a", "sm_121a"}
    assert listed | extras <= set(sass)
    assert all(sass[a] > sass[b] for a in listed for b in extras)
    assert arch_counts(counts, NV, PTX) == {}
