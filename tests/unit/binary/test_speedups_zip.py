"""The compiled zip readers (``binary/_speedups.c``) against the Python paths they accelerate.

``plain_directory`` reads a zip's central directory in place of ``zipfile`` and
``WheelReader``'s checks, and ``scan_members`` reads, inflates and scans small members in place
of ``zipmember.small_member`` and ``scan_stream``. Each must answer only where the Python path
would find nothing wrong, and then answer exactly what it says; anything else it leaves (None).
Checked here on generated archives of the shapes wheels take, on irregular ones, and on
mutants of both (their directories, local headers and data), and in
tests/integration/realwheel on the real wheels.
"""

from __future__ import annotations

import struct
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from archwheel.binary import speedups, zipmember, zipread
from archwheel.binary.scan import bounds
from archwheel.binary.scan.binary import MemberResult, scan_member, scan_small_members
from archwheel.binary.zipmember import Member
from archwheel.binary.zipread import WheelReader
from archwheel.errors import InputError
from tests.support.builders import Entry, ar_archive, container, elf64
from tests.support.fuzz import FUZZ_SETTINGS, Mutant, Seed, mutated

pytestmark = pytest.mark.skipif(
    speedups.COMPILED is None, reason="ARCHWHEEL_PURE_PYTHON is set: the Python paths alone"
)

LIBRARY = elf64([(".nv_fatbin", container(Entry(sm=80), Entry(kind=1, sm=90)))])
ARCHIVE = ar_archive([("a.o", LIBRARY), ("notes.txt", b"not an object")])
DAMAGED = elf64([(".nv_fatbin", container(Entry(marker=0x0202)))])
RAW_FATBIN = container(Entry(sm=86))
TIMESTAMP = struct.pack("<HHB", 0x5455, 5, 1) + struct.pack("<I", 1_700_000_000)

# Members of every kind a wheel holds: a library, an archive, damaged device code (the Python
# scan reports it), a raw fatbin (only the Python scan reads one), no binary at all.
MEMBERS = {
    "pkg/libone.so": LIBRARY,
    "pkg/libtwo.a": ARCHIVE,
    "pkg/libdamaged.so": DAMAGED,
    "pkg/kernels.fatbin": RAW_FATBIN,
    "pkg/data.bin": b"\x00\x01 no binary here" * 8,
    "pkg/empty.so": b"\x7fELF",
}


def _write(path: Path, members: dict[str, bytes], *, stored: tuple[str, ...] = (),
           extra: bytes = b"", folders: tuple[str, ...] = ()) -> Path:  # fmt: skip
    with zipfile.ZipFile(path, "w") as zf:
        for folder in folders:
            zf.writestr(zipfile.ZipInfo(folder), b"")
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED if name in stored else zipfile.ZIP_DEFLATED
            info.extra = extra
            zf.writestr(info, data)
    return path


@contextmanager
def _python_only() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(speedups, "COMPILED", None)
        yield


def _said(result: MemberResult) -> object:
    scan, error = result
    if scan is None:
        return (None, error)
    return (scan.libraries, sorted(scan.notes, key=repr), scan.bytes_read, scan.sha256, error)


def _batch(path: Path, members: list[Member]) -> list[object]:
    with path.open("rb") as fh:
        found = scan_small_members(path, path.stat().st_size, members, None, handle=fh)
    return [_said(r) for r in found]


def _one_by_one(path: Path, members: list[Member]) -> list[object]:
    """The reference: each member read and scanned by the Python path alone."""
    with _python_only(), path.open("rb") as fh:
        size = path.stat().st_size
        return [_said(scan_member(path, size, m, None, handle=fh)) for m in members]


def _answers(path: Path, members: list[Member]) -> list[Any]:
    with path.open("rb") as fh:
        found = speedups.scan_members(
            fh.fileno(),
            path.stat().st_size,
            members,
            small_max=zipmember.SMALL_MEMBER,
            slack=zipmember.LOCAL_SLACK,
            bounds=bounds.compiled_bounds(),
        )
    assert found is not None
    return found


# -- small members: read, inflated and scanned in one call --------------------------------------


