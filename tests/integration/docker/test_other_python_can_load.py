"""A cp313 wheel on a host whose Python is not 3.13: can-load imports it for real in a container
of archwheel/debian:trixie (the base whose CPython is 3.13), with no network, installed from the
local files, and reads trixie's libc as the system's. The wheels are real: a C extension module
for CPython 3.13 and a small torch stand-in, compiled with trixie's gcc against its python3.13
headers; one extension calls a function torch's library exports, the other one it does not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from archwheel.effects.engine import ContainerEngine, EngineSettings
from archwheel.effects.settings import Settings
from archwheel.inspection.python_container import IMAGE_REPOSITORY, extension_modules
from archwheel.smoke.choose import EnvironmentOptions, make_environment
from archwheel.smoke.environments import ContainerEnvironment
from archwheel.wheelbuild.images.baseimage import ensure_base_image
from tests.support.can_load_fakes import make_wheel
from tests.support.cli import CliRun

pytestmark = [pytest.mark.docker]

BUILDER = "archwheel-test/py313-build:trixie"
EXT = "cpython-313-x86_64-linux-gnu.so"
TAG = "cp313-cp313-manylinux_2_28_x86_64"
C10 = "int c10_foo(int x) { return x + 1; }\n"
TORCH_C = "extern int c10_foo(int);\nint torch_c_init(void) { return c10_foo(0); }\n"
TORCH_INIT = (
    "import ctypes, os\n"
    "ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'lib', 'libc10.so'), mode=os.RTLD_GLOBAL)\n"
)
MODULE = """\
#include <Python.h>
extern int {call}(int);
static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, "_tiny", NULL, -1, NULL}};
PyMODINIT_FUNC PyInit__tiny(void) {{
    PyObject *m = PyModule_Create(&def);
    if (m) PyModule_AddIntConstant(m, "answer", {call}(41));
    return m;
}}
"""


@pytest.fixture(scope="module")
def engine(docker_engine: str) -> ContainerEngine:
    return ContainerEngine(EngineSettings.create("docker", Settings.from_environ({})), echo=None)


@pytest.fixture(scope="module")
def wheels(
    engine: ContainerEngine, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path, Path]:
    """(torch, the extension that loads, the one that calls what torch lacks), cp313."""
    if sys.version_info[:2] == (3, 13):
        pytest.skip("this host's Python is 3.13: the wheels are not for another Python")
    base = ensure_base_image(engine, suite="trixie").tag
    if engine.image_id(BUILDER) is None:
        context = tmp_path_factory.mktemp("builder")
        (context / "Dockerfile").write_text(
            f"FROM {base}\nRUN apt-get update && apt-get install -y --no-install-recommends "
            "gcc libc6-dev python3-dev && rm -rf /var/lib/apt/lists/*\n"
        )
        engine.build_image(context, BUILDER)
    work = tmp_path_factory.mktemp("cp313")
    (work / "lib").mkdir()
    (work / "c10.c").write_text(C10)
    (work / "torch_c.c").write_text(TORCH_C)
    (work / "good.c").write_text(MODULE.format(call="c10_foo"))
    (work / "bad.c").write_text(MODULE.format(call="c10_missing"))
    script = (
        "set -e; cd /w\n"
        "gcc -shared -fPIC -O1 -o lib/libc10.so -Wl,-soname,libc10.so c10.c\n"
        f"gcc -shared -fPIC -O1 -o _C.{EXT} torch_c.c -Llib -l:libc10.so "
        "-Wl,-rpath,'$ORIGIN/lib'\n"
        "for m in good bad; do gcc -shared -fPIC -O1 $(python3.13-config --includes) "
        "-o $m.so $m.c -Llib -l:libc10.so; done\n"
    )
    subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--user", f"{os.getuid()}:{os.getgid()}",
         "-v", f"{work}:/w", BUILDER, "sh", "-c", script],
        check=True, capture_output=True,
    )  # fmt: skip
    (work / "__init__.py").write_text(TORCH_INIT)
    (work / "empty.py").write_text("")
    out = work / "wheels"
    for sub in ("torch", "good", "bad"):
        (out / sub).mkdir(parents=True)
    torch = make_wheel(
        out / "torch", "torch", "2.14.1",
        {"torch/__init__.py": work / "__init__.py", "torch/lib/libc10.so": work / "lib/libc10.so",
         f"torch/_C.{EXT}": work / f"_C.{EXT}"},
        tag=TAG,
    )  # fmt: skip
    ext = {
        name: make_wheel(
            out / name,
            "tinyext",
            "1.0",
            {"tinyext/__init__.py": work / "empty.py", f"tinyext/_tiny.{EXT}": work / f"{name}.so"},
            tag=TAG,
        )
        for name in ("good", "bad")
    }
    return torch, ext["good"], ext["bad"]


def test_the_extension_modules_of_a_wheel_are_named(wheels: tuple[Path, Path, Path]) -> None:
    assert extension_modules(wheels[1]) == ("tinyext._tiny",)
    assert extension_modules(wheels[0]) == ("torch._C",)


def test_a_cp313_wheel_is_imported_in_trixie_and_loads(
    wheels: tuple[Path, Path, Path], cli_run: CliRun
) -> None:
    torch, good, _bad = wheels
    code, out, err = cli_run("can-load", str(good), "--with", str(torch), "--format", "json")
    assert code == 0, err
    document = json.loads(out)
    check = document["import_check"]
    assert check["image"] == f"{IMAGE_REPOSITORY}:trixie"
    assert check["python"] == "3.13"
    assert check["ok"] is True
    assert check["torch_error"] is None
    assert check["modules"] == [{"module": "tinyext._tiny", "error": None}]
    assert "not this host's" in err and "with no network" in err


def test_a_cp313_wheel_that_needs_what_torch_lacks_fails_in_both(
    wheels: tuple[Path, Path, Path], cli_run: CliRun
) -> None:
    torch, _good, bad = wheels
    code, out, err = cli_run("can-load", str(bad), "--with", str(torch), "--format", "json")
    assert code == 1, err
    document = json.loads(out)
    (module,) = document["import_check"]["modules"]
    assert module["module"] == "tinyext._tiny"
    assert "undefined symbol: c10_missing" in module["error"]
    assert document["import_check"]["ok"] is False
    assert "c10_missing" in out.split('"import_check"')[0]  # the model names it as well

    code, table, err = cli_run("can-load", str(bad), "--with", str(torch))
    assert code == 1, err
    assert (
        "import check in archwheel/debian-python:trixie (Python 3.13, no network): FAILS" in table
    )
    assert "import tinyext._tiny: ImportError" in table


def test_smoke_of_a_cp313_wheel_runs_in_containers_of_trixie(
    wheels: tuple[Path, Path, Path],
) -> None:
    torch, good, _bad = wheels
    said: list[str] = []
    options = EnvironmentOptions(wheels=(good, torch), backend="venv", install_timeout=60.0)
    environment = make_environment(options, said.append)
    assert isinstance(environment, ContainerEnvironment)
    assert environment.image == f"{IMAGE_REPOSITORY}:trixie"
    assert any("is for Python 3.13" in line and "--backend docker" in line for line in said)
    host = make_environment(
        EnvironmentOptions(wheels=(good,), backend="venv", install_timeout=60.0,
                           interpreter=sys.executable),
        said.append,
    )  # fmt: skip
    assert not isinstance(host, ContainerEnvironment)  # an interpreter given is taken as asked
