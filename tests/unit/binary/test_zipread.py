"""Hostile and damaged zips: every defect is one message; the rest of the wheel is reported."""

from __future__ import annotations

import hashlib
import os
import struct
import zipfile
from pathlib import Path
from typing import Any

import pytest

from archwheel.binary.model import Severity
from archwheel.binary.scan import pool as scan_module
from archwheel.binary.scan.inputs import scan_path
from archwheel.binary.zipmember import MemberError, member_chunks
from archwheel.binary.zipread import WheelReader, unsafe_name_reason
from archwheel.errors import InputError
from tests.support.builders import Entry, container, elf64, with_zip_flags, write_zip

LIB = elf64([(".nv_fatbin", container(Entry(sm=90)))])


@pytest.mark.parametrize(
    ("name", "unsafe"),
    [
        ("torch/lib/libx.so", False),
        ("../evil.so", True),
        ("a/../../evil.so", True),
        ("/etc/evil.so", True),
        ("C:evil.so", True),
        ("\\evil.so", True),
        ("a/b..c.so", False),
    ],
)
def test_unsafe_names(name: str, unsafe: bool) -> None:
    assert (unsafe_name_reason(name) is not None) is unsafe


def test_hostile_member_names_are_reported_not_read(tmp_path: Path) -> None:
    wheel = write_zip(
        tmp_path / "x-1.0-py3-none-any.whl",
        [("pkg/libgood.so", LIB), ("../evil.so", LIB), ("/abs/evil.so", LIB)],
    )
    inv = scan_path(wheel)
    assert [lib.path for lib in inv.device_libraries] == ["pkg/libgood.so"]
    assert sorted(p.member or "" for p in inv.problems) == ["../evil.so", "/abs/evil.so"]
    assert not inv.complete
    assert list(tmp_path.iterdir()) == [wheel]  # nothing written anywhere


def test_crc_mismatch(tmp_path: Path) -> None:
    wheel = write_zip(tmp_path / "x.whl", [("pkg/liba.so", LIB), ("pkg/libb.so", LIB)], stored=True)
    data = bytearray(wheel.read_bytes())
    first = data.find(b"\x7fELF")
    data[first + 200] ^= 0xFF  # inside liba.so's bytes, stored uncompressed
    wheel.write_bytes(bytes(data))
    inv = scan_path(wheel)
    crc = [p for p in inv.problems if "CRC mismatch" in p.message]
    assert [p.member for p in crc] == ["pkg/liba.so"]
    assert "pkg/libb.so" in [lib.path for lib in inv.device_libraries]