@pytest.mark.parametrize("stored", [False, True])
def test_small_members_are_scanned_as_one_by_one(tmp_path: Path, stored: bool) -> None:
    path = _write(tmp_path / "w.whl", MEMBERS, stored=tuple(MEMBERS) if stored else ())
    members = WheelReader(path).members
    assert _batch(path, members) == _one_by_one(path, members)
    answers = dict(zip((m.name for m in members), _answers(path, members), strict=True))
    # Read and scanned in C: the library and the archive; read in C, scanned in Python: the
    # damaged library, the raw fatbin; read in C, no binary: the data.
    assert isinstance(answers["pkg/libone.so"], list) and answers["pkg/libone.so"]
    assert isinstance(answers["pkg/libtwo.a"], list)
    assert answers["pkg/libdamaged.so"] == DAMAGED
    assert answers["pkg/kernels.fatbin"] == RAW_FATBIN
    assert answers["pkg/data.bin"] is False


def _patched(path: Path, at: int, value: bytes) -> None:
    data = bytearray(path.read_bytes())
    data[at : at + len(value)] = value
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage",
    ["crc", "local name", "local signature", "data", "truncated", "method", "sizes"],
)
def test_an_irregular_member_is_left_and_reported_as_before(tmp_path: Path, damage: str) -> None:
    path = _write(tmp_path / "w.whl", {"pkg/liba.so": LIBRARY, "pkg/libb.so": LIBRARY})
    members = WheelReader(path).members
    first = members[0]
    if damage == "crc":
        members[0] = first._replace(crc=first.crc ^ 1)
    elif damage == "local name":
        _patched(path, first.header_offset + 30, b"q")
    elif damage == "local signature":
        _patched(path, first.header_offset, b"PK\x09\x09")
    elif damage == "data":
        _patched(path, first.header_offset + 30 + len(first.name), b"\xff\xff\xff")
    elif damage == "truncated":
        members[0] = first._replace(compressed_size=first.compressed_size + 5000)
    elif damage == "method":
        members[0] = first._replace(method=12)
    else:
        members[0] = first._replace(size=first.size - 1)
    answers = _answers(path, members)
    assert answers[0] is None and isinstance(answers[1], list)
    said = _batch(path, members)
    assert said == _one_by_one(path, members)
    assert said[0] != said[1]  # the damage is reported (or the member not read), not hidden


def test_a_big_member_or_an_unreadable_handle_is_left(tmp_path: Path) -> None:
    big = elf64([(".nv_fatbin", container(Entry(sm=80, payload=b"\0" * (80 << 10))))])
    path = _write(tmp_path / "w.whl", {"pkg/big.so": big})
    members = WheelReader(path).members
    assert _answers(path, members) == [None]
    assert _batch(path, members) == _one_by_one(path, members)
    with pytest.raises(TypeError):
        speedups.scan_members(
            -1,
            1,
            [("x", 1)],  # type: ignore[list-item]
            small_max=1,
            slack=1,
            bounds=bounds.compiled_bounds(),
        )


def _zip_seeds() -> list[Seed]:
    seeds = []
    for stored in (False, True):
        with tempfile.TemporaryDirectory() as box:
            path = _write(Path(box) / "w.whl", MEMBERS, stored=tuple(MEMBERS) if stored else ())
            data = path.read_bytes()
        seeds.append(Seed(f"stored={stored}", data, _zip_anchors(data)))
    return seeds


