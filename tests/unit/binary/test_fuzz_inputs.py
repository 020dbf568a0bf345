"""Property-based: random bytes behind a fatbin container magic never make an entry, within the
promises of tests/support/fuzz.py (bounded time and memory, nothing written).
"""

from __future__ import annotations

import random
from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from archwheel.binary.model import LibraryInventory
from tests.support.fuzz import FATBIN_MAGIC, FUZZ_SETTINGS, run_bounded, sealed_environment


@FUZZ_SETTINGS
@given(seed_value=st.integers(0, 2**32 - 1), size=st.integers(16, 4096), at=st.integers(0, 4096))
def test_random_bytes_behind_a_container_magic_never_make_an_entry(
    scan: SimpleNamespace, seed_value: int, size: int, at: int
) -> None:
    noise = bytearray(random.Random(seed_value).randbytes(size))
    at = min(at, size - 4) & ~7
    noise[at : at + 4] = FATBIN_MAGIC
    with sealed_environment():
        result = run_bounded(lambda: scan.scan_bytes("noise.bin", bytes(noise)), size)
    if isinstance(result, LibraryInventory):
        assert result.entries == ()
