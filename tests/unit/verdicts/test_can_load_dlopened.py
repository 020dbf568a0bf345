"""can-load on a library the package opens itself (``torch.ops.load_library``, no ``PyInit_``):
said so per library, judged with the scope ``ctypes.CDLL`` gives it after ``import torch``."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.can_load_fakes import (
    EXT,
    Fakes,
    compile_so,
    fakes,
    make_wheel,
    real_loader_opens,
    validate_schema,
)
from tests.support.cli import CliRun

__all__ = ["fakes"]  # the module fixture, used by name

OPS = "_C.abi3.so"  # what torch.utils.cpp_extension names a py_limited_api operator library


@pytest.fixture(scope="module")
def ops_wheel(fakes: Fakes, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``myops``: an operator library with no ``PyInit_`` that calls ``c10::foo`` (opened with
    ``torch.ops.load_library``), an extension module that exports ``PyInit__mod`` and a helper
    library that module needs."""
    d = tmp_path_factory.mktemp("ops")
    c10 = d / "libc10.so"
    c10.write_bytes(zipfile.ZipFile(fakes.torch_new).read("torch/lib/libc10.so"))
    ops = compile_so(
        d / OPS,
        "namespace c10 { int foo(int); }\nstatic int registered = c10::foo(1);\n"
        'extern "C" int myops_registered() { return registered; }\n',
        links=(str(c10),),
    )
    helper = compile_so(d / "libhelper.so", 'extern "C" int helper() { return 3; }\n',
                        soname="libhelper.so")  # fmt: skip
    module = compile_so(
        d / f"_mod.{EXT}",
        'extern "C" int helper();\nextern "C" void* PyInit__mod() { return (void*)0; }\n'
        'extern "C" int mod_call() { return helper(); }\n',
        links=(str(helper),), rpath="$ORIGIN/lib",
    )  # fmt: skip
    return make_wheel(
        d, "myops", "1.0",
        {f"myops/{OPS}": ops, f"myops/_mod.{EXT}": module, "myops/lib/libhelper.so": helper},
        ("torch>=2.14",),
    )  # fmt: skip


def _libraries(cli_run: CliRun, wheel: Path, torch: Path, code: int) -> dict[str, dict[str, Any]]:
    got, out, err = cli_run("can-load", str(wheel), "--with", str(torch), "--format", "json")
    assert got == code, out + err
    doc = json.loads(out)
    validate_schema(doc, "can-load")
    return {lib["path"]: lib for lib in doc["libraries"]}


def test_library_without_pyinit_is_judged_as_dlopened(
    fakes: Fakes, ops_wheel: Path, cli_run: CliRun, tmp_path: Path
) -> None:
    libs = _libraries(cli_run, ops_wheel, fakes.torch_new, 0)
    assert libs[f"myops/{OPS}"]["opened_as"] == "dlopened"
    assert libs[f"myops/_mod.{EXT}"]["opened_as"] == "extension-module"
    assert libs["myops/lib/libhelper.so"]["opened_as"] == "dependency"
    assert libs[f"myops/{OPS}"]["verdict"] == "loads"
    code, out, err = cli_run("can-load", str(ops_wheel), "--with", str(fakes.torch_new))
    assert code == 0, out + err
    line = " ".join(out.split())
    assert "opened with torch.ops.load_library / ctypes (no PyInit_): judged as a dlopened" in line
    # the real loader, as torch.ops.load_library opens it (ctypes.CDLL: RTLD_NOW after torch)
    ok, message = real_loader_opens(tmp_path, fakes.torch_new, ops_wheel, f"myops/{OPS}")
    assert ok, message


def test_dlopened_library_built_against_another_torch_does_not_load(
    fakes: Fakes, ops_wheel: Path, cli_run: CliRun, tmp_path: Path
) -> None:
    libs = _libraries(cli_run, ops_wheel, fakes.torch_old, 1)
    ops = libs[f"myops/{OPS}"]
    assert ops["opened_as"] == "dlopened" and ops["verdict"] == "does-not-load"
    assert [s["name"] for s in ops["missing_symbols"]] == ["_ZN3c103fooEi"]
    ok, message = real_loader_opens(tmp_path, fakes.torch_old, ops_wheel, f"myops/{OPS}")
    assert not ok and "_ZN3c103fooEi" in message


def test_library_a_module_finds_only_once_the_package_loaded_it_is_dlopened(
    fakes: Fakes, cli_run: CliRun, tmp_path: Path
) -> None:
    """torchaudio's layout: the module needs ``libown.so`` by a bare name no RPATH reaches; the
    package opens ``libown.so`` itself first (``torch.ops.load_library``), so it is said to be
    dlopened, not a dependency found on the search path."""
    own = compile_so(tmp_path / "libown.so", 'extern "C" int own() { return 3; }\n',
                     soname="libown.so")  # fmt: skip
    mod = compile_so(
        tmp_path / f"_mod.{EXT}", 'extern "C" int own();\nextern "C" int mod() { return own(); }\n',
        links=(str(own),),
    )  # fmt: skip
    (tmp_path / "w").mkdir()
    wheel = make_wheel(
        tmp_path / "w", "pkg", "1.0", {"pkg/lib/libown.so": own, f"pkg/lib/_mod.{EXT}": mod}
    )
    libs = _libraries(cli_run, wheel, fakes.torch_new, 0)
    assert libs["pkg/lib/libown.so"]["opened_as"] == "dlopened"
    assert libs[f"pkg/lib/_mod.{EXT}"]["opened_as"] == "dlopened"  # no PyInit__mod either