def _patch_sizes(path: Path, member: str, new_size: int) -> None:
    """Make the directory and local header lie about a member's uncompressed size."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    struct.pack_into("<I", data, info.header_offset + 22, new_size)
    cd = data.find(b"PK\x01\x02")
    while cd >= 0:
        name_len = struct.unpack_from("<H", data, cd + 28)[0]
        if data[cd + 46 : cd + 46 + name_len].decode() == member:
            struct.pack_into("<I", data, cd + 24, new_size)
        cd = data.find(b"PK\x01\x02", cd + 4)
    path.write_bytes(bytes(data))


def test_zip_bomb_declared_size_lies(tmp_path: Path) -> None:
    big = LIB + b"\0" * (8 << 20)
    wheel = write_zip(tmp_path / "x.whl", [("pkg/bomb.so", big), ("pkg/ok.so", LIB)])
    _patch_sizes(wheel, "pkg/bomb.so", 5000)
    inv = scan_path(wheel)
    bomb = [p for p in inv.problems if p.member == "pkg/bomb.so"]
    assert len(bomb) == 1 and "inflates past its declared size of 5000 bytes" in bomb[0].message
    assert any(lib.path == "pkg/ok.so" for lib in inv.device_libraries)


def test_absurd_declared_size_is_refused(tmp_path: Path) -> None:
    wheel = write_zip(tmp_path / "x.whl", [("pkg/a.so", LIB)])
    reader = WheelReader(wheel, max_member_bytes=100)
    with pytest.raises(MemberError, match="above the limit of 100"):
        list(reader.chunks(reader.members[0]))


def test_truncated_wheel_is_one_clear_error(tmp_path: Path) -> None:
    wheel = write_zip(tmp_path / "x.whl", [("pkg/a.so", LIB + os.urandom(100_000))])
    wheel.write_bytes(wheel.read_bytes()[:50_000])
    with pytest.raises(InputError) as info:
        scan_path(wheel)
    assert "not a readable zip archive" in info.value.one_line()


def test_member_data_past_end_of_archive(tmp_path: Path) -> None:
    wheel = write_zip(tmp_path / "x.whl", [("pkg/a.so", LIB), ("pkg/b.so", LIB)], stored=True)
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("pkg/b.so")
    data = bytearray(wheel.read_bytes())
    cd = data.rfind(b"PK\x01\x02")  # the last directory entry is pkg/b.so
    struct.pack_into("<I", data, cd + 20, 10_000_000)  # compressed size
    struct.pack_into("<I", data, info.header_offset + 18, 10_000_000)
    wheel.write_bytes(bytes(data))
    inv = scan_path(wheel)
    assert any(p.member == "pkg/b.so" and "truncated" in p.message for p in inv.problems)
    assert [lib.path for lib in inv.device_libraries] == ["pkg/a.so"]


def test_unsupported_method(tmp_path: Path) -> None:
    wheel = tmp_path / "x.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_BZIP2) as zf:
        zf.writestr("pkg/a.so", LIB)
    inv = scan_path(wheel)
    assert [p.message for p in inv.problems] == ["unsupported compression method 12"]
    assert inv.problems[0].severity is Severity.ERROR


@pytest.mark.parametrize(
    ("bit", "words"),
    [
        (0x1, "encrypted member (no installer can read it)"),
        (0x40, "encrypted member (no installer can read it)"),
        (0x20, "compressed patched data (zip flag bit 5: no installer can read it)"),
    ],
)
def test_members_flagged_as_no_installer_reads_them_are_not_read(
    tmp_path: Path, bit: int, words: str
) -> None:
    """pip's zipfile refuses an encrypted or patched member; the audit read its bytes as plain
    and could say OK of a wheel that does not install (or read ciphertext as device code)."""
    wheel = tmp_path / "x-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pkg/a.so", LIB)
    inv = scan_path(with_zip_flags(wheel, bit))
    assert [p.message for p in inv.problems] == [f"{words}; member not read"]
    assert inv.problems[0].member == "pkg/a.so" and not inv.libraries


def test_duplicate_members(tmp_path: Path) -> None:
    wheel = tmp_path / "x.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("pkg/a.so", LIB)
        with pytest.warns(UserWarning, match="Duplicate name"):
            zf.writestr("pkg/a.so", LIB)
    inv = scan_path(wheel)
    assert any("duplicate member name" in p.message for p in inv.problems)
    assert len(inv.device_libraries) == 1


def test_text_members_are_skipped_unless_asked(tmp_path: Path) -> None:
    wheel = write_zip(tmp_path / "x.whl", [("pkg/disguised.py", LIB), ("pkg/lib.so", LIB)])
    assert [lib.path for lib in scan_path(wheel).device_libraries] == ["pkg/lib.so"]
    everything = scan_path(wheel, all_members=True)
    assert sorted(lib.path for lib in everything.device_libraries) == [
        "pkg/disguised.py",
        "pkg/lib.so",
    ]


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "spawned"])
def test_worker_processes_and_serial_scan_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fork: bool
) -> None:
    members = [(f"pkg/lib{i}.so", elf64([(".nv_fatbin", container(Entry(sm=80 + i)))]))
               for i in range(6)]  # fmt: skip
    members.append(("pkg/broken.so", LIB[:300]))
    wheel = write_zip(tmp_path / "x.whl", members)
    one = scan_path(wheel, workers=1)
    monkeypatch.setattr(scan_module, "PARALLEL_MIN_COMPRESSED", 0)  # every member to a worker
    monkeypatch.setattr(scan_module, "FORK_WORKERS", fork)
    started: list[str] = []
    real_start = scan_module._start_worker

    def counting_start(*args: Any, **named: Any) -> Any:
        worker = real_start(*args, **named)
        started.append(type(worker).__name__)
        return worker

    monkeypatch.setattr(scan_module, "_start_worker", counting_start)
    three = scan_path(wheel, workers=3)
    assert started  # worker processes really ran
    assert set(started) == {"_ForkedWorker" if fork else "_SpawnedWorker"}
    assert one.libraries == three.libraries
    # Hashed as they are inflated, in this process and in the workers alike: every binary
    # member read whole (the truncated ELF too: its member's bytes are all there).
    expected = {name: hashlib.sha256(data).hexdigest() for name, data in members}
    assert scan_path(wheel, workers=1, digests=True).member_digests == expected
    assert scan_path(wheel, workers=3, digests=True).member_digests == expected
    assert three.member_digests == {}  # only when asked
    assert one.problems == three.problems
    assert one.problems  # the truncated member is reported either way


def _compressible(size: int, seed: int) -> bytes:
    """Bytes like a patched shared library: mostly zeros, a small alphabet (about 7:1)."""
    import random

    rng = random.Random(seed)
    sparse = bytes(b if b < 16 else 0 for b in range(256))
    return rng.randbytes(size).translate(sparse)


@pytest.mark.parametrize("level", [1, 6, 9])
def test_members_deflated_by_zlib_at_any_level_read_back_whole(tmp_path: Path, level: int) -> None:
    # Real zlib output (zipfile) at the levels wheels are written with. Sizes around the first
    # output cap (64 KiB) with the whole compressed member inside the first read (16 KiB) are
    # where an inflater that has taken all input but not yet produced all output must be
    # drained, not taken for truncated (a patched libshm.so of torch 2.14.1 at level 6 failed).
    payloads = {f"lib/m{i}.so": _compressible(size, i) for i, size in enumerate(
        [60_000, 65_536, 66_000, 67_753, 70_000, 90_000, 131_072, 300_000, 5_000_000]
    )}  # fmt: skip
    path = tmp_path / f"level{level}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=level) as zf:
        for name, data in payloads.items():
            zf.writestr(name, data)
    reader = WheelReader(path)
    small = [m for m in reader.members if m.compressed_size < 16 << 10 and m.size > 64 << 10]
    assert small  # the case above is among them
    for member in reader.members:
        data = b"".join(member_chunks(path, reader.archive_size, member))
        assert data == payloads[member.name], member.name


@pytest.mark.parametrize("stored", [False, True])
def test_a_mapped_read_gives_what_pread_gives(
    tmp_path: Path, stored: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forked workers read the compressed bytes through a memory map (``mapped``): the
    same chunks, the same errors, and the pages read are let go of on the way."""
    from archwheel.binary import zipmember

    monkeypatch.setattr(zipmember._Mapped, "RELEASE_EVERY", 64 << 10)  # released many times
    released: list[int] = []
    real_call = zipmember._Mapped.__call__

    def watched(self: Any, size: int, at: int) -> memoryview:
        view = real_call(self, size, at)
        released.append(self._released)
        return view

    monkeypatch.setattr(zipmember._Mapped, "__call__", watched)
    payloads = {"lib/small.so": _compressible(70_000, 1), "lib/big.so": os.urandom(3_000_000)}
    path = write_zip(tmp_path / "m.whl", list(payloads.items()), stored=stored)
    reader = WheelReader(path)
    for member in reader.members:
        plain = list(member_chunks(path, reader.archive_size, member))
        mapped = list(member_chunks(path, reader.archive_size, member, mapped=True))
        assert all(type(chunk) is bytes for chunk in mapped)
        assert b"".join(mapped) == b"".join(plain) == payloads[member.name]
    if not stored:  # only a deflated member's input is read through the map
        assert max(released) > 1 << 20
    # Cut short before it is read (the directory still says otherwise): the same error.
    big = max(reader.members, key=lambda m: m.size)
    with path.open("r+b") as fh:
        fh.truncate(big.header_offset + 200_000)
    errors = []
    for mapped_read in (False, True):
        with pytest.raises(MemberError) as info:
            list(member_chunks(path, reader.archive_size, big, mapped=mapped_read))
        errors.append(str(info.value))
    assert errors[0] == errors[1]
    assert "truncated" in errors[0]


