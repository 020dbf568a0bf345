"""Every member of an ``ar`` archive is placed or reported.

A member whose long name (``/N``) points past the ``//`` name table, or that has no name at all,
cannot be attributed to a library. It used to be dropped without a word: its device code then
showed as "missing" (exit 1) and the result was not marked incomplete. It is now an error
problem naming the member by its offset (the result is incomplete, exit 3), and the compiled
scan leaves such an archive to the Python scan, which says so.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archwheel.binary import speedups
from archwheel.binary.model import Severity
from archwheel.binary.scan import bounds
from archwheel.exit_codes import ExitCode
from tests.support.builders import Entry, ar_archive, container, elf64
from tests.support.fuzz import FUZZ_SETTINGS, said, scan_in_chunks

LIB80 = elf64([(".nv_fatbin", container(Entry(sm=80)))])
LIB90 = elf64([(".nv_fatbin", container(Entry(sm=90)))])
FIRST = "a_very_long_member_name.o"  # 25 characters: its name is in the '//' table
SECOND = "b_another_long_name.o"


def _archive(second_name: bytes) -> tuple[bytes, int]:
    """An archive of two long-named members, the second's name field replaced, and the offset
    of the second member's header."""
    data = bytearray(ar_archive([(FIRST, LIB80), (SECOND, LIB90)]))
    reference = f"/{len(FIRST) + 2}".encode()
    at = data.index(reference.ljust(16))
    data[at : at + 16] = second_name.ljust(16)
    return bytes(data), at


def _python_only(data: bytes, monkeypatch: pytest.MonkeyPatch) -> object:
    with monkeypatch.context() as patch:
        patch.setattr(speedups, "COMPILED", None)
        return said(scan_in_chunks(data))


def _errors(data: bytes) -> list[str]:
    scan = scan_in_chunks(data)
    assert scan is not None
    return [note.message for _, note in scan.notes if note.severity is Severity.ERROR]


@pytest.mark.parametrize(
    ("name", "why"),
    [
        (b"/999", "its long name /999 points past the name table (50 bytes)"),
        (b"/50", "its long name /50 points past the name table (50 bytes)"),
        (b"/" + b"9" * 15, "points past the name table"),
        (b"/48", "it has no name"),  # the last "/\n" of the table: an empty name
        (b"", "it has no name"),
        (b"///", "it has no name"),
    ],
)
def test_a_member_that_cannot_be_named_is_reported_by_offset(
    name: bytes, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, offset = _archive(name)
    assert speedups.scan_whole(data, bounds.compiled_bounds()) is None  # left to Python
    errors = _errors(data)
    assert any(f"archive member at offset {offset}: " in e and why in e for e in errors), errors
    assert said(scan_in_chunks(data)) == _python_only(data, monkeypatch)
    scan = scan_in_chunks(data)
    assert scan is not None
    assert [lib.path for lib in scan.libraries if lib.entries] == [f"m.so({FIRST})"]


def test_a_well_named_archive_has_no_problem_and_the_compiled_scan_answers() -> None:
    data = ar_archive([(FIRST, LIB80), (SECOND, LIB90)])
    assert _errors(data) == []
    assert speedups.COMPILED is None or speedups.scan_whole(data, bounds.compiled_bounds())


@FUZZ_SETTINGS
@given(index=st.integers(0, 10**12), members=st.integers(1, 4))
def test_any_long_name_reference_is_placed_or_reported(index: int, members: int) -> None:
    """Generated: the first member's ``/N`` takes any value. Every member with device code is
    a library of the scan, or an error problem names the first one's offset: never neither;
    and the compiled scan agrees with the Python scan."""
    names = [f"member_number_{i}_long_name.o" for i in range(members)]
    data = bytearray(ar_archive([(n, LIB80) for n in names]))
    header = data.index(b"/0".ljust(16))
    data[header : header + 16] = f"/{index}".encode()[:16].ljust(16)
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert said(scan_in_chunks(bytes(data))) == _python_only(bytes(data), monkeypatch)
    scan = scan_in_chunks(bytes(data))
    assert scan is not None
    reported = [n.message for _, n in scan.notes if f"at offset {header}: " in n.message]
    with_code = [lib for lib in scan.libraries if lib.entries]
    assert reported or len(with_code) == members, (reported, [lib.path for lib in with_code])
    if reported:
        assert len(with_code) == members - 1


def test_audit_of_an_archive_with_an_unplaceable_member_is_incomplete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from archwheel.interfaces.cli import main

    data, offset = _archive(b"/999")
    library = tmp_path / "libx.a"
    library.write_bytes(data)
    argv = ["audit", str(library), "--expect", "9.0", "--format", "json"]
    assert main(argv) == ExitCode.INCOMPLETE
    document = json.loads(capsys.readouterr().out)
    problems = [p["message"] for p in document["inputs"][0]["problems"]]
    assert any(re.search(rf"archive member at offset {offset}: .*not read", p) for p in problems)
