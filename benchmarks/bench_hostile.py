"""Scan cost on generated worst cases, per MB of input, against a real wheel's (issue 13, item 6).

Measured in one run, on this machine, in this process (``scan_path``, one worker): the time per
MiB of uncompressed binary bytes of

- the reference: the real torch 2.14.1 wheel (``--quick``: the smaller torchvision wheel in
  ``$ARCHWHEEL_CACHE/wheels``), its binary members' uncompressed bytes;
- generated worst cases, each a wheel whose one member packs as many structures per byte as
  the formats allow: many sections (each holding a container), many containers in one
  section, many entries (up to the per-binary bound), many ar members, many wheel members,
  and a name table without a NUL that every section names.

Target: every worst case within 10x of the reference's time per MiB. Prints each ratio, and
beside it the ratio of only making the objects the scan returns (one frozen ``FatbinEntry`` per
entry, one ``FatbinContainer`` per container, one ``LibraryInventory`` per library, built again
from their fields): the floor no scan returning them can go under. Writes them to
$ARCHWHEEL_CACHE/bench/hostile.json (docs/performance.md, "Hostile input").
"""

from __future__ import annotations

import json
import os
import struct
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("ARCHWHEEL_CACHE", ROOT / ".cache"))
sys.path.insert(0, str(ROOT))

from tests.support.builders import Entry, ar_archive, container, elf64  # noqa: E402

from archwheel.binary.model import (  # noqa: E402
    FatbinContainer,
    FatbinEntry,
    InputInventory,
    LibraryInventory,
)

TARGET_RATIO = 10.0
MIB = 1 << 20


def _names_without_end(count: int = 60000) -> bytes:
    names = b"\0" + b"n" * (4 << 20)
    table_at, names_at = 64, 64 + count * 64
    table = bytearray(count * 64)
    for i in range(1, count - 1):
        struct.pack_into("<IIQQQQIIQQ", table, i * 64, 1, 1, 0, 0, names_at, 0, 0, 0, 1, 0)
    struct.pack_into(
        "<IIQQQQIIQQ", table, (count - 1) * 64, 1, 3, 0, 0, names_at, len(names), 0, 0, 1, 0
    )
    ident = b"\x7fELF" + bytes([2, 1, 1, 0, 0]) + b"\0" * 7
    header = ident + struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, table_at, 0, 64, 0, 0, 64, count, count - 1
    )
    return header + bytes(table) + names


def cases() -> dict[str, Callable[[], list[tuple[str, bytes]]]]:
    """Each worst case as the members of a wheel."""
    small = elf64([(".nv_fatbin", container(Entry(sm=80)))])
    return {
        "many sections": lambda: [
            ("pkg/libs.so", elf64([(".nv_fatbin", container(Entry(sm=80)))] * 30000))
        ],
        "many containers": lambda: [
            ("pkg/libc.so", elf64([(".nv_fatbin", container(Entry(sm=80, payload=b"")) * 60000)]))
        ],
        "many entries": lambda: [
            (
                "pkg/libe.so",
                elf64([(".nv_fatbin", container(*[Entry(sm=80, payload=b"")] * 16000) * 16)]),
            )
        ],
        "many ar members": lambda: [
            ("pkg/libm.a", ar_archive([(f"member{i}.o", small) for i in range(20000)]))
        ],
        "many wheel members": lambda: [(f"pkg/lib{i}.so", small) for i in range(5000)],
        "names without an end": lambda: [("pkg/libn.so", _names_without_end())],
    }


def _wheel(folder: Path, name: str, members: list[tuple[str, bytes]]) -> tuple[Path, int]:
    path = folder / f"{name.replace(' ', '_')}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for member, data in members:
            zf.writestr(member, data)
    return path, sum(len(d) for _, d in members)


def _binary_bytes(wheel: Path) -> int:
    total = 0
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            binary = info.filename.endswith((".so", ".a", ".o")) or ".so." in info.filename
            if binary and info.file_size >= 64:
                total += info.file_size
    return total


def _scan_seconds(wheel: Path) -> float:
    return _scan(wheel)[0]


def _scan(wheel: Path) -> tuple[float, InputInventory]:
    from archwheel.binary.scan.inputs import scan_path

    start = time.perf_counter()
    inventory = scan_path(wheel, workers=1)
    return time.perf_counter() - start, inventory


def _floor_seconds(inventory: InputInventory) -> float:
    """What only making the returned objects costs: every entry, container and library built
    again from its fields, no byte read or checked. No scan returning them can cost less."""
    start = time.perf_counter()
    for lib in inventory.libraries:
        entries = tuple(
            FatbinEntry(e.section, e.offset, e.kind, e.target, e.compression, e.stored_bytes,
                        e.uncompressed_bytes, e.ptx_isa, e.flags)
            for e in lib.entries
        )  # fmt: skip
        containers = tuple(
            FatbinContainer(c.section, c.offset, c.size, c.entries) for c in lib.containers
        )
        LibraryInventory(lib.path, lib.file_kind, lib.size, entries, containers)
    return time.perf_counter() - start


def reference(quick: bool) -> Path:
    wheels = CACHE / "wheels"
    pattern = "torchvision-*.whl" if quick else "torch-2.14.1*.whl"
    found = sorted(wheels.glob(pattern))
    if not found:
        raise SystemExit(f"no {pattern} in {wheels}: fetch it first (bench audit does)")
    return found[-1]


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    ref = reference(quick)
    ref_mib = _binary_bytes(ref) / MIB
    ref_s = _scan_seconds(ref)
    ref_per_mib = ref_s / ref_mib
    print(f"reference {ref.name}: {ref_mib:.0f} MiB of binaries in {ref_s:.2f} s "
          f"= {1000 * ref_per_mib:.2f} ms/MiB")  # fmt: skip
    results: dict[str, dict[str, float]] = {}
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="archwheel-bench-") as box:
        for name, make in cases().items():
            wheel, size = _wheel(Path(box), name, make())
            seconds, inventory = _scan(wheel)
            per_mib = seconds / (size / MIB)
            ratio = per_mib / ref_per_mib
            floor = _floor_seconds(inventory) / (size / MIB) / ref_per_mib
            worst = max(worst, ratio)
            results[name] = {
                "mib": size / MIB,
                "seconds": seconds,
                "ratio": ratio,
                "objects_only_ratio": floor,
            }
            print(f"{name:22} {size / MIB:7.1f} MiB {seconds:7.2f} s "
                  f"{1000 * per_mib:8.2f} ms/MiB  {ratio:6.1f}x the reference "
                  f"(making the returned objects alone: {floor:5.1f}x)")  # fmt: skip
            wheel.unlink()
    out = CACHE / "bench" / "hostile.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    document = {"reference": ref.name, "ms_per_mib": 1000 * ref_per_mib, "cases": results}
    out.write_text(json.dumps(document, indent=2) + "\n")
    ok = worst <= TARGET_RATIO
    print(f"worst case {worst:.1f}x the reference (target <= {TARGET_RATIO:.0f}x): "
          f"{'OK' if ok else 'ABOVE TARGET'}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