@pytest.mark.parametrize("level", [1, 6, 9])
def test_read_wheel_dynamic_reads_a_library_deflated_at_any_level(
    tmp_path: Path, level: int
) -> None:
    from archwheel.binary.dynamic_wheel import read_wheel_dynamic

    lib = elf64([(".data", _compressible(67_000, 7))])
    path = tmp_path / f"level{level}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=level) as zf:
        zf.writestr("pkg/libx.so", lib)
    (info,) = read_wheel_dynamic(path)
    assert info.file_kind != "unreadable", info.problems
    assert not any("deflate" in p for p in info.problems), info.problems


# -- small members, read in one go (zipmember.small_member) -----------------------------------------


def _small(path: Path, member: Any) -> tuple[bytes | None, bytes | str]:
    """small_member's answer, and what member_chunks reads (its bytes, or its error)."""
    from archwheel.binary.zipmember import small_member

    size = path.stat().st_size
    fd = os.open(path, os.O_RDONLY)
    try:
        quick = small_member(fd, size, member)
    finally:
        os.close(fd)
    try:
        full: bytes | str = b"".join(member_chunks(path, size, member))
    except MemberError as exc:
        full = str(exc)
    return quick, full


@pytest.mark.parametrize("stored", [False, True])
def test_a_regular_small_member_is_read_in_one_go(tmp_path: Path, stored: bool) -> None:
    wheel = write_zip(
        tmp_path / "w.whl", [("pkg/lib.so", LIB), ("pkg/b.so", LIB * 3)], stored=stored
    )
    for member in WheelReader(wheel).members:
        quick, full = _small(wheel, member)
        assert quick == full and isinstance(quick, bytes) and len(quick) == member.size


