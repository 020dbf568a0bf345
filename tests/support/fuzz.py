"""The machinery of the property-based scanner tests: seeds, mutations, and the promises every
example is checked against:

- no exception other than archwheel's own (``ArchwheelError``);
- no hang: a watchdog stops an example after ``WATCHDOG_S`` seconds (this guards against
  infinite loops, it is not a speed target);
- bounded memory: Python allocations peak below ``64 MiB + 4 x input size``;
- nothing written: not in the temporary folder, not in the working folder, not beside the input;
- every problem is one line, naming the file; every entry lies inside the file.

Mutations aim at the fields that matter: container and entry headers (sizes, kinds, header
sizes, flags), the ELF header and its section table, plus truncation, splicing and random bytes
behind a container magic. ``ARCHWHEEL_FUZZ_EXAMPLES`` scales the number of examples (CI default
below).
"""

from __future__ import annotations

import os
import signal
import struct
import tempfile
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, SimpleNamespace
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from archwheel.binary.model import LibraryInventory
from archwheel.binary.scan.binary import BinaryScan, scan_stream
from archwheel.errors import ArchwheelError

WATCHDOG_S = 60
EXAMPLES = int(os.environ.get("ARCHWHEEL_FUZZ_EXAMPLES", "120"))
FATBIN_MAGIC = struct.pack("<I", 0xBA55ED50)
SEGMENT_MAGIC = struct.pack("<I", 0x466243B1)
EXTREMES = (0, 1, 2, 7, 8, 15, 16, 63, 64, 0x101, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 40,
            (1 << 63) - 1, (1 << 64) - 1)  # fmt: skip

FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,  # the watchdog bounds time; a slow example under load is not a failure
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)


class Seed:
    """Real bytes and the offsets worth mutating around (shown by name only in reports)."""

    def __init__(self, name: str, data: bytes, anchors: tuple[int, ...]) -> None:
        self.name, self.data, self.anchors = name, data, anchors

    def __repr__(self) -> str:
        return f"Seed({self.name!r}, {len(self.data)} bytes)"


def anchors_of(data: bytes) -> tuple[int, ...]:
    """Container and segment magics, the ELF header, its section table, archive headers."""
    found = {0, max(len(data) - 1, 0)}
    for magic in (FATBIN_MAGIC, SEGMENT_MAGIC, b"`\n"):
        position = data.find(magic)
        while position >= 0 and len(found) < 400:
            found.add(position)
            found.add(position + 16)  # the first entry header after a container header
            position = data.find(magic, position + 1)
    if data[:4] == b"\x7fELF" and len(data) >= 64:
        found.add(min(struct.unpack_from("<Q", data, 0x28)[0], len(data) - 1))
    return tuple(sorted(p for p in found if 0 <= p < len(data)))


def seed(name: str, data: bytes) -> Seed:
    return Seed(name, data, anchors_of(data))


class Mutant:
    """Mutated bytes, shown by hypothesis as the seed and the edits (not megabytes of data)."""

    def __init__(self, name: str, data: bytes, edits: tuple[str, ...]) -> None:
        self.name, self.data, self.edits = name, data, edits

    def __repr__(self) -> str:
        return f"Mutant({self.name!r}, {len(self.data)} bytes, edits={list(self.edits)})"


