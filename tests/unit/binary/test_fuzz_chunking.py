"""Property-based: how a binary is delivered never changes what the scan says of it.

A wheel member that fits in its first chunk is read without the stream's queue
(``stream.WholeInput``: every parser request answered from the bytes at hand); anything larger
goes through ``stream.StreamMux`` chunk by chunk, with its window and its replays. Both must
report the same libraries, entries, containers and problems for the same bytes: mutated ELF
files, archives, raw cubins and nested containers, delivered whole and in chunks of any size.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.support.builders import Entry, ar_archive, container, elf64
from tests.support.fuzz import FUZZ_SETTINGS, Mutant, mutated, said, scan_in_chunks, seed

CUBIN = elf64([(".text.kernel", b"\0" * 32)], e_type=2, machine=190, e_flags=0x5A)
SEEDS = [
    seed("one container", elf64([(".nv_fatbin", container(Entry(sm=80), Entry(kind=1, sm=90)))])),
    seed(
        "two sections",
        elf64(
            [
                (".text", b"\x90" * 40),
                (".nv_fatbin", container(Entry(sm=75)) + container(Entry(sm=86))),
                ("__nv_relfatbin", container(Entry(sm=90, payload=b"x" * 200))),
            ]
        ),
    ),
    seed("names first", elf64([(".nv_fatbin", container(Entry(sm=89)))], names_first=True)),
    seed(
        "archive",
        ar_archive(
            [
                ("a.o", elf64([(".nv_fatbin", container(Entry(sm=80)))])),
                ("b.o", elf64([(".nvFatBinSegment", b"\0" * 24), (".nv_fatbin", container())])),
            ]
        ),
    ),
    seed("raw cubin", elf64([(".nv_fatbin", b""), (".rodata", CUBIN)])),
    seed("nested", elf64([(".nv_fatbin", container(Entry(payload=container(Entry(sm=90)))))])),
]


@FUZZ_SETTINGS
@given(mutant=mutated(SEEDS), chunk=st.integers(8, 4096), deep=st.booleans())
def test_a_binary_whole_and_in_chunks_is_scanned_alike(
    mutant: Mutant, chunk: int, deep: bool
) -> None:
    # Chunks of 8 bytes at least: the kind of binary is told from its first chunk (a magic of
    # up to 8 bytes; real readers deliver at least 64 KiB, or the whole member, first).
    data = mutant.data
    whole = scan_in_chunks(data, max(len(data), 1), deep=deep)  # one chunk: read without the queue
    if len(data) > 8:
        chunk = min(chunk, len(data) - 1)  # two chunks at least: through the stream's queue
    assert said(scan_in_chunks(data, chunk, deep=deep)) == said(whole)


def test_the_seeds_hold_device_code() -> None:
    """The property means something only if the seeds are read as binaries with entries."""
    for s in SEEDS:
        scan = scan_in_chunks(s.data, len(s.data))
        assert scan is not None and scan.libraries, s.name
    entries = [
        sum(len(lib.entries) for lib in scan.libraries)
        for s in SEEDS
        if (scan := scan_in_chunks(s.data, len(s.data))) is not None
    ]
    assert sum(1 for count in entries if count) >= 4
