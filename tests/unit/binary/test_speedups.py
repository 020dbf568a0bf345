"""The compiled scan (``binary/_speedups.c``) against the Python scan it accelerates.

The compiled scan answers only for a binary the Python scan reads with no problem, and must
then answer exactly what the Python scan says: the same libraries, containers and entries, in
the same order, with the same values. Anything else it must leave to the Python scan (None).
Checked on generated binaries of every shape the scan knows, on mutations of them (fields,
bytes, truncation, splices: most mutants are damaged, and some stay clean in new ways), and,
in tests/integration/realwheel, on the real wheels.
"""

from __future__ import annotations

import os
import re
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archwheel.binary import speedups
from archwheel.binary.elf import ELF_MAGIC
from archwheel.binary.fatbin import CONTAINER_MAGIC_BYTES
from archwheel.binary.scan import bounds
from archwheel.text import switch_value
from tests.support.builders import Entry, ar_archive, container, elf64
from tests.support.fuzz import FUZZ_SETTINGS, Mutant, mutated, said, scan_in_chunks, seed

CUBIN = elf64([(".text.kernel", b"\0" * 32)], e_type=2, machine=190, e_flags=0x5A)
HOST = elf64([(".text", b"\x90" * 16)])
ZSTD, LZ4, ARCH_SPECIFIC, FAMILY = 0x8000, 0x2000, 0x100000, 0x200000

# Each clean: the compiled scan must answer for it (test_the_compiled_scan_answers_for_clean_ones).
DEBUG = [(".debug_info", b"i" * 1000), (".zdebug_str", b"s" * 50), (".stab", b"t" * 7),
         (".debugger_notes", b"n" * 3), (".gnu_debuglink", b"l" * 16)]  # fmt: skip
CLEAN = {
    "one container": elf64([(".nv_fatbin", container(Entry(sm=80), Entry(kind=1, sm=90)))]),
    "debug sections": elf64([(".nv_fatbin", container(Entry(sm=90))), *DEBUG]),
    "kinds and flags": elf64(
        [
            (
                ".nv_fatbin",
                container(
                    Entry(kind=1, sm=90, version=(8, 7)),
                    Entry(kind=1, sm=100, version=(9, 0), flags=0x11 | FAMILY),
                    Entry(kind=8, sm=120, flags=0x11 | 0x10000),
                    Entry(
                        sm=90,
                        flags=0x11 | ARCH_SPECIFIC | ZSTD,
                        compressed_size=40,
                        uncompressed_size=4000,
                        payload=b"z" * 40,
                    ),
                    Entry(sm=86, flags=0x11 | LZ4, compressed_size=24, payload=b"l" * 24),
                    Entry(sm=75, header_size=72, payload=b"p" * 100),
                ),
            )
        ]
    ),
    "two sections": elf64(
        [
            (".text", b"\x90" * 40),
            (".nv_fatbin", container(Entry(sm=75)) + container(Entry(sm=86))),
            ("__nv_relfatbin", container(Entry(sm=90, payload=b"x" * 200))),
        ]
    ),
    "elsewhere": elf64([(".cask_resource", b"\1" * 24 + container(Entry(sm=80)) + b"\2" * 8)]),
    "names first": elf64([(".nv_fatbin", container(Entry(sm=89)))], names_first=True),
    "empty container": elf64([(".nv_fatbin", container())]),
    "no device code": HOST,
    "executable": elf64([(".nv_fatbin", container(Entry(sm=80)))], e_type=2),
    "relocatable": elf64([(".nv_fatbin", container(Entry(sm=80)))], e_type=1),
    "core": elf64([(".nv_fatbin", container(Entry(sm=80)))], e_type=4),
    "unknown type": elf64([(".nv_fatbin", container(Entry(sm=80)))], e_type=0x1234),
    "nested": elf64([(".nv_fatbin", container(Entry(payload=container(Entry(sm=90)))))]),
    "cubin in an entry": elf64([(".nv_fatbin", container(Entry(sm=90, payload=CUBIN)))]),
    "host elf as data": elf64([(".rodata", HOST)]),
    "magic in code": elf64([(".text", struct.pack("<IHHQ", 0xBA55ED50, 2, 16, 64) + b"\0" * 8)]),
    "nobits": elf64([(".bss", b"\0" * 64), (".nv_fatbin", container(Entry()))], nobits=(".bss",)),
    "many": elf64([(".nv_fatbin", container(Entry(sm=80, payload=b"")) * 300)] * 20),
    "archive": ar_archive(
        [
            ("a.o", elf64([(".nv_fatbin", container(Entry(sm=80)))])),
            ("b.o", elf64([(".nvFatBinSegment", b"\0" * 24), (".nv_fatbin", container())])),
            ("a_rather_long_member_name.o", elf64([(".nv_fatbin", container(Entry(sm=90)))])),
            ("host.o", HOST),
            ("notes.txt", b"plain text, not an object"),
        ]
    ),
}
# Each read with a problem or a special meaning: the compiled scan must leave it alone.
LEFT = {
    "raw cubin": elf64([(".nv_fatbin", b""), (".rodata", CUBIN)]),
    "a cubin": CUBIN,
    "gap": elf64([(".nv_fatbin", container(Entry()) + b"\0" * 64)]),
    "damaged entry": elf64([(".nv_fatbin", container(Entry(marker=0x0202)))]),
    "unknown flags": elf64([(".nv_fatbin", container(Entry(flags=0x11 | 1 << 40)))]),
    "past its section": elf64([(".nv_fatbin", container(Entry(), declared=4096))]),
    "no section table": elf64([(".nv_fatbin", container(Entry()))], shoff_override=0),
    "section table past the end": elf64([(".nv_fatbin", b"")], shoff_override=1 << 40),
    "damaged header": elf64([(".nv_fatbin", container(Entry(), version=2))]),
    "thin archive": b"!<thin>\n",
}
SEEDS = [seed(name, data) for name, data in {**CLEAN, **LEFT}.items()]


