"""Property-based: generated zip layouts, where members' data may overlap each other or the
directory (the overlapping zip bomb's construction) and sizes may lie.

The oracle is the layout as written: each member spans its local header, its name and the
bytes its directory entry declares; a member is refused exactly when that span reaches into the
next member's local header or into the directory. Every other member is read as before, and
the reader takes every such archive (none is refused whole).
"""

from __future__ import annotations

import io
import tempfile
import zipfile
import zlib
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from archwheel.binary.zipmember import LOCAL_HEADER
from archwheel.binary.zipread import WheelReader
from tests.support.fuzz import FUZZ_SETTINGS

NAMES = [f"pkg/m{i}.so" for i in range(6)]


@st.composite
def layouts(draw: st.DrawFn) -> tuple[bytes, set[str], set[str]]:
    """A zip's bytes, its member names, and the names of the members whose declared span
    overlaps what follows them."""
    count = draw(st.integers(1, 6))
    bodies = [draw(st.binary(max_size=80)) for _ in range(count)]
    # Declared sizes: mostly true, else longer (reaching into what follows) or shorter.
    deltas = [draw(st.sampled_from([0, 0, 0, 1, 29, 30, 64, 400, -1])) for _ in range(count)]
    gaps = [draw(st.sampled_from([0, 0, 3])) for _ in range(count)]
    out = io.BytesIO()
    infos: list[zipfile.ZipInfo] = []
    for name, body, gap in zip(NAMES, bodies, gaps, strict=False):
        info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
        info.file_size = info.compress_size = len(body)
        info.CRC = zlib.crc32(body)
        info.header_offset = out.tell()
        out.write(info.FileHeader(False) + body + b"\0" * gap)
        infos.append(info)
    directory_at = out.tell()
    for info, delta in zip(infos, deltas, strict=True):
        info.compress_size = info.file_size = max(0, info.compress_size + delta)
    archive = zipfile.ZipFile(out, "w")
    archive.filelist += infos
    archive.start_dir = directory_at
    archive._didModify = True  # type: ignore[attr-defined]  # write its directory on close
    archive.close()
    data = out.getvalue()
    overlapping: set[str] = set()
    for i, info in enumerate(infos):
        end = info.header_offset + LOCAL_HEADER.size + len(info.filename) + info.compress_size
        after = infos[i + 1].header_offset if i + 1 < len(infos) else directory_at
        if end > after and not (i + 1 == len(infos) and end > len(data)):
            overlapping.add(info.filename)
    return data, {i.filename for i in infos}, overlapping


@FUZZ_SETTINGS
@given(layouts())
def test_members_are_refused_exactly_where_their_data_overlap(
    layout: tuple[bytes, set[str], set[str]],
) -> None:
    data, names, overlapping = layout
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "z-1-py3-none-any.whl"
        path.write_bytes(data)
        reader = WheelReader(path)  # the directory is sound: the reader must take it
    refused = {name for name, why in reader.name_problems if "overlaps" in why}
    assert refused == overlapping
    assert {m.name for m in reader.members} == names - refused