@pytest.mark.parametrize(
    "change",
    [
        {"crc": 0x12345678},  # the directory's CRC: the bytes do not match it
        {"header_name": "pkg/other.so"},  # the local header names another file
        {"size": len(LIB) - 1},  # inflates past its declared size
        {"size": len(LIB) + 1},  # inflates to fewer bytes than declared
        {"compressed_size": 20},  # the deflate stream does not end in its bytes
        {"header_offset": 7},  # no local header there
        {"method": 12},  # bzip2: not read here
    ],
)
def test_an_irregular_small_member_is_left_to_member_chunks(
    tmp_path: Path, change: dict[str, Any]
) -> None:

    wheel = write_zip(tmp_path / "w.whl", [("pkg/lib.so", LIB)])
    (member,) = WheelReader(wheel).members
    quick, full = _small(wheel, member._replace(**change))
    assert quick is None
    assert isinstance(full, str)  # member_chunks says what is wrong, as before


def test_a_small_member_past_the_archive_end_or_with_a_long_extra_is_left(tmp_path: Path) -> None:
    wheel = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        info = zipfile.ZipInfo("pkg/lib.so")
        info.extra = struct.pack("<HH", 0xCAFE, 1000) + b"x" * 1000  # past the read slack
        zf.writestr(info, LIB, compress_type=zipfile.ZIP_DEFLATED)
    (member,) = WheelReader(wheel).members
    quick, full = _small(wheel, member)
    assert quick is None and full == LIB  # regular, read the long way
    scan = scan_path(wheel, workers=1)
    assert scan.complete and len(scan.libraries) == 1
