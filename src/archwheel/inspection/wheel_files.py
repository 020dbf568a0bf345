"""The loader's view of wheels, read: each wheel's metadata and shared libraries, the values
``verdicts.load.judge_load`` judges (can-load, the build's load gate, can-load across torch
releases). Read from the zip through ``binary/``; nothing is extracted."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from archwheel.binary.dynamic import DynamicInfo
from archwheel.binary.dynamic_wheel import read_wheel_dynamic, read_wheels_dynamic
from archwheel.binary.wheelmeta import WheelMetadata, read_wheel_metadata
from archwheel.binary.zipread import Source
from archwheel.verdicts.load import WheelFiles


def read_wheel_files(path: Path, *, source: Source | None = None) -> WheelFiles:
    """A wheel's metadata and shared libraries, read from the zip (nothing extracted); with
    ``source``, from a file on a package index (``path`` names it)."""
    meta = read_wheel_metadata(path, source=source)
    return _wheel_files(path, meta, read_wheel_dynamic(path, source=source))


def read_wheels_files(paths: Sequence[Path]) -> list[WheelFiles]:
    """``read_wheel_files`` of several local wheels, their libraries read together
    (``read_wheels_dynamic``: one pool of workers for the large ones of all of them)."""
    metas: list[WheelMetadata] = []
    libraries = read_wheels_dynamic(  # the metadata read while the workers inflate
        paths, while_waiting=lambda: metas.extend(read_wheel_metadata(path) for path in paths)
    )
    return [_wheel_files(*found) for found in zip(paths, metas, libraries, strict=True)]


def _wheel_files(path: Path, meta: WheelMetadata, libraries: tuple[DynamicInfo, ...]) -> WheelFiles:
    return WheelFiles(
        filename=path.name,
        name=meta.name,
        version=meta.version,
        tags=meta.tags,
        libraries=libraries,
        requires=tuple((p.name, p.specifier, p.marker) for p in meta.requires),
        cuda_major=meta.cuda_major,
    )
