"""`archwheel audit` end to end: formats, schema, exit codes, bad input as one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from tests.support.builders import Entry, container, elf64, write_zip
from tests.support.cli import CliRun
from tests.support.schemas import audit_schema


@pytest.fixture
def small_wheel(tmp_path: Path) -> Path:
    cuda = elf64([(".nv_fatbin", container(Entry(sm=80), Entry(sm=90),
                                           Entry(kind=1, sm=90, version=(9, 0))))])  # fmt: skip
    other = elf64([(".nv_fatbin", container(Entry(sm=80)))])
    return write_zip(
        tmp_path / "demo-1.0-cp311-cp311-linux_x86_64.whl",
        [("demo/libcuda_part.so", cuda), ("demo/libother.so", other), ("demo/__init__.py", b"")],
    )


def test_json_validates_and_reports_missing(cli_run: CliRun, small_wheel: Path) -> None:
    code, out, err = cli_run(
        "audit", str(small_wheel), "--expect", "8.0;9.0+PTX", "--format", "json"
    )
    doc = json.loads(out)
    jsonschema.validate(doc, audit_schema())
    assert code == 1 and doc["exit_code"] == 1 and doc["ok"] is False
    libs = {lib["path"]: lib for lib in doc["inputs"][0]["libraries"]}
    assert libs["demo/libcuda_part.so"]["missing"] == []
    assert libs["demo/libother.so"]["missing"] == ["sm_90", "compute_90"]
    images = libs["demo/libcuda_part.so"]["images"]
    assert [(i["section"], i["kind"], i["arch"], i["count"]) for i in images] == [
        (".nv_fatbin", "sass", "sm_80", 1),
        (".nv_fatbin", "sass", "sm_90", 1),
        (".nv_fatbin", "ptx", "compute_90", 1),
    ]


def test_ok_when_everything_is_there(cli_run: CliRun, small_wheel: Path) -> None:
    code, out, _ = cli_run("audit", str(small_wheel), "--expect", "sm_80")
    assert code == 0
    assert "verdict: OK" in out


def test_markdown(cli_run: CliRun, small_wheel: Path) -> None:
    code, out, _ = cli_run("audit", str(small_wheel), "--expect", "8.0;9.0", "--format", "markdown")
    assert code == 1
    assert "| `demo/libother.so` | sm_80 | - | **sm_90** |" in out
    assert "**verdict: FAIL" in out


def test_inventory_only_and_quiet(cli_run: CliRun, small_wheel: Path) -> None:
    code, out, _ = cli_run("audit", str(small_wheel), "--quiet")
    assert code == 0
    assert out.strip() == "verdict: inventory only (give --expect to compare with an arch list)"


def test_no_device_code_with_expect_fails(cli_run: CliRun, tmp_path: Path) -> None:
    wheel = write_zip(
        tmp_path / "cpu-1.0-py3-none-any.whl", [("cpu/lib.so", elf64([(".text", b"x")]))]
    )
    code, out, _ = cli_run("audit", str(wheel), "--expect", "9.0", "--quiet")
    assert code == 1
    assert "carry no device code at all" in out


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (["audit"], 2, "nothing to audit"),
        (["audit", "/nonexistent.whl"], 3, "no such file"),
        (["audit", "WHEEL", "--expect", "9.9"], 2, "unknown compute capability 9.9"),
        (["audit", "WHEEL", "--expect", "8.0++PTX"], 2, "invalid arch '8.0++PTX'"),
        (["audit", "WHEEL", "--workers", "0"], 2, "--workers"),
    ],
)
def test_errors_are_one_line(
    cli_run: CliRun, small_wheel: Path, args: list[str], code: int, fragment: str
) -> None:
    argv = [str(small_wheel) if a == "WHEEL" else a for a in args]
    got, out, err = cli_run(*argv)
    assert got == code
    assert fragment in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_corrupt_wheel_exit_code(cli_run: CliRun, small_wheel: Path) -> None:
    small_wheel.write_bytes(small_wheel.read_bytes()[:300])
    code, _, err = cli_run("audit", str(small_wheel))
    assert code == 3
    assert "not a readable zip archive" in err


def test_incomplete_input_still_reports_the_rest(cli_run: CliRun, tmp_path: Path) -> None:
    good = elf64([(".nv_fatbin", container(Entry(sm=80)))])
    wheel = write_zip(tmp_path / "x.whl", [("a/good.so", good), ("../escape.so", good)])
    code, out, _ = cli_run("audit", str(wheel), "--format", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, audit_schema())
    assert code == 3 and doc["complete"] is False
    assert [lib["path"] for lib in doc["inputs"][0]["libraries"]] == ["a/good.so"]
    assert doc["inputs"][0]["problems"][0]["member"] == "../escape.so"


def test_console_script_runs(small_wheel: Path) -> None:
    env = dict(os.environ, COLUMNS="200")
    proc = subprocess.run(
        [sys.executable, "-m", "archwheel.interfaces.cli", "audit", str(small_wheel),
         "--expect", "8.0", "--detail"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "images per section" in proc.stdout
    assert "what each arch costs" in proc.stdout


def test_output_file(cli_run: CliRun, small_wheel: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    code, out, _ = cli_run("audit", str(small_wheel), "--format", "json", "-o", str(report))
    assert code == 0 and out == ""
    jsonschema.validate(json.loads(report.read_text()), audit_schema())