def _zip_anchors(data: bytes) -> tuple[int, ...]:
    found = {0, len(data) - 1}
    for magic in (b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07"):
        at = data.find(magic)
        while at >= 0:
            found.update((at, at + 26, at + 30))
            at = data.find(magic, at + 1)
    return tuple(sorted(p for p in found if p < len(data)))


ZIP_SEEDS = _zip_seeds()


@FUZZ_SETTINGS
@given(mutant=mutated(ZIP_SEEDS))
def test_mutated_archives_give_the_same_member_scans(mutant: Mutant) -> None:
    """Local headers and data mutated (the members as the unmutated directory lists them)."""
    original = next(s for s in ZIP_SEEDS if s.name == mutant.name)
    with tempfile.TemporaryDirectory() as box:
        path = Path(box) / "w.whl"
        path.write_bytes(original.data)
        members = WheelReader(path).members
        path.write_bytes(mutant.data)
        assert _batch(path, members) == _one_by_one(path, members)


# -- the central directory -------------------------------------------------------------------


def _read(path: Path) -> object:
    """What WheelReader makes of an archive: its members and problems, or its error."""
    try:
        reader = WheelReader(path)
    except InputError as exc:
        return str(exc)
    return (reader.members, reader.name_problems)


def _read_with_zipfile(path: Path) -> object:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(zipread, "plain_directory", lambda *_: None)
        return _read(path)


def _plain(path: Path) -> bool:
    with path.open("rb") as fh:
        return zipread.plain_directory(fh, path.stat().st_size, path) is not None


CLEAN_ARCHIVES = {
    "deflated": {},
    "stored": {"stored": tuple(MEMBERS)},
    "folders": {"folders": ("pkg/", "pkg/sub/")},
    "timestamps": {"extra": TIMESTAMP},
    "other extra fields": {"extra": struct.pack("<HH", 0xD935, 4) + b"\0" * 4 + TIMESTAMP},
    "zip64 end record": {},
    "comment": {},
    "prefixed": {},
    "utf-8 names": {},
    "cp437 names": {},
}
NON_ASCII = {f"pkg/lib{c}.so": LIBRARY for c in "é✓"} | {"pkg/data\u00b5.bin": b"\1" * 9}


def _clean(path: Path, name: str) -> Path:
    _write(path, NON_ASCII if "names" in name else MEMBERS, **CLEAN_ARCHIVES[name])  # type: ignore[arg-type]
    data = bytearray(path.read_bytes())
    if name == "zip64 end record":
        data = bytearray(_with_zip64_end(bytes(data)))
    elif name == "comment":
        struct.pack_into("<H", data, _end_at(bytes(data)) + 20, 5)
        data += b"hello"
    elif name == "prefixed":  # a self-extracting stub before the archive
        data = bytearray(b"#!/bin/sh\nexit 0\n") + data
    elif name == "cp437 names":  # the UTF-8 flag cleared: the same bytes read as cp437
        for magic, flag_at in ((b"PK\x01\x02", 8), (b"PK\x03\x04", 6)):
            at = data.find(magic)
            while at >= 0:
                struct.pack_into("<H", data, at + flag_at, 0)
                at = data.find(magic, at + 1)
    path.write_bytes(bytes(data))
    return path


def _with_zip64_end(data: bytes) -> bytes:
    """The archive with the end records zipfile writes past 65535 members (or 4 GiB): a zip64
    record and its locator, and the classic record's fields at their maximum."""
    end = _end_at(data)
    fields = struct.unpack_from("<4s4H2LH", data, end)
    entries, size, offset = fields[4], fields[5], fields[6]
    record = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries, size,
                         offset)  # fmt: skip
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, end, 1)
    classic = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF,
                          0xFFFFFFFF, 0)  # fmt: skip
    return data[:end] + record + locator + classic


@pytest.mark.parametrize("name", sorted(CLEAN_ARCHIVES))
def test_a_plain_directory_is_read_as_zipfile_reads_it(tmp_path: Path, name: str) -> None:
    path = _clean(tmp_path / "w.whl", name)
    assert _plain(path), f"{name}: left to zipfile"
    said = _read(path)
    assert said == _read_with_zipfile(path)
    names = [m.name for m in said[0]]  # type: ignore[index]
    if name == "cp437 names":
        names = [n.encode("cp437").decode("utf-8") for n in names]
    assert names == list(NON_ASCII if "names" in name else MEMBERS)


def _end_at(data: bytes) -> int:
    return data.rfind(b"PK\x05\x06")


def _central_at(data: bytes, index: int = 0) -> int:
    at = data.find(b"PK\x01\x02")
    for _ in range(index):
        at = data.find(b"PK\x01\x02", at + 1)
    return at


