"""An empty path on the command line names nothing: ``Path('')`` is the current folder, so every
command that takes a path refuses ``''`` (and a NUL) as a usage error, exit 2, in one line,
before anything is read."""

from __future__ import annotations

import pytest

from tests.support.cli import CliRun

# Every command with a path argument, the empty path in each place a path goes.
ARGVS = [
    ("audit", "EMPTY"),
    ("audit", "x.whl", "--interpreter", "EMPTY"),
    ("diff", "EMPTY", "x.whl"),
    ("diff", "x.whl", "EMPTY"),
    ("can-run", "EMPTY", "--gpu", "A100"),
    ("can-load", "EMPTY", "--with", "x.whl"),
    ("can-load", "x.whl", "--with", "EMPTY"),
    ("manifest", "EMPTY"),
    ("verify", "EMPTY"),
    ("clean", "--index", "EMPTY"),
    ("build", "--plan", "--out", "EMPTY"),
    ("matrix", "m.toml", "--index", "EMPTY"),
    ("smoke", "EMPTY"),
]


@pytest.mark.parametrize("argv", ARGVS, ids=" ".join)
@pytest.mark.parametrize("bad", ["", "a\0b"], ids=["empty", "nul"])
def test_an_empty_or_nul_path_is_a_usage_error(
    cli_run: CliRun, argv: tuple[str, ...], bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # argparse ends a refused argument with SystemExit(2), as archwheel's console script does
    with pytest.raises(SystemExit) as info:
        cli_run(*(bad if word == "EMPTY" else word for word in argv))
    out, err = capsys.readouterr()
    assert info.value.code == 2, (out, err)
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err
    assert "empty path" in errors[0] or "NUL" in errors[0], errors[0]
    assert "Traceback" not in err
