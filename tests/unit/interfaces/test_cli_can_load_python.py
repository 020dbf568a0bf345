"""``can-load --torch`` on a wheel whose tags name no CPython: its advice names the option
that works (``--python-version``), and following it gets past the question."""

from __future__ import annotations

from pathlib import Path

from tests.support.can_load_fakes import compile_so, make_wheel
from tests.support.cli import CliRun


def _py3_none_wheel(folder: Path) -> Path:
    lib = compile_so(folder / "libext.so", 'extern "C" int ext_value() { return 1; }\n')
    return make_wheel(folder, "extpy", "1.0", {"extpy/libext.so": lib}, tag="py3-none-linux_x86_64")


def test_the_advice_names_python_version_and_following_it_works(
    cli_run: CliRun, tmp_path: Path
) -> None:
    wheel = _py3_none_wheel(tmp_path)
    code, _, err = cli_run("can-load", str(wheel), "--torch", "2.14.1")
    assert code == 2
    assert "no CPython of its own" in err
    assert "--python-version X.Y" in err
    assert "--python X.Y" not in err  # --python is --interpreter's old alias
    # the advice followed: the question is answered; what stops it now is the index (nothing
    # listens on port 1), not the Python
    code, _, err = cli_run(
        "can-load", str(wheel), "--torch", "2.14.1", "--python-version", "3.11",
        "--index-url", "http://127.0.0.1:1/simple",
    )  # fmt: skip
    assert code != 2, err
    assert "CPython" not in err


def test_a_bad_python_version_names_the_option(cli_run: CliRun, tmp_path: Path) -> None:
    wheel = _py3_none_wheel(tmp_path)
    code, _, err = cli_run("can-load", str(wheel), "--torch", "2.14.1", "--python-version", "3")
    assert code == 2
    assert "--python-version '3': expected X.Y" in err