def _shape(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "w.whl"
    members = dict(MEMBERS)
    if name.startswith("unsafe name "):
        members = {name.removeprefix("unsafe name "): LIBRARY}
    elif name == "bad utf-8 name":
        _write(path, {"pkg/lib\u00e9.so": LIBRARY})
        raw = path.read_bytes()
        path.write_bytes(raw.replace("\u00e9".encode(), b"\xe9\xff"))
        return path
    elif name == "duplicate names":
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("pkg/a.so", LIBRARY)
            with pytest.warns(UserWarning, match="Duplicate name"):
                zf.writestr("pkg/a.so", LIBRARY)
        return path
    elif name == "zip64 extra":
        with zipfile.ZipFile(path, "w") as zf, zf.open("pkg/a.so", "w", force_zip64=True) as out:
            out.write(LIBRARY)
        data = bytearray(path.read_bytes())
        central = _central_at(bytes(data))
        struct.pack_into("<I", data, central + 20, 0xFFFFFFFF)
        path.write_bytes(bytes(data))
        return path
    elif name == "unicode path extra":  # 3.12 on: named by it; before: the field is skipped
        return _write(
            path, {"pkg/lib.so": LIBRARY}, extra=_unicode_path(b"pkg/lib.so", "pkg/lib\u00e9.so")
        )
    elif name == "malformed extra":
        return _write(path, MEMBERS, extra=struct.pack("<HH", 0x5455, 40) + b"x")
    elif name == "extra with a tail":
        return _write(path, MEMBERS, extra=TIMESTAMP + b"\0\0")
    _write(path, members)
    data = bytearray(path.read_bytes())
    end, central = _end_at(bytes(data)), _central_at(bytes(data))
    if name == "encrypted":
        struct.pack_into("<H", data, central + 8, 1)
    elif name == "a count that lies":  # zipfile reads by size; not plain
        struct.pack_into("<HH", data, end + 8, 2, 2)
    elif name == "version 7.0":
        data[central + 6] = 70
    elif name == "overlap":
        second = _central_at(bytes(data), 1)
        struct.pack_into("<I", data, second + 42, 10)
    elif name == "overlaps the directory":
        last = _central_at(bytes(data), len(MEMBERS) - 1)
        offset, names = struct.unpack_from("<I", data, last + 42)[0], data[last + 28]
        into = struct.unpack_from("<I", data, end + 16)[0] + 10  # 10 bytes into the directory
        struct.pack_into("<I", data, last + 20, into - offset - 30 - names)
    path.write_bytes(bytes(data))
    return path


LEFT_ARCHIVES = [
    "encrypted", "a count that lies", "version 7.0", "overlap", "overlaps the directory", "duplicate names",
    "zip64 extra", "malformed extra", "extra with a tail", "bad utf-8 name", "unsafe name ../evil.so",
    "unsafe name /abs.so", "unsafe name \\abs.so", "unsafe name C:x.so", "unsafe name é:x.so",
    "unsafe name a\\..\\b.so", "unsafe name a/../b.so", "unsafe name ..",
]  # fmt: skip


@pytest.mark.parametrize("name", LEFT_ARCHIVES)
def test_any_other_directory_is_left_to_zipfile(tmp_path: Path, name: str) -> None:
    path = _shape(tmp_path, name)
    assert not _plain(path), f"{name}: read as plain"
    assert _read(path) == _read_with_zipfile(path)


def test_a_user_s_unreadable_archive_is_an_input_error(tmp_path: Path) -> None:
    """An extract version zipfile does not implement, an empty member name: exit 3, not 4."""
    said = _read(_shape(tmp_path, "version 7.0"))
    assert isinstance(said, str) and "not a readable zip archive" in said and "7.0" in said
    path = tmp_path / "empty.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zipfile.ZipInfo(""), b"abcd")
    assert not _plain(path)
    said = _read(path)
    assert said == ([], [("", "empty member name; member not read")])


def test_the_directory_bounds_are_checked_as_open_zip_checks_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path / "w.whl", MEMBERS)
    for bound, value in [("MAX_ARCHIVE_MEMBERS", 3), ("MAX_DIRECTORY_BYTES", 100)]:
        with monkeypatch.context() as patch:
            patch.setattr(zipread, bound, value)
            said = _read(path)
            assert isinstance(said, str) and "limit" in said, bound
            assert said == _read_with_zipfile(path)
    monkeypatch.setattr(zipread, "INFLATION_FLOOR", 10)
    monkeypatch.setattr(zipread, "MAX_INFLATION_RATIO", 0)
    said = _read(path)
    assert isinstance(said, str) and "zip bomb" in said
    assert said == _read_with_zipfile(path)


