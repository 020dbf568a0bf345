"""What other programs answer archwheel is untrusted input like a file: an interpreter's probe
answer, a package index's JSON page, a smoke step's result file, a provenance file that is a
FIFO. Each ends in one line and a documented code, never an internal error or a hang (files
and folders are in test_bad_input_matrix.py)."""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

import pytest

from archwheel.exit_codes import ExitCode
from tests.support.bad_input import DOCUMENTED, run_main
from tests.support.builders import Entry, container, elf64, write_zip
from tests.support.fuzz import watchdog
from tests.support.wheels import make_wheel

# What a hostile or broken --interpreter answers its probes: archwheel's probe scripts run in
# the user's interpreter, so the answer is untrusted input like a file (the marker line is what
# doctor and verify --env read; can-load --installed and audit --installed read all of stdout).
PROBE_ANSWERS = {
    "deep": "[" * 100_000,
    "huge-int": "9" * 100_000,
    "a-list": "[1, 2]",
    "distributions-a-list": '{"distributions": [1, 2]}',
    "versions-not-text": '{"distributions": {"torch": 2}}',
    "native-files-not-pairs": '{"distributions": {"a": "1"}, "native_files": {"a": [[1]]}}',
    "torch-fields-of-any-type": (
        '{"distributions": {"torch": "2.14.1"}, "location": [1], "cuda": {}, "version": 5,'
        ' "device_count": "many", "cuda_available": "yes", "errors": [1], "nccl": 7}'
    ),
    "installed-not-the-probe-s": '[{"name": 1, "root": "/", "files": "x"}]',
    "files-not-a-list": '{"files": 5, "roots": [1]}',
}


@pytest.mark.parametrize("answer", sorted(PROBE_ANSWERS))
@pytest.mark.parametrize(
    "argv",
    [
        ["doctor", "--timeout", "20"],
        ["verify", "MANIFEST", "--env"],
        ["can-load", "WHEEL", "--installed"],
        ["audit", "--installed", "demo"],
    ],
    ids=["doctor", "verify-env", "can-load-installed", "audit-installed"],
)
def test_an_interpreter_s_answer_is_untrusted_input(
    argv: list[str], answer: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = "" if argv[0] in ("can-load", "audit") else "@@archwheel-probe@@"
    script = tmp_path / "python"
    script.write_text(f"#!{sys.executable}\nprint({marker + PROBE_ANSWERS[answer]!r})\n")
    script.chmod(0o755)
    # A wheel with a library (can-load reads the environment only for one) and its manifest.
    wheel = make_wheel(tmp_path, "demo")
    with zipfile.ZipFile(wheel) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    members["demo/libx.so"] = elf64([(".nv_fatbin", container(Entry(sm=80)))])
    write_zip(wheel, list(members.items()))
    manifest = tmp_path / "manifest.json"
    assert run_main(["manifest", str(wheel), "-o", str(manifest)]) == 0
    capsys.readouterr()
    named = {"MANIFEST": str(manifest), "WHEEL": str(wheel)}
    with watchdog(60):
        code = run_main([*(named.get(a, a) for a in argv), "--interpreter", str(script)])
    out, err = capsys.readouterr()
    assert "internal error" not in err + out, (err + out)[-2000:]
    assert code in {*DOCUMENTED, ExitCode.TOOL}, (code, err[-2000:])
    assert code != ExitCode.USAGE, err[-2000:]  # the probe ran: not stopped at the arguments
    assert len(err) < 20_000


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000,
        b'{"files": ' + b"9" * 100_000 + b"}",
        b"[1, 2]",
        b'{"files": [{"filename": 1, "url": "x"}]}',
        b'{"files": [{"filename": "a.tar.gz", "url": "x", "hashes": [1]}]}',
        b"\xff\xfe",
    ],
)
def test_a_package_index_json_page_is_untrusted_input(body: bytes) -> None:
    from archwheel.effects.simple_index import parse_simple_page
    from archwheel.errors import ToolError

    with pytest.raises(ToolError, match="the package index page https://x/demo/ is"):
        parse_simple_page(body, "application/vnd.pypi.simple.v1+json", "https://x/demo/")
    good = (
        b'{"files": [{"filename": "demo-1.0.tar.gz", "url": "d.tgz", "hashes": {"sha256": "ab"}}]}'
    )
    (only,) = parse_simple_page(good, "application/vnd.pypi.simple.v1+json", "https://x/demo/")
    assert (only.filename, only.url, only.sha256) == (
        "demo-1.0.tar.gz",
        "https://x/demo/d.tgz",
        "ab",
    )


@pytest.mark.parametrize("body", [b"[" * 100_000, b"9" * 100_000, b"[]", "fifo"])
def test_a_smoke_step_s_result_is_untrusted_input(body: bytes | str, tmp_path: Path) -> None:
    # The result file is written by the payload inside the tested wheel's process.
    from archwheel.effects.watchdog import _read_result

    path = tmp_path / "result.json"
    if body == "fifo":
        os.mkfifo(path)
    else:
        assert isinstance(body, bytes)
        path.write_bytes(body)
    with watchdog(20):
        data, why = _read_result(path)
    assert data is None and why and "\n" not in why


def test_a_fifo_named_as_a_provenance_file_does_not_block_the_html_report(tmp_path: Path) -> None:
    from archwheel.interfaces.render.html import _provenance

    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    os.mkfifo(tmp_path / (wheel.name + ".provenance.json"))
    with watchdog(20):
        assert _provenance(str(wheel)) is None
