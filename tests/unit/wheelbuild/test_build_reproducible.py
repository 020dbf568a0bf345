"""Reproducible wheels: the deterministic re-pack and the comparison (nvcc's own determinism is in
tests/integration/nvcc/test_build_reproducible.py).
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import pytest

from archwheel.effects.files import sha256_file
from archwheel.errors import BuildError, InputError
from archwheel.wheelbuild.wheel.reproducible import compare_wheels, repack_wheel

MEMBERS = {
    "pkg/__init__.py": b"print('hi')\n",
    "pkg/_kernels.so": b"\x7fELF" + bytes(range(256)) * 64,
    "pkg/data/table.bin": b"\x00" * 1000,
    "pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n",
    "pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nTag: py3-none-linux_x86_64\n",
    "pkg-1.0.dist-info/RECORD": b"stale,,\n",
}


def make_wheel(path: Path, order: list[str], when: tuple[int, ...], mode: int) -> Path:
    """A wheel as a careless backend writes it: given order, timestamps and permissions."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in order:
            info = zipfile.ZipInfo(name, date_time=when)  # type: ignore[arg-type]
            info.external_attr = (mode | (0o111 if name.endswith(".so") else 0)) << 16
            archive.writestr(info, MEMBERS[name])
    return path


def test_repack_is_deterministic_whatever_the_input_order_time_and_umask(tmp_path: Path) -> None:
    names = list(MEMBERS)
    a = make_wheel(tmp_path / "a.whl", names, (2024, 5, 1, 12, 0, 0), 0o100664)
    b = make_wheel(tmp_path / "b.whl", names[::-1], (2025, 1, 2, 3, 4, 6), 0o100600)
    out_a, out_b = tmp_path / "out-a.whl", tmp_path / "out-b.whl"
    repack_wheel(a, out_a, 1_700_000_000)
    repack_wheel(b, out_b, 1_700_000_000)
    assert sha256_file(out_a) == sha256_file(out_b)
    assert sha256_file(a) != sha256_file(b)  # the inputs really did differ
    repack_wheel(out_a, tmp_path / "again.whl", 1_700_000_000)
    assert sha256_file(tmp_path / "again.whl") == sha256_file(out_a)  # idempotent


def test_repack_layout_timestamps_permissions_and_record(tmp_path: Path) -> None:
    source = make_wheel(tmp_path / "in.whl", list(MEMBERS)[::-1], (2030, 1, 1, 0, 0, 0), 0o100600)
    out = tmp_path / "out.whl"
    repack_wheel(source, out, 1_700_000_000)  # 2023-11-14 22:13:20 UTC
    with zipfile.ZipFile(out) as archive:
        infos = archive.infolist()
        names = [i.filename for i in infos]
        assert names == [
            "pkg/__init__.py",
            "pkg/_kernels.so",
            "pkg/data/table.bin",
            "pkg-1.0.dist-info/METADATA",
            "pkg-1.0.dist-info/WHEEL",
            "pkg-1.0.dist-info/RECORD",
        ]
        assert {i.date_time for i in infos} == {(2023, 11, 14, 22, 13, 20)}
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in infos}
        assert modes["pkg/_kernels.so"] == 0o755
        assert modes["pkg/__init__.py"] == 0o644
        record = archive.read("pkg-1.0.dist-info/RECORD").decode().splitlines()
        for name in names[:-1]:
            data = archive.read(name)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert f"{name},sha256={digest},{len(data)}" in record
            assert data == MEMBERS[name]  # contents are never changed
        assert record[-1] == "pkg-1.0.dist-info/RECORD,,"


def test_epoch_before_1980_is_clamped(tmp_path: Path) -> None:
    source = make_wheel(tmp_path / "in.whl", list(MEMBERS), (2024, 1, 1, 0, 0, 0), 0o100644)
    repack_wheel(source, tmp_path / "out.whl", 0)
    with zipfile.ZipFile(tmp_path / "out.whl") as archive:
        assert {i.date_time[0] for i in archive.infolist()} == {1980}


def test_compare_names_the_differing_members(tmp_path: Path) -> None:
    names = list(MEMBERS)
    first = make_wheel(tmp_path / "1.whl", names, (2024, 1, 1, 0, 0, 0), 0o100644)
    second = tmp_path / "2.whl"
    with zipfile.ZipFile(first) as a, zipfile.ZipFile(second, "w") as b:
        for info in a.infolist():
            data = a.read(info)
            if info.filename == "pkg/_kernels.so":
                data = data[:-1] + b"\x01"
            b.writestr(info, data)
    result = compare_wheels(first, second)
    assert not result.identical
    assert [(d.name, d.reason) for d in result.differences] == [("pkg/_kernels.so", "content")]
    assert "pkg/_kernels.so (content)" in result.summary()
    same = compare_wheels(first, first)
    assert same.identical
    assert same.summary().startswith("byte-identical")


def test_compare_reports_metadata_only_and_missing_members(tmp_path: Path) -> None:
    names = list(MEMBERS)
    first = make_wheel(tmp_path / "1.whl", names, (2024, 1, 1, 0, 0, 0), 0o100644)
    second = make_wheel(tmp_path / "2.whl", names[1:], (2024, 1, 1, 0, 0, 2), 0o100644)
    reasons = {d.name: d.reason for d in compare_wheels(first, second).differences}
    assert reasons["pkg/__init__.py"] == "only in first"
    assert reasons["pkg-1.0.dist-info/METADATA"] == "metadata"


def test_unsafe_or_broken_wheels_are_refused(tmp_path: Path) -> None:
    evil = tmp_path / "evil.whl"
    with zipfile.ZipFile(evil, "w") as archive:
        archive.writestr("../escape.py", b"")
        archive.writestr("pkg-1.0.dist-info/WHEEL", b"")
    with pytest.raises(InputError, match="unsafe member name"):
        repack_wheel(evil, tmp_path / "out.whl", 0)
    junk = tmp_path / "junk.whl"
    junk.write_bytes(b"PK\x03\x04 broken")
    with pytest.raises(BuildError, match="unreadable wheel"):
        repack_wheel(junk, tmp_path / "out.whl", 0)
    no_dist_info = tmp_path / "plain.whl"
    with zipfile.ZipFile(no_dist_info, "w") as archive:
        archive.writestr("pkg/__init__.py", b"")
    with pytest.raises(BuildError, match=r"no single \.dist-info"):
        repack_wheel(no_dist_info, tmp_path / "out.whl", 0)
