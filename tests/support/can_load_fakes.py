"""Helpers for the can-load tests: fake torch and extension wheels compiled with g++."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.builders import write_zip
from tests.support.components import require

EXT = "cpython-311-x86_64-linux-gnu.so"


TAG = "cp311-cp311-manylinux_2_28_x86_64"


def _gxx() -> str:
    path = shutil.which("g++")
    require(path is not None, "g++ not found")
    assert path is not None
    return path


def compile_so(
    out: Path, source: str, *, soname: str | None = None, links: tuple[str, ...] = (),
    rpath: str | None = None, c: bool = False,
) -> Path:  # fmt: skip
    src = out.with_suffix(".c" if c else ".cc")
    src.write_text(source)
    args = [_gxx(), "-shared", "-fPIC", "-O1", "-o", str(out)]
    if c:
        args[1:1] = ["-x", "c"]
    args.append(str(src))
    if soname:
        args.append(f"-Wl,-soname,{soname}")
    args.append("-Wl,--no-as-needed")
    for lib in links:
        args += [f"-L{Path(lib).parent}", f"-l:{Path(lib).name}"]
    if rpath:  # DT_RPATH, as torch's own libraries have (new linkers write DT_RUNPATH)
        args += [f"-Wl,-rpath,{rpath}", "-Wl,--disable-new-dtags"]
    subprocess.run(args, check=True, capture_output=True)
    return out


def make_wheel(
    folder: Path,
    name: str,
    version: str,
    files: dict[str, Path],
    requires: tuple[str, ...] = (),
    tag: str = TAG,
) -> Path:
    dist = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    members = [(member, path.read_bytes()) for member, path in files.items()]
    members += [
        (f"{dist}/METADATA", meta.encode()),
        (f"{dist}/WHEEL", f"Wheel-Version: 1.0\nTag: {tag}\n".encode()),
        (f"{dist}/RECORD", b""),
    ]
    return write_zip(folder / f"{name}-{version}-{tag}.whl", members)


@dataclass(frozen=True)
class Fakes:
    torch_new: Path  # defines c10::foo and c10::bar (2.14.1)
    torch_old: Path  # defines only c10::bar (2.13.0)
    torch_cu12: Path  # 2.14.1+cu126: libc10_cuda.so needs libcudart.so.12
    ext: Path  # needs libc10.so, calls c10::foo
    ext_cuda13: Path  # needs libc10.so and libcudart.so.13
    ext_glibc: Path  # calls arc4random (GLIBC_2.36) under a manylinux_2_28 tag
    ext_so: Path  # the extension module itself, on disk


@pytest.fixture(scope="module")
def fakes(tmp_path_factory: pytest.TempPathFactory) -> Fakes:
    d = tmp_path_factory.mktemp("fakes")
    wheels = d / "wheels"
    for sub in ("new", "old", "cu12", "c13"):
        (wheels / sub).mkdir(parents=True)
    for tag, body in (("new", "int foo(int x) { return x + 1; }\n"), ("old", "")):
        (d / tag).mkdir()
        c10 = compile_so(
            d / tag / "libc10.so",
            "namespace c10 {\n" + body + "int bar() { return 2; }\n}\n",
            soname="libc10.so",
        )
        compile_so(
            d / tag / f"_C.{EXT}", "int torch_c_init() { return 0; }\n", links=(str(c10),),
            rpath="$ORIGIN/lib",
        )  # fmt: skip
    torch_new = make_wheel(
        wheels / "new",
        "torch", "2.14.1",
        {"torch/lib/libc10.so": d / "new" / "libc10.so", f"torch/_C.{EXT}": d / "new" / f"_C.{EXT}"},
    )  # fmt: skip
    torch_old = make_wheel(
        wheels / "old",
        "torch", "2.13.0",
        {"torch/lib/libc10.so": d / "old" / "libc10.so", f"torch/_C.{EXT}": d / "old" / f"_C.{EXT}"},
    )  # fmt: skip
    # CUDA runtimes: stubs with the sonames the real ones have
    cu = d / "cuda"
    cu.mkdir()
    cudart12 = compile_so(cu / "libcudart.so.12", 'extern "C" int cudaGetDeviceCount(int* n)'
                          " { *n = 0; return 0; }\n", soname="libcudart.so.12")  # fmt: skip
    cudart13 = compile_so(cu / "libcudart.so.13", 'extern "C" int cudaGetDeviceCount(int* n)'
                          " { *n = 0; return 0; }\n", soname="libcudart.so.13")  # fmt: skip
    c10_cuda = compile_so(
        cu / "libc10_cuda.so", "namespace c10 { namespace cuda { int count() { return 1; } } }\n",
        soname="libc10_cuda.so", links=(str(cudart12),),
    )  # fmt: skip
    c_cuda = compile_so(
        cu / f"_C.{EXT}", "int torch_c_init() { return 0; }\n",
        links=(str(d / "new" / "libc10.so"), str(c10_cuda)), rpath="$ORIGIN/lib",
    )  # fmt: skip
    torch_cu12 = make_wheel(
        wheels / "cu12", "torch", "2.14.1+cu126",
        {"torch/lib/libc10.so": d / "new" / "libc10.so", "torch/lib/libc10_cuda.so": c10_cuda,
         f"torch/_C.{EXT}": c_cuda},
    )  # fmt: skip
    ext_so = compile_so(
        d / f"_ext.{EXT}",
        'namespace c10 { int foo(int); }\nextern "C" int ext_call() { return c10::foo(1); }\n',
        links=(str(d / "new" / "libc10.so"),),
    )
    ext = make_wheel(wheels, "myext", "1.0", {f"myext/_ext.{EXT}": ext_so}, ("torch>=2.14",))
    cuda_so = compile_so(
        d / f"_cuda.{EXT}",
        'extern "C" int cudaGetDeviceCount(int*);\nnamespace c10 { int bar(); }\n'
        'extern "C" int ext_call() { int n; cudaGetDeviceCount(&n); return c10::bar() + n; }\n',
        links=(str(d / "new" / "libc10.so"), str(cudart13)),
    )
    ext_cuda13 = make_wheel(wheels / "c13", "cuext", "1.0", {f"cuext/_cuda.{EXT}": cuda_so})
    glibc_so = compile_so(
        d / f"_rand.{EXT}",
        "#include <stdlib.h>\nunsigned int ext_rand(void) { return arc4random(); }\n",
        c=True,
    )
    ext_glibc = make_wheel(wheels, "randext", "1.0", {f"randext/_rand.{EXT}": glibc_so})
    return Fakes(torch_new, torch_old, torch_cu12, ext, ext_cuda13, ext_glibc, ext_so)


def real_loader_opens(
    tmp: Path, torch: Path, ext: Path, module: str, extra: dict[str, Path] | None = None
) -> tuple[bool, str]:
    """What the real loader says: unpack both wheels into one site-packages, open torch's _C
    (as ``import torch`` does), then the extension with RTLD_NOW (as Python imports it)."""
    site = tmp / "site"
    shutil.rmtree(site, ignore_errors=True)
    for wheel in (torch, ext):
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(site)
    for where, path in (extra or {}).items():
        shutil.copy(path, site / where)
    code = (
        "import ctypes, os, sys\n"
        f"ctypes.CDLL({str(site / 'torch' / f'_C.{EXT}')!r}, mode=os.RTLD_NOW)\n"
        f"try:\n    ctypes.CDLL({str(site / module)!r}, mode=os.RTLD_NOW)\n"
        "except OSError as e:\n    print(e); sys.exit(1)\n"
        "print(''.join(l for l in open('/proc/self/maps') if 'libcudart' in l))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    return proc.returncode == 0, proc.stdout + proc.stderr


def validate_schema(document: object, name: str) -> None:
    from importlib import resources

    import jsonschema

    text = resources.files("archwheel.interfaces").joinpath(f"schema/{name}.schema.json")
    jsonschema.validate(document, json.loads(text.read_text()))
