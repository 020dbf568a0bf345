"""Small real wheels with native code, compiled with g++ here, for the repair step's tests.

``demo`` is laid out like a torch wheel that was just built in a builder image: an extension
module ``demo/_core.cpython-*.so`` that needs ``demo/lib/libcore.so``, which needs libgomp (a
system library the repair bundles) and ``libprovider.so.1`` (a library another wheel provides,
as the nvidia-* wheels do: ``nvidia/fake/lib/libprovider.so.1`` in ``nvidia-fake-cu13``). None
of them has an RPATH, exactly as when the libraries were found through ``/usr/local/cuda/lib64``
at build time: installed as they are, ``import demo._core`` fails.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tests.support.components import require

CORE_CPP = r"""
#include <omp.h>
extern "C" int provider_value();
extern "C" int core_value() { return provider_value() * 100 + (omp_get_max_threads() > 0); }
"""
PROVIDER_CPP = r"""
extern "C" int provider_value() { return 7; }
"""
MODULE_CPP = r"""
#include <Python.h>
extern "C" int core_value();
static PyObject* value(PyObject*, PyObject*) { return PyLong_FromLong(core_value()); }
static PyMethodDef methods[] = {{"value", value, METH_NOARGS, nullptr}, {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_core", nullptr, -1, methods};
PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&module); }
"""


@dataclass(frozen=True)
class DemoWheels:
    demo: Path  # demo-1.0-<tag>.whl, unrepaired
    provider: Path  # nvidia_fake_cu13-1.0-py3-none-<plat>.whl
    folder: Path  # both wheels (a --find-links folder)
    libgomp_dir: Path  # where the host's libgomp.so.1 is


def _gxx(*args: str) -> None:
    proc = subprocess.run(["g++", *args], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]


def write_wheel(
    path: Path, files: dict[str, Path | bytes], name: str, tag: str, version: str = "1.0"
) -> Path:
    """A wheel with ``files`` (bytes or a file to copy) and a valid RECORD."""
    dist_info = f"{name}-{version}.dist-info"
    contents: dict[str, bytes] = {
        k: (v if isinstance(v, bytes) else v.read_bytes()) for k, v in files.items()
    }
    contents.setdefault(
        f"{dist_info}/METADATA",
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
    )
    contents[f"{dist_info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: archwheel-tests\nRoot-Is-Purelib: false\nTag: {tag}\n"
    ).encode()
    lines = []
    for member, data in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{member},sha256={digest},{len(data)}")
    lines.append(f"{dist_info}/RECORD,,")
    contents[f"{dist_info}/RECORD"] = ("\n".join(lines) + "\n").encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in contents.items():
            info = zipfile.ZipInfo(member, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (
                0o755 if member.endswith(".so") or ".so." in member else 0o644
            ) << 16
            zf.writestr(info, data)
    return path


def build_demo_wheels(folder: Path) -> DemoWheels:
    require(shutil.which("g++") is not None, "g++ is not installed")
    src = folder / "src"
    src.mkdir(parents=True)
    (src / "core.cpp").write_text(CORE_CPP)
    (src / "provider.cpp").write_text(PROVIDER_CPP)
    (src / "module.cpp").write_text(MODULE_CPP)
    build = folder / "build"
    build.mkdir()
    _gxx("-shared", "-fPIC", "-O1", "-Wl,-soname,libprovider.so.1",
         "-o", str(build / "libprovider.so.1"), str(src / "provider.cpp"))  # fmt: skip
    _gxx("-shared", "-fPIC", "-O1", "-fopenmp", "-Wl,-soname,libcore.so",
         "-o", str(build / "libcore.so"), str(src / "core.cpp"),
         f"-L{build}", "-l:libprovider.so.1")  # fmt: skip
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    module = build / f"_core{suffix}"
    _gxx("-shared", "-fPIC", "-O1", f"-I{include}", "-o", str(module),
         str(src / "module.cpp"), f"-L{build}", "-lcore")  # fmt: skip
    gomp = subprocess.run(
        ["g++", "-print-file-name=libgomp.so.1"], capture_output=True, text=True, check=True
    ).stdout.strip()
    require(Path(gomp).is_file(), "g++ knows no libgomp.so.1")
    wheels = folder / "wheels"
    wheels.mkdir()
    py = f"cp{sysconfig.get_python_version().replace('.', '')}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    demo = write_wheel(
        wheels / f"demo-1.0-{py}-{py}-{plat}.whl",
        {
            "demo/__init__.py": b"",
            f"demo/_core{suffix}": module,
            "demo/lib/libcore.so": build / "libcore.so",
        },
        "demo",
        f"{py}-{py}-{plat}",
    )
    provider = write_wheel(
        wheels / f"nvidia_fake_cu13-1.0-py3-none-{plat}.whl",
        {"nvidia/fake/lib/libprovider.so.1": build / "libprovider.so.1"},
        "nvidia_fake_cu13",
        f"py3-none-{plat}",
    )
    return DemoWheels(demo, provider, wheels, Path(gomp).resolve().parent)
