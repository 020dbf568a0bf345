"""Acceptance tests for archwheel's scanner on the nvcc fixture corpus.

What each fixture must contain is derived from the nvcc flags it was built with
(``tests/support/nvcc_fixtures.py``), not from either reader. These tests fail (not skip) until
``archwheel.binary.scan`` exists.
"""

from __future__ import annotations

import importlib
import re
from collections import Counter
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from archwheel.binary.model import Compression, FatbinEntry, InputInventory
from archwheel.facts.arch import CodeKind
from archwheel.facts.catalog import load_facts
from archwheel.verdicts.crosscheck import split_library_path
from tests.support.nvcc_fixtures import SPECS, NvccCorpus, Product

pytestmark = pytest.mark.nvcc

ImageKey = tuple[str | None, str, CodeKind, str]


@pytest.fixture(scope="module")
def scan() -> ModuleType:
    return importlib.import_module("archwheel.binary.scan.inputs")


def scanned_images(
    inventory: InputInventory,
) -> tuple[Counter[ImageKey], dict[ImageKey, set[Compression]]]:
    counts: Counter[ImageKey] = Counter()
    compressions: dict[ImageKey, set[Compression]] = {}
    for lib in inventory.libraries:
        _, member = split_library_path(lib.path)
        for e in lib.entries:
            key = (member, e.section, e.kind, e.arch)
            counts[key] += 1
            compressions.setdefault(key, set()).add(e.compression)
    return counts, compressions


@pytest.mark.parametrize("name", [s.name for s in SPECS])
def test_scanner_finds_exactly_what_the_nvcc_flags_put_in(
    scan: SimpleNamespace, nvcc_corpus: NvccCorpus, name: str
) -> None:
    fixture = nvcc_corpus[name]
    inventory = scan.scan_path(fixture.path)
    assert inventory.complete, [p.one_line() for p in inventory.problems]
    counts, compressions = scanned_images(inventory)
    expected = {(e.member, e.section, e.kind, e.arch): e for e in fixture.expected}
    assert dict(counts) == {key: e.count for key, e in expected.items()}
    assert {k: frozenset(v) for k, v in compressions.items()} == {
        key: e.compressions for key, e in expected.items()
    }


@pytest.mark.parametrize("name", [s.name for s in SPECS if s.product is not Product.STATIC])
def test_scanner_names_the_file_kind(
    scan: SimpleNamespace, nvcc_corpus: NvccCorpus, name: str
) -> None:
    fixture = nvcc_corpus[name]
    device = scan.scan_path(fixture.path).device_libraries
    assert {lib.file_kind for lib in device} == {fixture.spec.file_kind}


def test_scanner_names_static_library_members(
    scan: SimpleNamespace, nvcc_corpus: NvccCorpus
) -> None:
    fixture = nvcc_corpus["libkernels.a"]
    members = {split_library_path(lib.path)[1] for lib in scan.scan_path(fixture.path).libraries}
    assert {"scale.o", "saxpy.o", "reduce.o"} <= members


def test_ptx_carries_the_isa_of_the_compiling_toolkit(
    scan: SimpleNamespace, nvcc_corpus: NvccCorpus
) -> None:
    release = re.search(r"release (\d+\.\d+)", nvcc_corpus.nvcc_version)
    assert release is not None
    isa = load_facts().toolkit(release.group(1)).ptx_isa
    for name in ("multi_arch.so", "variants.so", "ptx_only.so", "uncompressed.so"):
        inventory = scan.scan_path(nvcc_corpus[name].path)
        ptx = [e for lib in inventory.libraries for e in lib.entries if e.kind is CodeKind.PTX]
        assert ptx
        assert {e.ptx_isa for e in ptx} == {isa}


def entries_of(scan: SimpleNamespace, path: Path) -> list[FatbinEntry]:
    return [e for lib in scan.scan_path(path).libraries for e in lib.entries]


def test_compressed_images_are_smaller_than_their_payload_and_sizes_add_up(
    scan: SimpleNamespace, nvcc_corpus: NvccCorpus
) -> None:
    for name in ("lz4_speed.so", "zstd_size.so", "variants.so"):
        for e in entries_of(scan, nvcc_corpus[name].path):
            assert e.compression in (Compression.LZ4, Compression.ZSTD)
            assert e.stored_bytes > 0
            assert e.uncompressed_bytes > e.stored_bytes - 120  # header at most 120 bytes
    plain = entries_of(scan, nvcc_corpus["uncompressed.so"].path)
    assert all(e.stored_bytes >= e.uncompressed_bytes > 0 for e in plain)


def test_the_same_code_costs_least_with_size_mode_and_most_uncompressed(
    scan: SimpleNamespace, nvcc_corpus: NvccCorpus
) -> None:
    # lz4_speed.so, zstd_size.so and uncompressed.so hold the same saxpy.cu for the same archs.
    stored = {
        name: sum(e.stored_bytes for e in entries_of(scan, nvcc_corpus[name].path))
        for name in ("lz4_speed.so", "zstd_size.so", "uncompressed.so")
    }
    assert stored["zstd_size.so"] < stored["lz4_speed.so"] < stored["uncompressed.so"]
    # Uncompressed entries only know their 8-byte padded size: allow the padding.
    entries = {name: entries_of(scan, nvcc_corpus[name].path) for name in stored}
    payload = {name: sum(e.uncompressed_bytes for e in found) for name, found in entries.items()}
    assert payload["lz4_speed.so"] == payload["zstd_size.so"]
    padding = 8 * len(entries["uncompressed.so"])
    assert 0 <= payload["uncompressed.so"] - payload["zstd_size.so"] < padding


def test_scanning_the_corpus_folder_finds_every_fixture(
    scan: SimpleNamespace, nvcc_corpus: NvccCorpus
) -> None:
    inventory = scan.scan_path(nvcc_corpus.root)
    files = {split_library_path(lib.path)[0] for lib in inventory.device_libraries}
    assert files == {f.name for f in nvcc_corpus.fixtures}


@pytest.mark.parametrize("name", [s.name for s in SPECS])
def test_the_compiled_scan_reads_nvcc_output_as_the_python_scan(
    scan: SimpleNamespace, nvcc_corpus: NvccCorpus, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real nvcc 13 output, read by the compiled scan (binary/_speedups.c) and without it."""
    from archwheel.binary import speedups

    path = nvcc_corpus[name].path
    compiled = scan.scan_path(path, workers=1)
    with monkeypatch.context() as patch:
        patch.setattr(speedups, "COMPILED", None)
        python = scan.scan_path(path, workers=1)
    assert compiled == python
