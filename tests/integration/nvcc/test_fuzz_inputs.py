"""Property-based tests: mutated REAL ELF, archive and fatbin bytes fed to archwheel's scanner.

Seeds here are the nvcc fixture corpus; a small real library of the torch 2.14.1 wheel is the
seed of tests/integration/realwheel/test_fuzz_inputs.py, and random bytes behind a container
magic are in tests/unit/binary/test_fuzz_inputs.py. The mutations and the promises checked for
every example (no foreign exception, no hang, bounded memory, nothing written, one-line problems)
are in tests/support/fuzz.py.

These tests fail (not skip) until ``archwheel.binary.scan`` exists.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archwheel.binary.model import InputInventory
from archwheel.errors import ArchwheelError
from tests.support.fuzz import (
    FATBIN_MAGIC,
    FUZZ_SETTINGS,
    Seed,
    check_library,
    check_scan_bytes,
    mutated,
    run_bounded,
    sealed_environment,
    seed,
)
from tests.support.nvcc_fixtures import NvccCorpus

SMALL_SEEDS = (
    "standalone.fatbin", "standalone.cubin", "relocatable.o", "lto.o", "libkernels.a",
    "variants.so", "embedded_objcopy.so", "device_linked.so",
)  # fmt: skip


def check_scan_path(scan: SimpleNamespace, name: str, data: bytes) -> None:
    with sealed_environment() as (inputs, _):
        path = inputs / name
        path.write_bytes(data)
        result = run_bounded(lambda: scan.scan_path(path), len(data))
        assert [p.name for p in inputs.iterdir()] == [name], "the scanner wrote beside the input"
    if isinstance(result, ArchwheelError):
        assert "\n" not in result.one_line()
        return
    assert isinstance(result, InputInventory)
    for problem in result.problems:
        line = problem.one_line()
        assert "\n" not in line
        assert name in line, f"the problem does not name the file: {line}"
    for lib in result.libraries:
        check_library(lib, len(data))


# -- seeds ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus_seeds(nvcc_corpus: NvccCorpus) -> list[Seed]:
    return [seed(name, nvcc_corpus[name].path.read_bytes()) for name in SMALL_SEEDS]


@pytest.mark.nvcc
def test_the_seeds_hold_what_the_mutations_aim_at(corpus_seeds: list[Seed]) -> None:
    for s in corpus_seeds:
        if s.name != "standalone.cubin":
            assert FATBIN_MAGIC in s.data, s.name
        assert len(s.anchors) > 2


# -- the properties -------------------------------------------------------------------------------


@pytest.mark.nvcc
@FUZZ_SETTINGS
@given(data=st.data())
def test_scan_bytes_keeps_its_promises_on_mutated_fixtures(
    scan: SimpleNamespace, corpus_seeds: list[Seed], data: st.DataObject
) -> None:
    seeds = [s for s in corpus_seeds if not s.name.endswith(".a")]
    mutant = data.draw(mutated(seeds))
    check_scan_bytes(scan, mutant.name, mutant.data)


@pytest.mark.nvcc
@FUZZ_SETTINGS
@given(data=st.data())
def test_scan_path_keeps_its_promises_on_mutated_fixtures(
    scan: SimpleNamespace, corpus_seeds: list[Seed], data: st.DataObject
) -> None:
    mutant = data.draw(mutated(corpus_seeds))
    check_scan_path(scan, mutant.name, mutant.data)
