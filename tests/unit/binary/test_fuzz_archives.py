"""Property-based: generated ar archive headers, section tables and member names, within the
promises of tests/support/fuzz.py (bounded time and memory, nothing written, one-line problems).

Once, an ar size field of ``-60`` spun forever, a member called ``lib[/]x.so`` crashed the
table, and tens of thousands of sections made each container lookup linear. Here the header
fields (size, name, BSD name length, long-name index), the section table entries and the names
are drawn at random; every scan must end, stay within memory, and print names literally.
"""

from __future__ import annotations

import contextlib
import io
import json
import struct
import tempfile
import zipfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from archwheel.binary.scan.binary import scan_bytes_full
from archwheel.binary.zipread import directory_extent
from archwheel.interfaces.render.common import literal
from tests.support.builders import Entry, container, elf64, with_zip64_end, write_zip
from tests.support.fuzz import FUZZ_SETTINGS, run_bounded, sealed_environment

LIB = elf64([(".nv_fatbin", container(Entry(sm=80)))])

SIZE_FIELDS = st.one_of(
    st.sampled_from([b"-60", b"-1", b"0", b"", b" ", b"+8", b"9" * 10, b"0x40", b"1e3", b"8 8"]),
    st.integers(0, 10**10 - 1).map(lambda n: str(n).encode()),
    st.binary(min_size=0, max_size=10),
)
NAME_FIELDS = st.one_of(
    st.sampled_from([b"/", b"//", b"/SYM64/", b"/0", b"/99999999", b"#1/-60", b"#1/99999"]),
    st.from_regex(rb"\A#1/[0-9]{1,6}\Z"),
    st.from_regex(rb"\A/[0-9]{1,8}\Z"),
    st.binary(min_size=0, max_size=16),
)


def _header(name: bytes, size: bytes) -> bytes:
    head = name[:16].ljust(16) + b"0".ljust(12) + b"0".ljust(6) + b"0".ljust(6) + b"100644".ljust(8)
    return head + size[:10].ljust(10) + b"`\n"


@st.composite
def archives(draw: st.DrawFn) -> bytes:
    out = b"!<arch>\n"
    for _ in range(draw(st.integers(1, 6))):
        body = draw(st.sampled_from([LIB, b"", b"\0" * 64, LIB[: draw(st.integers(0, 200))]]))
        size = draw(st.one_of(st.just(str(len(body)).encode()), SIZE_FIELDS))
        out += _header(draw(NAME_FIELDS), size) + body
        if draw(st.booleans()):
            out += b"\n"
    return out


@FUZZ_SETTINGS
@given(data=archives())
def test_generated_ar_headers_end_and_stay_bounded(data: bytes) -> None:
    with sealed_environment():
        libraries, problems = run_bounded(lambda: scan_bytes_full("lib.a", data), len(data))
    for lib in libraries:
        assert lib.path.startswith("lib.a(")
        # Member names are kept exact (escaped only when shown) and bounded in length.
        assert len(lib.path) <= len("lib.a()") + 4096
    for problem in problems:
        assert "\n" not in literal(problem.one_line())


@st.composite
def section_tables(draw: st.DrawFn) -> bytes:
    """An ELF whose section headers' offsets and sizes are redrawn (overlaps, past the end)."""
    count = draw(st.integers(1, 40))
    data = bytearray(elf64([(".nv_fatbin", container(Entry(sm=80)))] * count))
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    for index in draw(st.lists(st.integers(1, count), max_size=8)):
        at = shoff + index * 64
        struct.pack_into("<Q", data, at + 24, draw(st.integers(0, len(data) + 64)))
        struct.pack_into("<Q", data, at + 32, draw(st.integers(0, 1 << 20)))
    return bytes(data)


@FUZZ_SETTINGS
@given(data=section_tables())
def test_generated_section_tables_keep_entries_inside_the_file(data: bytes) -> None:
    with sealed_environment():
        libraries, _ = run_bounded(lambda: scan_bytes_full("lib.so", data), len(data))
    for lib in libraries:
        for entry in lib.entries:
            assert 0 <= entry.offset < len(data)


NAMES = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("[]/\\`*|<>_#\x1b\x07\r\n\t\x00\u202e\u200b")),
        st.characters(codec="utf-8", exclude_characters="\x00/"),
    ),
    min_size=1,
    max_size=40,
).map(lambda s: "pkg/lib" + s.replace("\x00", "") + ".so")


@FUZZ_SETTINGS
@given(name=NAMES, fmt=st.sampled_from(["table", "markdown", "json"]))
def test_generated_member_names_are_printed_literally(name: str, fmt: str) -> None:
    from archwheel.interfaces.cli import main

    out, err = io.StringIO(), io.StringIO()
    with tempfile.TemporaryDirectory() as box:
        wheel = write_zip(Path(box) / "demo-1.0-py3-none-any.whl", [(name, LIB)])
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["audit", str(wheel), "--format", fmt])
    assert code in (0, 3), err.getvalue()
    assert "internal error" not in err.getvalue()
    if fmt == "json":
        paths = [lib["path"] for lib in json.loads(out.getvalue())["inputs"][0]["libraries"]]
        assert paths == [name]  # exact, whatever it holds
    else:
        for raw in ("\x1b", "\x07", "\r", "\u202e", "\x00"):
            assert raw not in out.getvalue() and raw not in err.getvalue()


def _real_zip(members: int, comment: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for i in range(members):
            archive.writestr(f"pkg/m{i}.txt", b"x")
        archive.comment = comment
    return buffer.getvalue()


@st.composite
def zip_tails(draw: st.DrawFn) -> bytes:
    """A real zip whose last bytes (end record, zip64 records, comment) are partly redrawn:
    forged signatures in the comment, counts and sizes overwritten, records cut short."""
    comment = draw(
        st.one_of(
            st.just(b""),
            st.binary(max_size=64),
            st.lists(st.sampled_from([b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07", b"\0" * 8])).map(
                b"".join
            ),
        )
    )
    zip64 = draw(st.booleans())
    made = _real_zip(draw(st.integers(0, 3)), b"" if zip64 else comment)
    if zip64:
        made = with_zip64_end(made, draw(st.integers(0, (1 << 64) - 1)))
    data = bytearray(made)
    for _ in range(draw(st.integers(0, 6))):
        at = draw(st.integers(max(0, len(data) - 120), len(data) - 1))
        patch = draw(st.sampled_from([b"\xff\xff", b"PK\x06\x07", b"PK\x06\x06", b"\0\0\0\0"]))
        data[at : at + len(patch)] = patch
    cut = draw(st.integers(0, 30))
    return bytes(data[: len(data) - cut] if cut < len(data) else data)


@FUZZ_SETTINGS
@given(data=zip_tails())
def test_the_zip_end_record_checked_is_the_one_zipfile_uses(data: bytes) -> None:
    # The member-count bound is only a bound if the numbers checked are the ones zipfile then
    # reads: its own end-record reader is the oracle (a private function, used only here).
    try:
        expected = zipfile._EndRecData(io.BytesIO(data))  # type: ignore[attr-defined]
    except (zipfile.BadZipFile, OSError, struct.error):
        return  # zipfile refuses the archive itself: nothing is parsed
    found = directory_extent(io.BytesIO(data))
    if expected is None:
        assert found is None
    else:
        assert found == (expected[4], expected[5])