@st.composite
def mutated(draw: Callable[..., Any], seeds: list[Seed]) -> Mutant:
    original = draw(st.sampled_from(seeds))
    data = bytearray(original.data)
    edits: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        anchor = draw(st.sampled_from(original.anchors))
        position = min(anchor + draw(st.integers(0, 127)), len(data) - 1)
        operation = draw(st.sampled_from(["field", "field", "bytes", "truncate", "splice"]))
        if operation == "field":
            width = draw(st.sampled_from([2, 4, 8]))
            value = draw(st.one_of(st.sampled_from(EXTREMES), st.integers(0, (1 << 64) - 1)))
            chunk = (value % (1 << (8 * width))).to_bytes(width, "little")
            data[position : position + width] = chunk[: len(data) - position]
            edits.append(f"u{8 * width}@{position:#x}={value % (1 << (8 * width)):#x}")
        elif operation == "bytes":
            chunk = draw(st.binary(min_size=1, max_size=24))
            data[position : position + len(chunk)] = chunk[: len(data) - position]
            edits.append(f"bytes@{position:#x}={chunk.hex()}")
        elif operation == "truncate":
            cut = draw(st.integers(0, len(data)))
            del data[cut:]
            edits.append(f"truncate@{cut:#x}")
        else:
            length = draw(st.integers(1, 512))
            data[position:position] = data[anchor : anchor + length]
            edits.append(f"splice {anchor:#x}+{length}->{position:#x}")
    return Mutant(original.name, bytes(data), tuple(edits))


def scan_in_chunks(data: bytes, chunk: int = 1 << 20, *, deep: bool = False) -> BinaryScan | None:
    """``scan_stream`` of ``data`` delivered in chunks of ``chunk`` bytes (the last shorter)."""

    def open_chunks() -> Iterator[bytes]:
        for start in range(0, len(data), chunk):
            yield data[start : start + chunk]

    return scan_stream("m.so", len(data), open_chunks, deep=deep)


def said(scan: BinaryScan | None) -> object:
    """What a scan reports, comparable: its libraries, its notes (sorted), its bytes read."""
    if scan is None:
        return None
    return (scan.libraries, sorted(scan.notes, key=repr), scan.bytes_read)


# -- the promises ---------------------------------------------------------------------------------


class Hang(Exception):
    pass


@contextmanager
def watchdog(seconds: int) -> Iterator[None]:
    def expire(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"the scanner ran for more than {seconds} s on one input")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def sealed_environment() -> Iterator[tuple[Path, Path]]:
    """An input folder, and a temp folder plus working folder that must stay empty."""
    with tempfile.TemporaryDirectory(prefix="archwheel-fuzz-") as box:
        inputs, scratch, cwd = Path(box, "in"), Path(box, "tmp"), Path(box, "cwd")
        for folder in (inputs, scratch, cwd):
            folder.mkdir()
        old_tempdir, old_cwd = tempfile.tempdir, Path.cwd()
        tempfile.tempdir = str(scratch)
        os.chdir(cwd)
        try:
            yield inputs, scratch
        finally:
            os.chdir(old_cwd)
            tempfile.tempdir = old_tempdir
        assert list(scratch.iterdir()) == [], "the scanner wrote into the temporary folder"
        assert list(cwd.iterdir()) == [], "the scanner wrote into the working folder"


def check_library(lib: LibraryInventory, size: int) -> None:
    for e in lib.entries:
        assert 0 <= e.offset < size, f"entry offset {e.offset} outside a {size}-byte file"
        assert 0 < e.stored_bytes <= size - e.offset, "entry extends past the end of the file"
        assert e.uncompressed_bytes >= 0


def run_bounded(action: Callable[[], Any], size: int) -> Any:
    """Run the scanner under the watchdog and tracemalloc; its error is returned, not raised."""
    result: Any
    tracemalloc.start()
    try:
        with watchdog(WATCHDOG_S):
            try:
                result = action()
            except ArchwheelError as exc:
                result = exc
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < (64 << 20) + 4 * size, f"peak Python memory {peak >> 20} MiB"
    return result


def check_scan_bytes(scan: SimpleNamespace, name: str, data: bytes) -> None:
    with sealed_environment():
        result = run_bounded(lambda: scan.scan_bytes(name, data), len(data))
    if isinstance(result, ArchwheelError):
        line = result.one_line()
        assert "\n" not in line
        assert name in line, f"the message does not name the file: {line}"
    else:
        assert isinstance(result, LibraryInventory)
        check_library(result, len(data))
