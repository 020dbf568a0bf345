"""Helpers for the tests of the cuobjdump oracle and the cross-check: entries and listings written
out by hand, and a private temporary folder that proves nothing is left behind."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from archwheel.binary.cuobjdump import ListedImage
from archwheel.binary.model import Compression, FatbinEntry
from archwheel.facts.arch import CodeKind, Target

NV, REL = ".nv_fatbin", "__nv_relfatbin"


def entry(arch: str, section: str = NV, compression: Compression = Compression.NONE) -> FatbinEntry:
    kind, target = Target.from_name(arch)
    return FatbinEntry(section, 0, kind, target, compression, 0, 0)


def listed(*pairs: tuple[CodeKind, str]) -> list[ListedImage]:
    return [ListedImage(kind, arch, f"x.{n}.{arch}") for n, (kind, arch) in enumerate(pairs)]


@pytest.fixture
def private_tmpdir(tmp_path: Path) -> Iterator[Path]:
    """Point tempfile at an empty folder, to prove the cross-check leaves nothing behind."""
    folder = tmp_path / "tmpdir"
    folder.mkdir()
    old = tempfile.tempdir
    tempfile.tempdir = str(folder)
    try:
        yield folder
    finally:
        tempfile.tempdir = old
