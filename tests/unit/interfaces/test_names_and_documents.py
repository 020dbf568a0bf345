"""A wheel's METADATA against its file name, documents checked by their schemas, and the loose
answers of programs and pages.

- ``publish`` refused nothing when METADATA's Name or Version was not the file name's: pip then
  could not install it from the index ("No matching distribution"). Now publish refuses it
  naming both values, and ``audit``, ``manifest`` and ``smoke`` say the same (exit 3).
- Documents archwheel reads (an audit report for ``diff``, a manifest for ``verify``, an index
  manifest for ``publish --from-index``) are checked before use, with ``facts.documents.Table``'s
  one message shape: ``schema_version``, the types and the ranges of the values read.
- ``--driver``, ``--cuda``, ``--torch``, ``--python`` with a control character or white space
  around the version, and a time limit below a millisecond, are usage errors.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.utils import canonicalize_name
from packaging.version import Version

from archwheel.exit_codes import ExitCode
from archwheel.verdicts.wheelname import name_version_disagreement
from tests.support.fuzz import FUZZ_SETTINGS
from tests.support.index_wheels import device_library, make_dist


def _main(argv: list[str]) -> int:
    from archwheel.interfaces.cli import main

    try:
        return main(argv)
    except SystemExit as exc:  # argparse's usage errors
        return int(exc.code or 0)


def _meta(filename: str, name: str, version: str) -> tuple[str, str, str]:
    return filename, name, version


# -- METADATA against the file name -----------------------------------------------------------

_WORD = st.text("abcxyz", min_size=1, max_size=4)
_SEPARATOR = st.sampled_from(["-", "_", ".", "--", "_."])


@st.composite
def _spelling(draw: st.DrawFn, words: list[str]) -> str:
    """``words`` as a project name may be written: any case, any run of separators."""
    cased = [draw(st.sampled_from([w, w.upper(), w.title()])) for w in words]
    out = cased[0]
    for word in cased[1:]:
        out += draw(_SEPARATOR) + word
    return out


@FUZZ_SETTINGS
@given(
    data=st.data(),
    words=st.lists(_WORD, min_size=1, max_size=3),
    other=st.lists(_WORD, min_size=1, max_size=3),
    release=st.lists(st.integers(0, 20), min_size=1, max_size=3),
    zeros=st.integers(0, 2),
    bump=st.booleans(),
)
def test_a_name_and_version_agree_as_pip_compares_them(
    data: st.DataObject,
    words: list[str],
    other: list[str],
    release: list[int],
    zeros: int,
    bump: bool,
) -> None:
    """Generated: a file name and a METADATA of the same project (any spelling) and version
    (1.0 is 1.0.0) agree; another project or version is named with both values."""
    file_name = "_".join(words)
    version = ".".join(map(str, release))
    same_version = version + ".0" * zeros
    wheel = f"{file_name}-{version}-py3-none-any.whl"
    spelled = data.draw(_spelling(words))
    assert name_version_disagreement(*_meta(wheel, spelled, same_version)) is None
    stranger = data.draw(_spelling(other))
    meta_version = f"{version}.1" if bump else same_version
    found = name_version_disagreement(*_meta(wheel, stranger, meta_version))
    names_differ = canonicalize_name(stranger) != canonicalize_name(file_name)
    versions_differ = Version(meta_version) != Version(version)
    assert (found is None) == (not names_differ and not versions_differ)
    if found is not None:
        assert found.endswith("pip cannot install it from an index")
        if names_differ:
            assert repr(stranger) in found and repr(file_name) in found
        if versions_differ:
            assert repr(meta_version) in found and repr(str(Version(version))) in found


def test_an_invalid_metadata_version_disagrees() -> None:
    found = name_version_disagreement(*_meta("a-1.0-py3-none-any.whl", "a", "not a version"))
    assert found is not None and "'not a version'" in found


@pytest.fixture
def mismatched(tmp_path: Path) -> Path:
    """A wheel whose METADATA says demo 1.0 and whose file name says other 2.0."""
    wheel = make_dist(tmp_path, "demo", "1.0", libraries={"demo/libx.so": device_library(80)})
    return wheel.rename(tmp_path / "other-2.0-py3-none-any.whl")


def test_publish_refuses_a_wheel_pip_could_not_install(
    mismatched: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = tmp_path / "index"
    argv = ["publish", str(mismatched), "--index", str(index), "--expect", "8.0"]
    assert _main([*argv, "--format", "json"]) == ExitCode.VERDICT_FAILED
    document = json.loads(capsys.readouterr().out)
    ((refusal),) = document["refused"]
    assert refusal["wheel"] == mismatched.name
    for words in ("Name 'demo'", "'other'", "Version '1.0'", "'2.0'"):
        assert words in refusal["reason"]
    assert document["published"] == [] and not (index / "current").exists()


@pytest.mark.parametrize("command", ["audit", "manifest", "smoke"])
def test_audit_manifest_and_smoke_say_the_same(
    command: str, mismatched: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = {
        "audit": ["audit", str(mismatched), "--format", "json"],
        "manifest": ["manifest", str(mismatched)],
        "smoke": ["smoke", str(mismatched), "--timeout", "20"],
    }[command]
    assert _main(argv) == ExitCode.INCOMPLETE
    out, err = capsys.readouterr()
    shown = err if command != "audit" else json.dumps(json.loads(out)["inputs"][0]["problems"])
    assert "METADATA Name 'demo' is not the file name's 'other'" in shown, shown
    if command == "manifest":
        assert out == ""  # no manifest of a wheel pip would refuse


# -- documents checked by their schemas ---------------------------------------------------------

BAD_VALUES: list[Any] = ["12", -1, 1.5, True, None, [], {}, 1 << 63]


def _audit_document(wheel: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert _main(["audit", str(wheel), "--format", "json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


# Where each count sits in an audit document (audit.schema.json), and its least value.
AUDIT_COUNTS = {
    ("inputs", 0, "binaries_scanned"): 0,
    ("inputs", 0, "bytes_scanned"): 0,
    ("inputs", 0, "libraries", 0, "size"): 0,
    ("inputs", 0, "libraries", 0, "containers"): 0,
    ("inputs", 0, "libraries", 0, "raw_cubins"): 0,
    ("inputs", 0, "libraries", 0, "images", 0, "count"): 1,
    ("inputs", 0, "libraries", 0, "images", 0, "stored_bytes"): 0,
    ("inputs", 0, "libraries", 0, "images", 0, "uncompressed_bytes"): 0,
    ("inputs", 0, "archs", 0, "entries"): 1,
    ("schema_version",): 1,
}


def _dotted(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


@pytest.mark.parametrize("value", BAD_VALUES, ids=repr)
@pytest.mark.parametrize("where", sorted(AUDIT_COUNTS, key=str), ids=_dotted)
def test_diff_refuses_an_audit_document_whose_counts_are_not_counts(
    where: tuple[str | int, ...],
    value: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Generated from the schema's counts: a string where a count belongs (or a negative, a
    fraction, a boolean, a null, past 2**63) is an unreadable document, exit 3, named by its
    place in Table's one shape."""
    wheel = make_dist(tmp_path, "demo", "1.0", libraries={"demo/libx.so": device_library(80)})
    document = _audit_document(wheel, capsys)
    holder: Any = document
    for part in where[:-1]:
        holder = holder[part]
    if value == 0 and AUDIT_COUNTS[where] == 0:
        return
    holder[where[-1]] = value
    report = tmp_path / "old.json"
    report.write_text(json.dumps(document))
    assert _main(["diff", str(report), str(wheel)]) == ExitCode.INCOMPLETE
    err = capsys.readouterr().err
    assert f"archwheel: error: {report}: {_dotted(where)}" in err, err
    assert "internal error" not in err