def _python_only(data: bytes, monkeypatch: pytest.MonkeyPatch, chunk: int = 1 << 20) -> object:
    with monkeypatch.context() as patch:
        patch.setattr(speedups, "COMPILED", None)
        return said(scan_in_chunks(data, chunk))


def _answers(data: bytes) -> bool:
    return speedups.scan_whole(data, bounds.compiled_bounds()) is not None


def test_the_compiled_scan_is_built() -> None:
    """Built by every install with a C compiler (setup.py); a missing one is a build bug here."""
    if switch_value(os.environ.get("ARCHWHEEL_PURE_PYTHON", "")):
        pytest.skip("ARCHWHEEL_PURE_PYTHON is set: this run tests the Python scan alone")
    assert speedups.COMPILED is not None, "binary/_speedups.c is not built: pip install -e ."


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_the_compiled_scan_answers_for_clean_ones(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = CLEAN[name]
    assert _answers(data), f"{name}: left to the Python scan"
    reference = _python_only(data, monkeypatch)
    assert reference is not None and not reference[1]  # type: ignore[index]
    assert said(scan_in_chunks(data)) == reference


def test_debug_sections_are_counted_alike_compiled_or_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What strip --strip-debug removes (elf.is_debug_section): .debug_*, .zdebug_*, .stab;
    not .debugger_notes or .gnu_debuglink. 1000 + 50 + 7 bytes."""
    data = CLEAN["debug sections"]
    compiled = scan_in_chunks(data)
    assert compiled is not None and [lib.debug_bytes for lib in compiled.libraries] == [1057]
    assert said(compiled) == _python_only(data, monkeypatch)


@pytest.mark.parametrize("name", sorted(LEFT))
def test_the_compiled_scan_leaves_the_others(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    data = LEFT[name]
    assert not _answers(data), f"{name}: the compiled scan answered"
    assert said(scan_in_chunks(data)) == _python_only(data, monkeypatch)


@FUZZ_SETTINGS
@given(mutant=mutated(SEEDS), chunk=st.sampled_from([1 << 20, 97]))
def test_mutants_are_scanned_alike_compiled_or_not(mutant: Mutant, chunk: int) -> None:
    # In chunks of 97 bytes the compiled scan reads the binary gathered from its chunks, the
    # Python scan streams them; in one chunk both read it whole.
    data = mutant.data
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert said(scan_in_chunks(data, chunk)) == _python_only(data, monkeypatch, chunk)


def test_the_bounds_are_the_python_scans(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past a bound the compiled scan leaves the binary to the Python scan, which says so."""
    data = elf64([(".nv_fatbin", container(*[Entry(sm=80, payload=b"")] * 10) * 5)])
    assert _answers(data)
    for bound, value in [
        ("MAX_ENTRIES", 49),
        ("MAX_ENTRIES_PER_CONTAINER", 9),
        ("MAX_CONTAINERS", 4),
    ]:
        with monkeypatch.context() as patch:
            patch.setattr(bounds, bound, value)
            assert not _answers(data), bound
            scan = scan_in_chunks(data)
            assert scan is not None and any("limit" in n.message for _, n in scan.notes), bound
    hosts = elf64([(".rodata", HOST * 3), (".nv_fatbin", container(Entry()))])
    assert _answers(hosts)
    monkeypatch.setattr(bounds, "MAX_RAW_CUBINS", 2)
    assert not _answers(hosts)


@pytest.mark.parametrize("size", [0, 1, 15, 16, 63, 64, 65])
def test_short_and_odd_buffers_are_left_alone(size: int) -> None:
    data = (b"\x7fELF\x02\x01\x01" + b"\0" * 100)[:size]
    assert not _answers(data)


def test_a_section_table_entry_naming_past_the_name_table_is_left_alone() -> None:
    data = bytearray(elf64([(".nv_fatbin", container(Entry()))]))
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    struct.pack_into("<I", data, shoff + 64, 1 << 20)  # section 1's name offset
    assert not _answers(bytes(data))


def test_a_nobits_fatbin_section_of_any_size_is_read_as_the_python_scan_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # NOBITS sections hold no bytes of the file: their offset and size are never checked
    # against it, and their end may lie past 2^64 (Python's integers; C's must not wrap).
    for size in (8, 4096, (1 << 64) - 1):
        data = bytearray(elf64([(".nv_fatbin", b"\0" * 8)], nobits=(".nv_fatbin",)))
        shoff = struct.unpack_from("<Q", data, 0x28)[0]
        struct.pack_into("<QQ", data, shoff + 64 + 24, (1 << 63) + 5, size)
        assert said(scan_in_chunks(bytes(data))) == _python_only(bytes(data), monkeypatch), size
        assert _answers(bytes(data)) is (size <= 16), size


# -- the search for magics (``speedups.find_magics``) against ``re``'s, which the Python scan uses:
# the same offsets in the same order for every length and alignment (its vector loops take 32
# and 16 bytes at a time, the rest is searched by memmem).

# Pieces that make near misses likely: each magic, its halves, and their first and last bytes.
PIECES = [
    CONTAINER_MAGIC_BYTES,
    ELF_MAGIC,
    CONTAINER_MAGIC_BYTES[:2],
    CONTAINER_MAGIC_BYTES[2:],
    ELF_MAGIC[:3],
    b"\x50\x00\x00\xba",
    b"\x7f\x00\x00F",
    b"\x00",
    b"\x90" * 7,
]


def _magics(data: bytes) -> tuple[list[int], list[int]]:
    found = speedups.find_magics(data)
    if found is None:
        pytest.skip("the compiled part is not built (or ARCHWHEEL_PURE_PYTHON is set)")
    return found


def _expected(data: bytes) -> tuple[list[int], list[int]]:
    return (
        [m.start() for m in re.finditer(re.escape(CONTAINER_MAGIC_BYTES), data)],
        [m.start() for m in re.finditer(re.escape(ELF_MAGIC), data)],
    )


@pytest.mark.parametrize("length", range(80))
def test_a_magic_at_every_place_of_short_buffers(length: int) -> None:
    for magic in (CONTAINER_MAGIC_BYTES, ELF_MAGIC):
        for at in range(max(0, length - 3)):
            data = bytearray(b"\x50" * length)
            data[at : at + 4] = magic
            data = data[:length]
            assert _magics(bytes(data)) == _expected(bytes(data)), (length, at)


@FUZZ_SETTINGS
@given(parts=st.lists(st.sampled_from(PIECES) | st.binary(max_size=40), max_size=60))
def test_the_offsets_are_res(parts: list[bytes]) -> None:
    data = b"".join(parts)
    assert _magics(data) == _expected(data)


def test_a_long_buffer_with_magics_in_both_loops_and_the_tail() -> None:
    data = bytearray(b"\x90" * 100_003)
    for at in (0, 31, 32, 33, 4095, 65_536, 99_996, 99_999):
        data[at : at + 4] = CONTAINER_MAGIC_BYTES if at % 2 else ELF_MAGIC
    assert _magics(bytes(data)) == _expected(bytes(data))


TRIM_PROBE = """
import sys
from archwheel.binary import speedups
retained = speedups.retain_freed_memory()
def resident():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) << 10
kept = [b"\\x01" * (8 << 20) for _ in range(8)]  # 64 MiB written, from the heap
del kept
before = resident()
trimmed = speedups.trim_freed_memory()
print(retained, before - resident(), trimmed)
"""


def test_a_worker_gives_back_what_it_retained() -> None:
    """A process that retains freed memory (a scan's worker) keeps it until it trims: then
    the freed blocks go back to the kernel (``trim_freed_memory``, glibc's ``malloc_trim``).
    Under another allocator (AddressSanitizer's, in ``nox -s sanitize``) neither call has
    anything to set or give back: both answer False, and nothing fails."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", TRIM_PROBE], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    retained, given_back, trimmed = out[0] == "True", int(out[1]), out[2] == "True"
    if "LD_PRELOAD" in os.environ and "asan" in os.environ["LD_PRELOAD"]:
        assert not retained  # AddressSanitizer's allocator: mallopt has nothing to set
        return
    assert retained and trimmed
    assert given_back >= 48 << 20  # most of the 64 MiB freed and kept