def _directory_seeds() -> list[Seed]:
    seeds = []
    for name in CLEAN_ARCHIVES:
        with tempfile.TemporaryDirectory() as box:
            data = _clean(Path(box) / "w.whl", name).read_bytes()
        central = _central_at(data)
        seeds.append(Seed(name, data, tuple(p for p in _zip_anchors(data) if p >= central)))
    return seeds


DIRECTORY_SEEDS = _directory_seeds()


@FUZZ_SETTINGS
@given(mutant=mutated(DIRECTORY_SEEDS))
def test_mutated_directories_are_read_alike(mutant: Mutant) -> None:
    """Directory and end record mutated: the same members and problems, or the same error."""
    with tempfile.TemporaryDirectory() as box:
        path = Path(box) / "w.whl"
        path.write_bytes(mutant.data)
        assert _read(path) == _read_with_zipfile(path)


def test_an_empty_archive_holds_no_member_either_way(tmp_path: Path) -> None:
    path = tmp_path / "empty.whl"
    zipfile.ZipFile(path, "w").close()
    assert _plain(path)
    assert _read(path) == ([], []) == _read_with_zipfile(path)  # zipfile's way failed before


def _unicode_path(raw: bytes, name: str | bytes, version: int = 1) -> bytes:
    """An Info-ZIP Unicode Path extra field naming the member ``name`` (0x7075)."""
    text = name.encode() if isinstance(name, str) else name
    data = struct.pack("<BL", version, zlib.crc32(raw)) + text
    return struct.pack("<HH", 0x7075, len(data)) + data


def test_a_unicode_path_field_is_read_as_this_python_s_zipfile_reads_it(tmp_path: Path) -> None:
    path = _shape(tmp_path, "unicode path extra")
    assert _plain(path)
    said = _read(path)
    assert said == _read_with_zipfile(path)
    assert isinstance(said, tuple)
    member: Member = said[0][0]
    renames = zipread.READS_UNICODE_PATH
    assert member.name == ("pkg/lib\u00e9.so" if renames else "pkg/lib.so")
    assert member.header_name == "pkg/lib.so"
    assert _batch(path, [member]) == _one_by_one(path, [member])  # its local header names it


@pytest.mark.parametrize(
    ("field", "named"),
    [
        (_unicode_path(b"pkg/lib.so", "pkg/lib\u00e9.so"), "pkg/lib\u00e9.so"),
        (_unicode_path(b"pkg/lib.so", "pkg/x.so", version=2), "pkg/lib.so"),
        (_unicode_path(b"other", "pkg/x.so"), "pkg/lib.so"),  # not this name's CRC
        (_unicode_path(b"pkg/lib.so", "pkg/x.so") + _unicode_path(b"pkg/lib.so", "y"), "y"),
        (_unicode_path(b"pkg/lib.so", ""), None),  # zipfile warns
        (_unicode_path(b"pkg/lib.so", "a\0b"), None),  # zipfile cuts it
        (_unicode_path(b"pkg/lib.so", "../x.so"), None),  # unsafe
        (struct.pack("<HHB", 0x7075, 1, 1), None),  # zipfile: corrupt
        (_unicode_path(b"pkg/lib.so", b"\xff\xfe"), None),  # not UTF-8
    ],
)
def test_the_unicode_path_rules_of_zipfile_3_12(field: bytes, named: str | None) -> None:
    """Where zipfile renames by the field (3.12 on), whatever this interpreter's is."""
    with tempfile.TemporaryDirectory() as box:
        path = _write(Path(box) / "w.whl", {"pkg/lib.so": LIBRARY}, extra=field)
        data = path.read_bytes()
    end = _end_at(data)
    size, at = struct.unpack_from("<LL", data, end + 12)
    for unicode_path in (True, False):
        found = speedups.plain_directory(
            data[at : at + size], at, 0, len(data), Member, unicode_path=unicode_path, entries=1
        )
        if not unicode_path:
            assert found is not None and found[0][0].name == "pkg/lib.so"
        elif named is None:
            assert found is None
        else:
            assert found is not None and found[0][0].name == named
            assert found[0][0].header_name == "pkg/lib.so"
