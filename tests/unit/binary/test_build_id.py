"""The build-id of a stripped library (binary/build_id.py, wheelbuild/wheel/restamp.py), on real
shared libraries linked here by gcc: two links of the same code whose debug information
differs (as a compile farm's objects can) carry different linker ids even after
``strip --strip-debug``; restamped, they are the same file, and the id is the file's own."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from archwheel.binary.build_id import build_id_span, content_id
from archwheel.wheelbuild.wheel.restamp import restamp_build_id
from tests.support.components import require

SOURCE = "int twice(int x) { return 2 * x; }\nint thrice(int x) { return 3 * x; }\n"


def _tool(name: str) -> str:
    found = shutil.which(name)
    require(found is not None, f"{name} is not installed (binutils, gcc)")
    assert found is not None
    return found


def _library(folder: Path, name: str, *flags: str) -> Path:
    """``SOURCE`` compiled with ``-g`` in ``folder`` and linked into a shared library."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "m.c").write_text(SOURCE)
    out = folder / name
    subprocess.run([_tool("gcc"), "-g", "-O2", "-fPIC", "-shared", *flags, "m.c", "-o", name],
                   cwd=folder, check=True)  # fmt: skip
    return out


def _linker_id(path: Path) -> str:
    shown = subprocess.run([_tool("readelf"), "-n", str(path)], capture_output=True, text=True,
                           check=True).stdout  # fmt: skip
    return shown.split("Build ID: ", 1)[1].split()[0]


def _strip(path: Path) -> None:
    subprocess.run([_tool("strip"), "--strip-debug", str(path)], check=True)


def test_equal_stripped_libraries_get_equal_files(tmp_path: Path) -> None:
    # The same code compiled in two folders: the debug information names each folder.
    a = _library(tmp_path / "one", "a.so")
    b = _library(tmp_path / "two-longer-folder", "a.so")
    assert _linker_id(a) != _linker_id(b)
    _strip(a)
    _strip(b)
    assert a.read_bytes() != b.read_bytes() and _linker_id(a) != _linker_id(b)
    assert restamp_build_id(a) and restamp_build_id(b)
    assert a.read_bytes() == b.read_bytes()
    # The id is the file's own: SHA-1 of its bytes with the id read as zeros; again the same.
    span = build_id_span(a)
    assert span is not None and span[1] == 20
    data = bytearray(a.read_bytes())
    assert _linker_id(a) == data[span[0] : span[0] + 20].hex()
    data[span[0] : span[0] + 20] = bytes(20)
    assert bytes.fromhex(_linker_id(a)) == hashlib.sha1(bytes(data)).digest()
    before = a.read_bytes()
    assert restamp_build_id(a) and a.read_bytes() == before  # stable


def test_content_id_reads_the_id_as_zeros_across_chunks(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    data = bytes(range(256)) * 9000  # more than one chunk
    path.write_bytes(data)
    for span in ((10, 20), ((1 << 20) - 7, 20), ((1 << 20) - 3, 16)):
        zeroed = bytearray(data)
        zeroed[span[0] : span[0] + span[1]] = bytes(span[1])
        with path.open("rb") as f:
            got = content_id(f, span)
        want = (
            hashlib.sha1(bytes(zeroed)).digest()
            if span[1] == 20
            else hashlib.blake2b(bytes(zeroed), digest_size=span[1]).digest()
        )
        assert got == want, span


def test_a_library_without_an_id_and_other_files_are_left_alone(tmp_path: Path) -> None:
    bare = _library(tmp_path / "bare", "b.so", "-Wl,--build-id=none")
    before = bare.read_bytes()
    assert build_id_span(bare) is None and not restamp_build_id(bare)
    assert bare.read_bytes() == before
    text = tmp_path / "t.txt"
    text.write_text("not an ELF file")
    assert build_id_span(text) is None and not restamp_build_id(text)


@pytest.mark.parametrize("descsz", [0, 21, 1000, 0xFFFFFFFF])
def test_a_lying_note_is_no_id(tmp_path: Path, descsz: int) -> None:
    """A note section whose sizes run past its end names no id (nothing read out of bounds)."""
    lib = _library(tmp_path / "n", "n.so")
    span = build_id_span(lib)
    assert span is not None
    data = bytearray(lib.read_bytes())
    note_start = span[0] - 16  # namesz, descsz, type, "GNU\0"
    data[note_start + 4 : note_start + 8] = descsz.to_bytes(4, "little")  # descsz lies
    lib.write_bytes(bytes(data))
    assert build_id_span(lib) is None
    assert not restamp_build_id(lib) and lib.read_bytes() == bytes(data)
