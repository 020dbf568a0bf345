"""``archwheel build`` and ``archwheel matrix`` with a compile farm: the options and their
settings (the option wins), the token file's path carried (never its contents) to every
cell's build request, ``--plan`` showing the farm, and ``matrix --export`` naming the token by
its CI secret's name only (tests/unit/interfaces/test_matrix_export.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archwheel.errors import UsageError
from archwheel.interfaces.cli import build_parser
from archwheel.interfaces.commands.build import BuildCommand
from archwheel.interfaces.commands.matrix import MatrixCommand
from tests.support.cli import CliRun

MATRIX = ("--recipe", "example", "--recipe", "libtorch-ops", "--python", "3.11",
          "--torch", "2.13.0", "--torch", "2.14.1")  # fmt: skip

SECRET = "farm-SECRET-token-5678"


def _token(tmp_path: Path) -> Path:
    path = tmp_path / "farm-token"
    path.write_text(SECRET + "\n")
    return path


def test_build_takes_the_farm_from_options_over_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parse = build_parser("build").parse_args
    monkeypatch.setenv("ARCHWHEEL_DIST_SCHEDULER", "http://from-env:10600")
    monkeypatch.setenv("ARCHWHEEL_DIST_TOKEN_FILE", str(tmp_path / "env-token"))
    monkeypatch.setenv("ARCHWHEEL_DIST_REQUIRED", "1")
    from_env = BuildCommand.from_args(parse(["build", "--plan"])).request
    assert from_env.dist_scheduler == "http://from-env:10600"
    assert from_env.dist_token_file == tmp_path / "env-token" and from_env.dist_required
    token = _token(tmp_path)
    given = BuildCommand.from_args(
        parse(["build", "--dist-scheduler", "http://cli:1", "--dist-token-file", str(token)])
    ).request
    assert given.dist_scheduler == "http://cli:1" and given.dist_token_file == token
    monkeypatch.delenv("ARCHWHEEL_DIST_REQUIRED")
    assert not BuildCommand.from_args(parse(["build"])).request.dist_required
    assert BuildCommand.from_args(parse(["build", "--dist-required"])).request.dist_required


def test_build_plan_shows_the_farm_and_never_the_token(cli_run: CliRun, tmp_path: Path) -> None:
    code, out, err = cli_run(
        "build", "--recipe", "example", "--plan", "--out", str(tmp_path / "out"),
        "--dist-scheduler", "http://127.0.0.1:10600", "--dist-token-file", str(_token(tmp_path)),
    )  # fmt: skip
    assert code == 0, err
    assert "compile farm" in out and "http://127.0.0.1:10600" in out
    assert SECRET not in out + err
    code, out, err = cli_run(
        "build", "--recipe", "example", "--plan", "--out", str(tmp_path / "out"),
        "--format", "json",
        "--dist-scheduler", "http://127.0.0.1:10600", "--dist-token-file", str(_token(tmp_path)),
    )  # fmt: skip
    assert code == 0, err
    assert "http://127.0.0.1:10600" in json.loads(out)["plan"]["compile farm"]
    assert SECRET not in out + err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--dist-scheduler", "http://127.0.0.1:1"], "--dist-scheduler without --dist-token-file"),
        (["--dist-required"], "--dist-required needs a farm"),
        (["--dist-scheduler", "http://u:p@farm:1", "--dist-token-file", "T"], "credentials"),
    ],
)
def test_build_refuses_a_farm_written_wrong_with_one_line_and_exit_2(
    cli_run: CliRun, tmp_path: Path, argv: list[str], message: str
) -> None:
    argv = [str(_token(tmp_path)) if a == "T" else a for a in argv]
    code, _, err = cli_run("build", "--recipe", "example", "--plan", *argv)
    assert code == 2 and message in err and "Traceback" not in err
    assert "p@farm" not in err.replace("--dist-scheduler holds credentials", "")


def test_matrix_gives_every_cell_the_farm(tmp_path: Path) -> None:
    token = _token(tmp_path)
    args = build_parser("matrix").parse_args(
        [
            "matrix",
            *MATRIX,
            "--index",
            str(tmp_path / "i"),
            "--plan",
            "--dist-scheduler",
            "http://farm:10600",
            "--dist-token-file",
            str(token),
            "--dist-required",
        ]
    )
    request = MatrixCommand.from_args(args).request
    cell = request.build_options()
    assert cell.dist_scheduler == "http://farm:10600" and cell.dist_token_file == token
    assert cell.dist_required
    args = build_parser("matrix").parse_args(
        ["matrix", *MATRIX, "--index", str(tmp_path / "i"), "--plan",
         "--dist-scheduler", "http://farm:10600", "--dist-token-file", str(tmp_path / "absent")]
    )  # fmt: skip
    with pytest.raises(UsageError, match="no such file"):  # once, before any cell
        MatrixCommand.from_args(args)
