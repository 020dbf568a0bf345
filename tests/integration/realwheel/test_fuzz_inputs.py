"""Property-based: mutated bytes of a small real library of the torch 2.14.1 wheel
(libtorch_nvshmem.so, with both fatbin sections) fed to archwheel's scanner, with the promises
of tests/support/fuzz.py.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.fuzz import EXAMPLES, FUZZ_SETTINGS, Seed, check_scan_bytes, mutated, seed

# -- seeds ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nvshmem_seed(torch_wheel: Path) -> list[Seed]:
    with zipfile.ZipFile(torch_wheel) as zf:
        data = zf.read("torch/lib/libtorch_nvshmem.so")
    return [seed("libtorch_nvshmem.so", data)]


@pytest.mark.realwheel
@pytest.mark.slow
@settings(FUZZ_SETTINGS, max_examples=max(EXAMPLES // 4, 10))
@given(data=st.data())
def test_scan_bytes_keeps_its_promises_on_a_mutated_torch_library(
    scan: SimpleNamespace, nvshmem_seed: list[Seed], data: st.DataObject
) -> None:
    mutant = data.draw(mutated(nvshmem_seed))
    check_scan_bytes(scan, mutant.name, mutant.data)
