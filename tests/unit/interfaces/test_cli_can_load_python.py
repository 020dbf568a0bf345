"""``can-load --torch`` on a wheel whose tags name no CPython ABI of their own: an abi3 or
``py3-none`` wheel is judged with the Python its tag serves (this host's, else the lowest it
serves), said in one line; a wheel naming several CPythons is asked which, and the advice names
the option that works (``--python-version``)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.can_load_fakes import compile_so, make_wheel
from tests.support.cli import CliRun


def _wheel(folder: Path, tag: str, extra_tag: str | None = None) -> Path:
    lib = compile_so(folder / "libext.so", 'extern "C" int ext_value() { return 1; }\n')
    wheel = make_wheel(folder, "extpy", "1.0", {"extpy/libext.so": lib}, tag=tag)
    if extra_tag is None:
        return wheel
    # a second Tag line in WHEEL: the wheel serves two CPythons
    with zipfile.ZipFile(wheel) as zf:
        members = [(i.filename, zf.read(i)) for i in zf.infolist()]
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, data in members:
            extra = f"Tag: {extra_tag}\n".encode() if name.endswith("/WHEEL") else b""
            zf.writestr(name, data + extra)
    return wheel


HOST = f"{sys.version_info.major}.{sys.version_info.minor}"
NO_INDEX = ("--index-url", "http://127.0.0.1:1/simple")  # nothing listens on port 1


@pytest.mark.parametrize(
    ("tag", "python", "why"),
    [
        ("py3-none-linux_x86_64", HOST, f"its tag py3-none serves this host's Python {HOST}"),
        ("cp39-abi3-linux_x86_64", HOST, f"its tag cp39-abi3 serves this host's Python {HOST}"),
        ("cp399-abi3-linux_x86_64", "3.99", "does not serve this host's Python"),
    ],
)
def test_an_abi3_or_py3_wheel_takes_the_python_its_tag_serves(
    cli_run: CliRun, tmp_path: Path, tag: str, python: str, why: str
) -> None:
    wheel = _wheel(tmp_path, tag)
    code, _, err = cli_run("can-load", str(wheel), "--torch", "2.14.1", *NO_INDEX)
    # what stops it now is the index, not the Python
    assert code != 2, err
    assert "CPython" not in err
    assert f"Python {python}: " in err and why in err


def test_several_cpythons_ask_which_and_following_the_advice_works(
    cli_run: CliRun, tmp_path: Path
) -> None:
    wheel = _wheel(tmp_path, "cp311-cp311-linux_x86_64", extra_tag="cp312-cp312-linux_x86_64")
    code, _, err = cli_run("can-load", str(wheel), "--torch", "2.14.1")
    assert code == 2
    assert "several CPythons (cp311, cp312)" in err
    assert "--python-version X.Y" in err
    assert "--python X.Y" not in err  # --python is --interpreter's old alias
    code, _, err = cli_run(
        "can-load", str(wheel), "--torch", "2.14.1", "--python-version", "3.11", *NO_INDEX
    )
    assert code != 2, err
    assert "CPython" not in err


def test_a_bad_python_version_names_the_option(cli_run: CliRun, tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, "py3-none-linux_x86_64")
    code, _, err = cli_run("can-load", str(wheel), "--torch", "2.14.1", "--python-version", "3")
    assert code == 2
    assert "--python-version '3': expected X.Y" in err
