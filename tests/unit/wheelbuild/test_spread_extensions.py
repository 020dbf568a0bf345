"""archwheel's spread of a setuptools project's extension modules (wheelbuild/compile/
spread_hook.py), on a real project of small C modules that all compile one shared source with
their own macro: the serial build (one module at a time, the reproducibility check's) and the
spread one make byte-identical modules and wheels, each module its own.

Real setuptools (this Python's), a real C compiler, real imports; the wheel is packed from the
built modules and re-packed as archwheel re-packs every build's wheel (reproducible.py).
"""

from __future__ import annotations

import shutil
import sysconfig
import zipfile
from pathlib import Path

import pytest

from archwheel.wheelbuild.compile.spread_hook import configured_jobs, own_folder, why_serial
from archwheel.wheelbuild.wheel.reproducible import compare_wheels, repack_wheel
from tests.support.c_extensions import build, import_names, write_project
from tests.support.components import require

pytestmark = [pytest.mark.slow]

CC = (sysconfig.get_config_var("CC") or "cc").split()[0]


def project(root: Path, modules: int = 4) -> list[str]:
    require(shutil.which(CC) is not None, f"no C compiler ({CC})")
    require(
        (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file(),
        "no Python.h for this Python: the modules cannot be compiled",
    )
    return write_project(root, modules, functions=120)


def wheel_of(modules: dict[str, bytes], folder: Path) -> Path:
    """A wheel holding ``modules`` (in the order given), re-packed as archwheel does."""
    folder.mkdir()
    raw = folder / "raw.whl"
    with zipfile.ZipFile(raw, "w") as out:
        for name, data in modules.items():
            out.writestr(name, data)
        out.writestr("many_ops-0.dist-info/METADATA", "Metadata-Version: 2.1\nName: many-ops\n")
        out.writestr("many_ops-0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    packed = folder / "many_ops-0-cp311-cp311-linux_x86_64.whl"
    repack_wheel(raw, packed, 1_700_000_000)
    return packed


def test_serial_and_spread_builds_make_identical_modules_and_wheels(tmp_path: Path) -> None:
    root = tmp_path / "many"
    names = project(root)
    hook = tmp_path / "spread"
    serial = build(root, hook, jobs=1)
    assert f"{len(names)} extension module(s), 1 at a time" in serial.log
    temp = next((root / "build").glob("temp.*"))
    assert sorted(p.relative_to(temp).as_posix() for p in temp.rglob("shared.o")) == [
        f"archwheel-ext/{n}/src/shared.o" for n in names
    ]
    assert import_names(root) == {n: n for n in names}
    spread = build(root, hook, jobs=4)
    assert f"{len(names)} extension module(s), 4 at a time" in spread.log
    assert import_names(root) == {n: n for n in names}
    assert (
        spread.modules.keys()
        == serial.modules.keys()
        == {f"{n}{sysconfig.get_config_var('EXT_SUFFIX')}" for n in names}
    )
    assert spread.modules == serial.modules  # byte for byte
    # the wheels, members in the order each build finished them
    first = wheel_of(dict(reversed(spread.modules.items())), tmp_path / "spread-wheel")
    second = wheel_of(serial.modules, tmp_path / "serial-wheel")
    comparison = compare_wheels(first, second)
    assert comparison.identical, comparison.summary()
    assert first.read_bytes() == second.read_bytes()


def test_a_failing_module_fails_the_build_and_names_it(tmp_path: Path) -> None:
    """One module that does not compile: the build fails, the hook names the module, and no
    module starts after the failure is seen."""
    root = tmp_path / "many"
    project(root, modules=3)
    (root / "src" / "op1.c").write_text("this is not C;\n")
    with pytest.raises(AssertionError) as failed:
        build(root, tmp_path / "spread", jobs=3)
    log = str(failed.value)
    assert "error: extension module op1: command '" in log
    assert "building extension module(s) op1 failed" in log.splitlines()[-1]
    assert "Traceback" not in log


def test_the_hook_reads_only_a_plain_job_count() -> None:
    assert configured_jobs({"ARCHWHEEL_SPREAD_EXTENSIONS": "6"}) == 6
    for bad in ("", "0", "-1", "2.5", "٣", "99999"):
        assert configured_jobs({"ARCHWHEEL_SPREAD_EXTENSIONS": bad}) == 0
    assert own_folder("build/temp", "pkg._ops") == "build/temp/archwheel-ext/pkg._ops"
    assert own_folder("t", "../x") == "t/archwheel-ext/__x"  # never out of its folder


def test_a_build_ext_of_its_own_or_a_library_keeps_the_projects_loop() -> None:
    """What keeps the project's serial loop: a ``build_extension`` of its own (CMake from
    setup.py), or a setuptools ``Library`` among the modules (the others may link to it).
    setuptools' classes are stood for by their shape: the hook reads the method's identity
    and the module's class name."""

    def stock(self: object, ext: object) -> None:
        raise AssertionError("not called")

    class Extension:
        pass

    class Library(Extension):
        pass

    class Stock:  # torch's BuildExtension shape: build_extensions only
        build_extension = stock

        def __init__(self, extensions: list[Extension]) -> None:
            self.extensions = extensions

    class OwnBuild(Stock):
        def build_extension(self, ext: object) -> None:
            raise AssertionError("not called")

    modules = [Extension(), Extension()]
    assert why_serial(Stock(modules), stock) == ""
    assert "replaces build_extension" in why_serial(OwnBuild(modules), stock)
    assert "Library" in why_serial(Stock([Library(), *modules]), stock)
