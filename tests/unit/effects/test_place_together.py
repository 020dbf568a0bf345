"""``place_together``: a wheel and the files that describe it are placed all or none."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import IO

import pytest

from archwheel.effects.files import place_together


def _full(out: IO[bytes]) -> None:
    out.write(b"half")
    raise OSError(errno.ENOSPC, "No space left on device")


def test_all_are_placed_and_no_part_is_left(tmp_path: Path) -> None:
    wheel, record = tmp_path / "x.whl", tmp_path / "x.whl.provenance.json"
    place_together(
        [(wheel, lambda out: out.write(b"wheel")), (record, lambda out: out.write(b"{}"))]
    )
    assert wheel.read_bytes() == b"wheel" and record.read_bytes() == b"{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.whl", "x.whl.provenance.json"]


@pytest.mark.parametrize("failing", [0, 1])
def test_one_that_fails_places_none_and_keeps_the_old_files(tmp_path: Path, failing: int) -> None:
    wheel, record = tmp_path / "x.whl", tmp_path / "x.whl.provenance.json"
    wheel.write_bytes(b"old wheel")
    record.write_bytes(b"old record")
    writers = [lambda out: out.write(b"new wheel"), lambda out: out.write(b"new record")]
    writers[failing] = _full
    with pytest.raises(OSError) as raised:
        place_together([(wheel, writers[0]), (record, writers[1])])
    assert raised.value.errno == errno.ENOSPC
    assert wheel.read_bytes() == b"old wheel" and record.read_bytes() == b"old record"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.whl", "x.whl.provenance.json"]