@pytest.mark.parametrize("value", [2, "1", 1.0, True, math.inf, None])
def test_diff_refuses_another_schema_version(
    value: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = make_dist(tmp_path, "demo", "1.0", libraries={"demo/libx.so": device_library(80)})
    document = _audit_document(wheel, capsys)
    document["schema_version"] = value
    report = tmp_path / "old.json"
    report.write_text(json.dumps(document).replace("Infinity", "1e999"))
    assert _main(["diff", str(report), str(wheel)]) == ExitCode.INCOMPLETE
    assert f"{report}: schema_version" in capsys.readouterr().err


@pytest.mark.parametrize("size", [-1, "12", 1.5, True, 1 << 63])
def test_a_manifest_size_that_is_no_byte_count_is_an_unreadable_manifest(
    size: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = make_dist(tmp_path, "demo", "1.0")
    manifest = tmp_path / "manifest.json"
    assert _main(["manifest", str(wheel), "-o", str(manifest)]) == 0
    document = json.loads(manifest.read_text())
    document["wheels"][0]["size"] = size
    manifest.write_text(json.dumps(document))
    capsys.readouterr()
    assert _main(["verify", str(manifest), str(wheel)]) == ExitCode.INCOMPLETE
    err = capsys.readouterr().err
    assert f"{manifest}: wheels[0].size" in err and "mismatch" not in err


def test_a_manifest_schema_version_true_is_not_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = make_dist(tmp_path, "demo", "1.0")
    manifest = tmp_path / "manifest.json"
    assert _main(["manifest", str(wheel), "-o", str(manifest)]) == 0
    manifest.write_text(
        manifest.read_text().replace('"schema_version": 1', '"schema_version": true')
    )
    capsys.readouterr()
    assert _main(["verify", str(manifest), str(wheel)]) == ExitCode.INCOMPLETE
    assert "schema_version True is not 1" in capsys.readouterr().err


@pytest.mark.parametrize("version", ["1e999", "99", '"banana"', "true", "0", None], ids=str)
def test_publish_from_index_checks_the_schema_version(
    version: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = tmp_path / "artifact"
    (tree / "wheels").mkdir(parents=True)
    field = f'"schema_version": {version}, ' if version is not None else ""
    (tree / "index.json").write_text("{" + field + '"entries": []}')
    code = _main(["publish", "--from-index", str(tmp_path), "--index", str(tmp_path / "i")])
    err = capsys.readouterr().err
    assert code == ExitCode.INCOMPLETE, err
    assert f"{tree / 'index.json'}: " in err and "schema_version" in err, err


# -- the loose answers --------------------------------------------------------------------------

WRAPPED = ["12.8\n", " 12.8", "12.8 ", "12.8\r", "12\x1b.8", "\t12.8"]


@pytest.mark.parametrize("text", WRAPPED, ids=repr)
@pytest.mark.parametrize(
    "argv",
    [
        ["arch", "8.0", "--cuda", "V"],
        ["can-run", "x.whl", "--cc", "8.0", "--driver", "V"],
        ["can-run", "x.whl", "--cc", "8.0", "--cuda-runtime", "V"],
        ["publish", "x.whl", "--index", "i", "--cuda", "V"],
        ["publish", "x.whl", "--index", "i", "--torch", "V"],
        ["matrix", "--index", "i", "--plan", "--torch", "V"],
        ["build", "--plan", "--python", "V"],
    ],
    ids=lambda a: f"{a[0]}-{a[-2]}",
)
def test_a_version_with_a_newline_or_white_space_around_it_is_refused(
    argv: list[str], text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    version = text.replace("12.8", "570.86.10") if "--driver" in argv else text
    assert _main([version if a == "V" else a for a in argv]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert f"argument {argv[-2]}: " in err and "around the version" in err, err
    assert "\x1b" not in err


def test_the_same_versions_written_plainly_are_taken(capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(["arch", "8.0", "--cuda", "12.8"]) == ExitCode.OK
    assert _main(["arch", "8.0", "--cuda", "CUDA 12.8"]) == ExitCode.OK


@pytest.mark.parametrize("timeout", ["1e-320", "5e-324", "0.0009", "1e-4"])
def test_a_time_limit_below_a_millisecond_is_refused(
    timeout: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _main(["doctor", "--timeout", timeout]) == ExitCode.USAGE
    assert "above 0 (at least 0.001)" in capsys.readouterr().err


def _with_metadata(wheel: Path, data: bytes) -> Path:
    """``wheel`` with its METADATA replaced by ``data`` (every other member as it was)."""
    import zipfile

    rewritten = wheel.with_name(wheel.name + ".new")
    with (
        zipfile.ZipFile(wheel) as old,
        zipfile.ZipFile(rewritten, "w", zipfile.ZIP_DEFLATED) as new,
    ):
        for info in old.infolist():
            body = data if info.filename.endswith(".dist-info/METADATA") else old.read(info)
            new.writestr(info.filename, body)
    return rewritten.replace(wheel)


GOOD_METADATA = "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (GOOD_METADATA.encode("utf-16"), "not read: UTF-16 text"),
        (GOOD_METADATA.encode("utf-16-be"), "not read: UTF-16 text"),
        (GOOD_METADATA.encode("utf-16-le"), "not read: UTF-16 text"),
        (GOOD_METADATA.encode() + b"Summary: \xff\n", "not read: not UTF-8 text (byte 55"),
        (b"Metadata-Version: 2.1\nVersion: 1.0\n", "has no Name: pip cannot install"),
        (b"Metadata-Version: 2.1\nName: demo\nVersion:  \n", "has no Version"),
        (b"", "has no Name and Version"),
        (GOOD_METADATA.encode() + b"\n" + b"x" * (16 << 20), "over the bound of 16777216"),
    ],
)
def test_audit_names_a_metadata_it_cannot_read_in_one_line(
    data: bytes, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = make_dist(tmp_path, "demo", "1.0", libraries={"demo/libx.so": device_library(80)})
    _with_metadata(wheel, data)
    assert _main(["audit", str(wheel), "--format", "json"]) == ExitCode.INCOMPLETE
    problems = json.loads(capsys.readouterr().out)["inputs"][0]["problems"]
    lines = [p for p in json.dumps(problems).split('"') if "METADATA" in p]
    assert any(said in line and "demo-1.0.dist-info/METADATA" in line for line in lines), problems
    assert _main(["audit", str(wheel)]) == ExitCode.INCOMPLETE
    out, err = capsys.readouterr()
    text = " ".join((out + err).split())  # the console may fold a long line
    assert f"error: {wheel}: demo-1.0.dist-info/METADATA" in text and said in text
