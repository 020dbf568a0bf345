"""Option names mean one thing everywhere: ``--interpreter PATH`` is an interpreter (audit, doctor,
smoke, verify), ``--python X.Y`` a version (build), ``--index-url URL`` a package index (build,
smoke). The old spellings (``--python PATH``, smoke's ``--index``) still work, hidden, with a
warning."""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from archwheel.interfaces.cli import build_parser
from archwheel.interfaces.commands.audit import AuditRequest
from archwheel.interfaces.commands.build import BuildCommand
from archwheel.interfaces.commands.doctor import DoctorRequest
from archwheel.interfaces.commands.manifest import VerifyRequest
from archwheel.interfaces.commands.smoke import SmokeRequest

Run = Callable[..., tuple[int, str, str]]

INTERPRETER_COMMANDS = {
    "audit": ["--installed", "rich"],
    "doctor": [],
    "smoke": ["--backend", "existing"],
    "verify": ["manifest.json", "--env"],
}
DEPRECATED = "archwheel: warning: --python is deprecated here; use --interpreter PATH"


def parse(argv: list[str]) -> argparse.Namespace:
    return build_parser(argv[0]).parse_args(argv)


def request_of(argv: list[str]) -> AuditRequest | DoctorRequest | SmokeRequest | VerifyRequest:
    args = parse(argv)
    kinds = {
        "audit": AuditRequest,
        "doctor": DoctorRequest,
        "smoke": SmokeRequest,
        "verify": VerifyRequest,
    }
    kind: type[AuditRequest | DoctorRequest | SmokeRequest | VerifyRequest] = kinds[argv[0]]
    return kind.from_args(args)


# -- the parsed requests --------------------------------------------------------------------------


@pytest.mark.parametrize("command", sorted(INTERPRETER_COMMANDS))
def test_interpreter_option_and_its_alias_reach_the_request(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = [command, *INTERPRETER_COMMANDS[command]]
    new = request_of([*base, "--interpreter", "/opt/venv/bin/python"])
    assert new.interpreter == "/opt/venv/bin/python"
    assert capsys.readouterr().err == ""
    old = request_of([*base, "--python", "/opt/venv/bin/python"])
    assert old == new
    assert capsys.readouterr().err.strip() == DEPRECATED
    assert request_of(base).interpreter is None


@pytest.mark.parametrize("command", sorted(INTERPRETER_COMMANDS))
def test_help_names_interpreter_and_hides_the_alias(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        parse([command, "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert "--interpreter PATH" in text
    assert "--python" not in text


def test_build_python_is_a_version_and_takes_no_interpreter(
    capsys: pytest.CaptureFixture[str],
) -> None:
    request = BuildCommand.from_args(parse(["build", "--python", "3.12"])).request
    assert request.python == "3.12"
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit) as info:
        parse(["build", "--interpreter", "/usr/bin/python3"])
    assert info.value.code == 2
    assert "unrecognized arguments: --interpreter" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse(["build", "--help"])
    text = capsys.readouterr().out
    assert "--python X.Y" in text
    assert "--index-url URL" in text


def test_smoke_index_url_and_its_alias(capsys: pytest.CaptureFixture[str]) -> None:
    def index_of(*argv: str) -> str | None:
        args = parse(["smoke", "w.whl", *argv])
        return SmokeRequest.from_args(args).index_url

    assert index_of("--index-url", "https://index.example/simple") == (
        "https://index.example/simple"
    )
    assert capsys.readouterr().err == ""
    assert index_of("--index", "https://index.example/simple") == "https://index.example/simple"
    assert capsys.readouterr().err.strip() == (
        "archwheel: warning: --index is deprecated here; use --index-url URL"
    )
    assert index_of() is None
    with pytest.raises(SystemExit):
        parse(["smoke", "--help"])
    text = capsys.readouterr().out
    assert "--index-url URL | --find-links DIR" in text
    assert "--index " not in text


@pytest.mark.parametrize("spelling", ["--index-url", "--index"])
def test_smoke_index_and_find_links_exclude_each_other(
    spelling: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        parse(["smoke", "w.whl", spelling, "https://index.example/simple", "--find-links", "d"])
    assert info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


# -- the real commands, both spellings --------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["--interpreter", "--python"])
def test_audit_installed_looks_in_the_given_interpreter(cli_run: Run, spelling: str) -> None:
    code, _, err = cli_run("audit", "--installed", "rich", spelling, "/bin/true")
    assert code == 4
    assert "unexpected output from /bin/true listing rich" in err
    assert (DEPRECATED in err) == (spelling == "--python")
    code, out, _ = cli_run("audit", "--installed", "rich")
    assert code == 0, out
    assert "inventory only" in out


@pytest.mark.parametrize("spelling", ["--interpreter", "--python"])
def test_doctor_inspects_the_given_interpreter(cli_run: Run, spelling: str) -> None:
    code, out, err = cli_run("doctor", spelling, "/bin/true", "--gpu-probe", "nvidia-smi")
    assert code == 3
    assert "the environment could not be inspected" in out
    assert (DEPRECATED in err) == (spelling == "--python")


@pytest.mark.parametrize("spelling", ["--interpreter", "--python"])
def test_smoke_existing_tests_the_given_interpreter(cli_run: Run, spelling: str) -> None:
    code, out, err = cli_run(
        "smoke", "--backend", "existing", spelling, "/bin/false", "--format", "json"
    )
    assert code == 4, err
    document = json.loads(out)
    assert document["environment"] == "existing interpreter /bin/false"
    assert document["message"].startswith("the interpreter /bin/false cannot run")
    assert (DEPRECATED in err) == (spelling == "--python")


def test_smoke_existing_names_the_new_option_in_its_errors(cli_run: Run) -> None:
    code, _, err = cli_run("smoke", "--backend", "existing")
    assert code == 2
    assert "--backend existing needs --interpreter PATH" in err
    code, _, err = cli_run("smoke", "--backend", "existing", "--interpreter", "/bin/false", "w.whl")
    assert code == 2
    assert "it tests the interpreter given by --interpreter" in err


@pytest.mark.parametrize("spelling", ["--interpreter", "--python"])
def test_verify_env_checks_the_given_interpreter(
    cli_run: Run, spelling: str, tmp_path: Path
) -> None:
    wheel = tmp_path / "absentpkg_archwheel_test-1.0-py3-none-any.whl"
    _write_wheel(wheel, "absentpkg_archwheel_test", "1.0")
    manifest = tmp_path / "manifest.json"
    code, _, err = cli_run("manifest", str(wheel), "-o", str(manifest))
    assert code == 0, err
    code, out, err = cli_run("verify", str(manifest), "--env", spelling, sys.executable)
    assert code == 1, out + err
    assert f"is not installed in {sys.executable}" in " ".join(out.split())
    assert (DEPRECATED in err) == (spelling == "--python")


def _write_wheel(path: Path, name: str, version: str) -> None:
    """A pure-Python wheel with the metadata ``manifest`` reads (no RECORD hashes needed)."""
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{name}/__init__.py", "")
        zf.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        )
        zf.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        zf.writestr(f"{info}/RECORD", "")
