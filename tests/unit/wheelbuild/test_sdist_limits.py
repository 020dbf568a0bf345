"""sdists cannot fill the disk or crash the build: a sparse 10 GB member in a
tiny tarball, too many members, members that conflict, ``file:///dev/zero`` and a missing
``file://`` sdist are each one ``InputError``, and nothing is left behind in the cache.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from archwheel.errors import InputError
from archwheel.wheelbuild.recipes.recipe_model import SourceSpec
from archwheel.wheelbuild.sources import source
from archwheel.wheelbuild.sources.source import resolve_source, safe_unpack
from tests.support.fuzz import watchdog


def _tar(path: Path, members: list[tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_tiny_tarball_declaring_a_huge_member_is_refused_before_writing(tmp_path: Path) -> None:
    info = tarfile.TarInfo("pkg/huge.bin")
    info.size = 10 << 30  # 10 GiB declared, no data behind it
    archive = tmp_path / "bomb.tar.gz"
    archive.write_bytes(gzip.compress(info.tobuf(format=tarfile.GNU_FORMAT) + b"\0" * 1024))
    assert archive.stat().st_size < 1024
    out = tmp_path / "out"
    out.mkdir()
    with watchdog(60), pytest.raises(InputError, match="unpacks to more than"):
        safe_unpack(archive, out)
    assert not (out / "pkg" / "huge.bin").exists()


def test_unpacked_bytes_are_added_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source, "MAX_UNPACKED_BYTES", 1000)
    archive = _tar(tmp_path / "two.tar.gz", [("p/a", b"a" * 600), ("p/b", b"b" * 600)])
    with pytest.raises(InputError, match="more than 1000 bytes"):
        safe_unpack(archive, tmp_path / "out")


def test_member_count_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source, "MAX_SDIST_MEMBERS", 10)
    archive = _tar(tmp_path / "many.tar.gz", [(f"p/{i}", b"") for i in range(20)])
    with pytest.raises(InputError, match="more than 10 members"):
        safe_unpack(archive, tmp_path / "out")


@pytest.mark.parametrize(
    "members",
    [
        [("p/a", b"file"), ("p/a/b", b"inside a file")],
        [("p/" + "n" * 300, b"name too long")],
        [("p/" + "/".join(["d"] * 3000) + "/f", b"too deep")],
    ],
)
def test_members_that_cannot_be_written_are_input_errors(
    tmp_path: Path, members: list[tuple[str, bytes]]
) -> None:
    archive = _tar(tmp_path / "conflict.tar.gz", members)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(InputError, match="cannot unpack"):
        safe_unpack(archive, out)


@pytest.mark.parametrize("location", ["file:///dev/zero", "file:///nonexistent/pkg-1.0.tar.gz"])
def test_special_or_missing_file_sdists_are_input_errors(tmp_path: Path, location: str) -> None:
    spec = SourceSpec("sdist", path=None, sdist=location, sha256="a" * 64)
    cache = tmp_path / "cache"
    with watchdog(60), pytest.raises(InputError, match="cannot read"):
        resolve_source(spec, cache, echo=None)
    assert [p.name for p in cache.rglob("*") if not p.is_dir()] == []  # no .part file left


def test_a_local_sdist_above_the_size_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(source, "MAX_SDIST_BYTES", 100)
    archive = _tar(tmp_path / "pkg-1.0.tar.gz", [("pkg-1.0/setup.py", b"x" * 5000)])
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    spec = SourceSpec("sdist", path=None, sdist=f"file://{archive}", sha256=digest)
    cache = tmp_path / "cache"
    with pytest.raises(InputError, match="larger than 100 bytes"):
        resolve_source(spec, cache, echo=None)
    assert [p.name for p in cache.rglob("*") if not p.is_dir()] == []


def test_an_sdist_zip_member_zipfile_cannot_read_is_an_input_error(tmp_path: Path) -> None:
    """An encrypted member of a zip sdist was zipfile's RuntimeError: an internal error."""
    import zipfile

    from tests.support.builders import with_zip_flags

    archive = tmp_path / "x-1.0.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("x-1.0/setup.py", "print('hi')\n")
    with_zip_flags(archive, 0x1)
    with pytest.raises(
        InputError, match=r"member 'x-1.0/setup.py' cannot be unpacked: .*encrypted"
    ):
        safe_unpack(archive, tmp_path / "out")
