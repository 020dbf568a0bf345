"""``archwheel can-load``: the dynamic section reader and the loader model.

Small libraries are compiled here with the host's g++ into fake torch and extension wheels; the
verdict is then checked against what the real dynamic loader does with the same files (they are
unpacked into a temporary site-packages and opened with ``ctypes`` after torch's ``_C``, as
``import torch`` would have). The real torchvision/torch wheels are the ``realwheel`` cases.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from archwheel.binary.dynamic import (
    DT_STRSZ,
    parse_dynamic,
    program_headers,
    read_file_dynamic,
    read_member_dynamic,
    read_wheel_dynamic,
)
from archwheel.binary.zipread import WheelReader
from archwheel.verdicts.load import policy_for, version_allowed
from tests.builders import write_zip
from tests.conftest import CACHE, CliRun, fetch_wheel, require
from tests.venvs import installed_version, make_venv, pip_install, venv_python

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


# -- the reader --------------------------------------------------------------------------------


def test_reader_agrees_with_readelf(fakes: Fakes) -> None:
    readelf = shutil.which("readelf")
    require(readelf is not None, "readelf (binutils) not found")
    assert readelf is not None
    info = read_file_dynamic(fakes.ext_so)
    assert info.complete, info.problems
    dyn = subprocess.run(
        [readelf, "-dW", str(fakes.ext_so)], capture_output=True, text=True, check=False
    )
    needed = [ln.split("[", 1)[1].rstrip("]") for ln in dyn.stdout.splitlines() if "(NEEDED)" in ln]
    assert list(info.needed) == needed
    syms = subprocess.run([readelf, "--dyn-syms", "-W", str(fakes.ext_so)], capture_output=True,
                          text=True, check=True).stdout.splitlines()  # fmt: skip
    undefined = {ln.split()[7] for ln in syms if " UND " in ln and len(ln.split()) >= 8}
    ours = {f"{u.name}@{u.version}" if u.version else u.name for u in info.undefined}
    # readelf appends " (N)" version indexes in some releases: compare names with versions
    assert {s.split(" ")[0] for s in undefined} == ours
    assert "_ZN3c103fooEi" in {u.name for u in info.undefined}
    assert "ext_call" in info.exports


def test_member_reader_equals_file_reader(fakes: Fakes) -> None:
    reader = WheelReader(fakes.ext)
    member = next(m for m in reader.members if m.name.endswith(EXT))
    from_member = read_member_dynamic(fakes.ext, reader.archive_size, member)
    from_file = read_file_dynamic(fakes.ext_so, member.name)
    assert from_member == from_file


def test_truncated_library_is_a_problem_not_a_traceback(fakes: Fakes, tmp_path: Path) -> None:
    data = fakes.ext_so.read_bytes()
    cut = tmp_path / "cut.so"
    cut.write_bytes(data[: len(data) // 3])
    info = read_file_dynamic(cut)
    assert not info.complete
    assert "past the end of the file" in info.problems[0] or "no loadable" in info.problems[0]


def test_string_table_past_the_end_is_reported(fakes: Fakes, tmp_path: Path) -> None:
    data = bytearray(fakes.ext_so.read_bytes())
    is64, _loads, dyn = program_headers(lambda o, n: bytes(data[o : o + n]), len(data))
    assert is64 and dyn is not None
    for pos in range(dyn.offset, dyn.offset + dyn.filesz, 16):
        tag, _value = struct.unpack_from("<qQ", data, pos)
        if tag == DT_STRSZ:
            struct.pack_into("<qQ", data, pos, tag, 1 << 40)
    info = parse_dynamic(lambda o, n: bytes(data[o : o + n]), len(data), "patched.so")
    assert info.problems and "dynamic string table (.dynstr)" in info.problems[0]
    assert "past the end of the file" in info.problems[0]


def test_not_elf_members_are_reported(tmp_path: Path) -> None:
    wheel = write_zip(tmp_path / "x-1-py3-none-any.whl", [("x/fake.so", b"just text")])
    (info,) = read_wheel_dynamic(wheel)
    assert info.file_kind == "not-elf" and not info.is_dynamic


# -- the policy -----------------------------------------------------------------------------------


def test_policy_versions() -> None:
    policy = policy_for(["cp311-cp311-manylinux_2_28_x86_64"])
    assert policy is not None and policy.name == "manylinux_2_28"
    assert version_allowed("GLIBC_2.28", policy) is True
    assert version_allowed("GLIBC_2.36", policy) is False
    assert version_allowed("GLIBCXX_3.4.30", policy) is False
    assert version_allowed("GLIBCXX_3.4.21", policy) is True
    assert version_allowed("libcudart.so.13", policy) is None
    assert policy_for(["py3-none-any"]) is None


# -- verdicts, checked against the real loader -----------------------------------------------------


def test_extension_loads_with_its_torch(fakes: Fakes, cli_run: CliRun, tmp_path: Path) -> None:
    code, out, err = cli_run("can-load", str(fakes.ext), "--with", str(fakes.torch_new))
    assert code == 0, out + err
    assert "loads" in out and "satisfied" in out
    ok, message = real_loader_opens(tmp_path, fakes.torch_new, fakes.ext, f"myext/_ext.{EXT}")
    assert ok, message


def test_extension_fails_with_older_torch(fakes: Fakes, cli_run: CliRun, tmp_path: Path) -> None:
    code, out, err = cli_run(
        "can-load", str(fakes.ext), "--with", str(fakes.torch_old), "--format", "json"
    )
    assert code == 1, out + err
    doc = json.loads(out)
    validate_schema(doc, "can-load")
    (lib,) = doc["libraries"]
    assert lib["verdict"] == "does-not-load"
    assert [s["name"] for s in lib["missing_symbols"]] == ["_ZN3c103fooEi"]
    if shutil.which("c++filt"):
        assert lib["missing_symbols"][0]["demangled"] == "c10::foo(int)"
    assert any("another torch version" in c for c in lib["causes"])
    assert doc["metadata_conflicts"] and "NOT satisfied" in doc["metadata_conflicts"][0]
    ok, message = real_loader_opens(tmp_path, fakes.torch_old, fakes.ext, f"myext/_ext.{EXT}")
    assert not ok and "_ZN3c103fooEi" in message


def test_cuda13_extension_next_to_cuda12_torch(
    fakes: Fakes, cli_run: CliRun, tmp_path: Path
) -> None:
    code, out, err = cli_run("can-load", str(fakes.ext_cuda13), "--with", str(fakes.torch_cu12))
    assert code == 1, out + err
    assert "libcudart.so.13" in out
    assert "CUDA major mismatch" in out and "CUDA 12" in out
    # The real loader: torch's libcudart.so.12 is loadable (put where torch's RPATH finds it),
    # the extension's libcudart.so.13 is nowhere.
    ok, message = real_loader_opens(
        tmp_path, fakes.torch_cu12, fakes.ext_cuda13, f"cuext/_cuda.{EXT}"
    )
    assert not ok
    assert "libcudart.so.12" in message or "libcudart.so.13" in message
    cudart12 = fakes.ext_so.parent / "cuda" / "libcudart.so.12"
    ok, message = real_loader_opens(
        tmp_path, fakes.torch_cu12, fakes.ext_cuda13, f"cuext/_cuda.{EXT}",
        {"torch/lib/libcudart.so.12": cudart12},
    )  # fmt: skip
    # Only a libcudart.so.13 outside the environment (a CUDA 13 toolkit in this host's
    # ld.so.cache) can satisfy it; on a machine without one the import fails.
    if ok:
        site = str(tmp_path / "site")
        cudart13 = [ln for ln in message.splitlines() if ln.endswith("libcudart.so.13")]
        assert cudart13 and not any(site in ln for ln in cudart13)
    else:
        assert "libcudart.so.13" in message


def test_glibc_newer_than_the_tag(fakes: Fakes, cli_run: CliRun) -> None:
    code, out, err = cli_run("can-load", str(fakes.ext_glibc), "--with", str(fakes.torch_new))
    assert code == 1, out + err
    assert "GLIBC_2.36" in out and "manylinux_2_28" in out


# -- bad input --------------------------------------------------------------------------------------


def test_with_is_not_torch(fakes: Fakes, cli_run: CliRun) -> None:
    code, _out, err = cli_run("can-load", str(fakes.ext), "--with", str(fakes.ext_glibc))
    assert code == 2
    assert "none of the --with wheels is torch" in err and "Traceback" not in err


def test_two_torches(fakes: Fakes, cli_run: CliRun) -> None:
    code, _out, err = cli_run(
        "can-load", str(fakes.ext), "--with", str(fakes.torch_new), "--with", str(fakes.torch_old)
    )
    assert code == 2 and "two torches" in err


def test_wheel_without_elf(fakes: Fakes, cli_run: CliRun, tmp_path: Path) -> None:
    wheel = tmp_path / "pure" / f"pure-1.0-{TAG}.whl"
    wheel.parent.mkdir()
    make_wheel(wheel.parent, "pure", "1.0", {})
    code, out, err = cli_run("can-load", str(wheel), "--with", str(fakes.torch_new))
    assert code == 3, out + err
    assert "no shared library inside" in out


def test_broken_library_in_wheel(fakes: Fakes, cli_run: CliRun, tmp_path: Path) -> None:
    data = fakes.ext_so.read_bytes()
    broken = tmp_path / "b.so"
    broken.write_bytes(data[: len(data) // 3])
    (tmp_path / "w").mkdir()
    wheel = make_wheel(tmp_path / "w", "broken", "1.0", {f"broken/_b.{EXT}": broken})
    code, out, err = cli_run("can-load", str(wheel), "--with", str(fakes.torch_new))
    assert code == 3, out + err
    assert "past the end" in out or "no loadable" in out


def test_not_a_wheel(cli_run: CliRun, tmp_path: Path) -> None:
    path = tmp_path / "x.whl"
    path.write_bytes(b"not a zip")
    code, _out, err = cli_run("can-load", str(path), "--with", str(path))
    assert code == 3 and "Traceback" not in err


# -- the real wheels -------------------------------------------------------------------------------


@pytest.mark.realwheel
@pytest.mark.slow
def test_torchvision_against_torch_2_14_1(
    torchvision_wheel: Path, torch_wheel: Path, cli_run: CliRun
) -> None:
    code, out, err = cli_run(
        "can-load", str(torchvision_wheel), "--with", str(torch_wheel), "--format", "json"
    )
    assert code == 0, out + err
    doc = json.loads(out)
    validate_schema(doc, "can-load")
    libs = {lib["path"]: lib for lib in doc["libraries"]}
    stable = libs["torchvision/_C_stable.so"]
    assert stable["verdict"] == "loads"
    assert stable["symbols_checked"] > 100
    assert any("torch>=2.14.0" in f and "satisfied" in f for f in doc["facts"])
    assert "libcudart.so.13" in doc["assumed_loaded_by_torch"]
    assert "libnccl.so.2" in doc["assumed_loaded_by_torch"]
    # an nvidia-* wheel given with --with is laid out under site-packages/nvidia/, where torch's
    # RPATH ($ORIGIN/../../nvidia/nccl/lib) finds it: its library is no longer assumed
    nccl = fetch_wheel("nvidia-nccl-cu13==2.30.7")
    code, out, err = cli_run(
        "can-load", str(torchvision_wheel), "--with", str(torch_wheel), "--with", str(nccl),
        "--format", "json",
    )  # fmt: skip
    assert code == 0, out + err
    assert "libnccl.so.2" not in json.loads(out)["assumed_loaded_by_torch"]


@pytest.mark.realwheel
@pytest.mark.slow
def test_torchvision_against_cpu_torch_2_13_0(torchvision_wheel: Path, cli_run: CliRun) -> None:
    torch_cpu = fetch_wheel("torch==2.13.0")
    code, out, err = cli_run(
        "can-load", str(torchvision_wheel), "--with", str(torch_cpu), "--format", "json"
    )
    assert code == 1, out + err
    doc = json.loads(out)
    stable = next(lib for lib in doc["libraries"] if lib["path"] == "torchvision/_C_stable.so")
    assert stable["verdict"] == "does-not-load"
    assert {"libc10_cuda.so", "libtorch_cuda.so"} <= set(stable["missing_libraries"])
    assert any("CPU-only torch" in c for c in stable["causes"])
    # the stable C ABI symbols torch 2.13.0's CPU libraries hold do resolve
    assert stable["missing_symbols"] == []
    assert doc["metadata_conflicts"] and "torch>=2.14.0" in doc["metadata_conflicts"][0]


# -- the verdict against the real import, in real environments (slow) --------------------------

TORCH_CPU_VENV = CACHE / "venvs" / "torch-2.13.0-cpu"


@pytest.fixture(scope="session")
def torch_cpu_venv() -> Path:
    """A venv with the real torch 2.13.0+cpu wheel (the only 2.13.0 the local index has)."""
    python = venv_python(TORCH_CPU_VENV)
    if installed_version(python, "torch") != "2.13.0+cpu":
        TORCH_CPU_VENV.parent.mkdir(parents=True, exist_ok=True)
        make_venv(TORCH_CPU_VENV)
        try:
            pip_install(python, str(fetch_wheel("torch==2.13.0")))
        except RuntimeError as exc:
            require(False, str(exc))
    return python


def really_loads(python: Path, wheel: Path, tmp: Path) -> dict[str, tuple[bool, str]]:
    """`import torch` in a real environment, then open each of the wheel's extension modules
    with RTLD_NOW from an unpacked copy (as Python's import does): member -> (loads, message)."""
    site = tmp / wheel.stem
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
        modules = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".so")]
    code = (
        "import ctypes, json, os, sys\nimport torch\nout = {}\n"
        f"for m in {modules!r}:\n"
        f"    try:\n        ctypes.CDLL(os.path.join({str(site)!r}, m), mode=os.RTLD_NOW)\n"
        "        out[m] = [True, '']\n"
        "    except OSError as e:\n        out[m] = [False, str(e)]\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=True, timeout=600
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return {m: (bool(ok), str(msg)) for m, (ok, msg) in result.items()}


def _check_against_import(
    cli_run: CliRun, python: Path, wheel: Path, torch: Path, tmp: Path
) -> dict[str, object]:
    code, out, err = cli_run("can-load", str(wheel), "--with", str(torch), "--format", "json")
    assert code in (0, 1), out + err
    doc = json.loads(out)
    verdicts = {lib["path"]: lib for lib in doc["libraries"]}
    real = really_loads(python, wheel, tmp)
    assert real
    for module, (ok, message) in real.items():
        lib = verdicts[module]
        assert (lib["verdict"] == "loads") == ok, (module, lib, message)
        if not ok:  # the loader's first complaint is among the verdict's findings
            named = [*lib["missing_libraries"], *(s["name"] for s in lib["missing_symbols"])]
            assert any(n in message for n in named), (message, named)
    return dict(doc)


@pytest.mark.realwheel
@pytest.mark.slow
@pytest.mark.parametrize("vision", ["0.29.1", "0.28.0"])
def test_torchvision_verdict_is_what_import_does_with_2_14_1(
    vision: str, torch_venv: Path, torch_wheel: Path, cli_run: CliRun, tmp_path: Path
) -> None:
    wheel = fetch_wheel(f"torchvision=={vision}")
    doc = _check_against_import(cli_run, torch_venv, wheel, torch_wheel, tmp_path)
    if vision == "0.28.0":  # built against torch 2.13.0 with the ordinary C++ API
        assert doc["verdict"] == "does-not-load"
        assert any("torch==2.13.0" in c for c in doc["metadata_conflicts"])  # type: ignore[attr-defined]
    else:  # the stable C ABI
        assert doc["verdict"] == "loads"


@pytest.mark.realwheel
@pytest.mark.slow
@pytest.mark.parametrize("vision", ["0.29.1", "0.28.0"])
def test_torchvision_verdict_is_what_import_does_with_2_13_0_cpu(
    vision: str, torch_cpu_venv: Path, cli_run: CliRun, tmp_path: Path
) -> None:
    wheel = fetch_wheel(f"torchvision=={vision}")
    doc = _check_against_import(
        cli_run, torch_cpu_venv, wheel, fetch_wheel("torch==2.13.0"), tmp_path
    )
    assert doc["verdict"] == "does-not-load"


def test_corrupted_libraries_never_raise(fakes: Fakes) -> None:
    """Every single-field corruption of the header, program headers and dynamic section, and
    random byte damage anywhere: a result (with problems where the damage matters), never an
    exception."""
    import random

    data = fakes.ext_so.read_bytes()
    _is64, _loads, dyn = program_headers(lambda o, n: data[o : o + n], len(data))
    assert dyn is not None
    rng = random.Random(11)
    targets = list(range(0, 64 + 56 * 12, 4)) + list(range(dyn.offset, dyn.offset + dyn.filesz, 4))
    cases = [(pos, value) for pos in targets for value in (0, 0xFFFFFFFF, 0x7FFFFFF0)]
    cases += [(rng.randrange(len(data) - 4), rng.getrandbits(32)) for _ in range(300)]
    for pos, value in cases:
        damaged = bytearray(data)
        struct.pack_into("<I", damaged, pos, value)
        blob = bytes(damaged)
        info = parse_dynamic(lambda o, n, b=blob: b[o : o + n], len(blob), "x.so")  # type: ignore[misc]
        assert isinstance(info.problems, tuple)


@pytest.mark.realwheel
@pytest.mark.slow
def test_installed_environment(torch_venv: Path, cli_run: CliRun) -> None:
    """--installed reads torch and its nvidia-* packages from the environment: nothing is
    assumed, and the verdicts are those the import gives (test above)."""
    code, out, err = cli_run(
        "can-load", str(fetch_wheel("torchvision==0.29.1")), "--installed",
        "--python", str(torch_venv), "--format", "json",
    )  # fmt: skip
    assert code == 0, out + err
    doc = json.loads(out)
    assert doc["assumed_loaded_by_torch"] == []
    code, out, err = cli_run(
        "can-load", str(fetch_wheel("torchvision==0.28.0")), "--installed",
        "--python", str(torch_venv),
    )  # fmt: skip
    assert code == 1, out + err
    assert "c10_cuda_check_implementation" in out


TWICE = """\
#include <torch/torch.h>

struct Twice : public torch::autograd::Function<Twice> {
  static torch::Tensor forward(torch::autograd::AutogradContext*, torch::Tensor x) {
    return x * 2;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grad) {
    return {grad[0] * 2};
  }
};

extern "C" double twice_sum(int n) {
  auto x = torch::ones({n}, torch::requires_grad());
  return Twice::apply(x).sum().item<double>();
}
"""


@pytest.mark.realwheel
@pytest.mark.slow
def test_cpp_api_extension_built_against_2_14_1(
    torch_venv: Path, torch_cpu_venv: Path, torch_wheel: Path, cli_run: CliRun, tmp_path: Path
) -> None:
    """An extension on torch's ordinary C++ API (a custom autograd Function), compiled with g++
    against torch 2.14.1's own headers and libraries: loads with 2.14.1, not with 2.13.0, and
    the verdict names the two torch::autograd functions 2.13.0 lacks."""
    site = next((torch_venv.parent.parent / "lib").glob("python3*/site-packages"))
    source = tmp_path / "twice.cc"
    source.write_text(TWICE)
    library = tmp_path / "libtwice.so"
    subprocess.run(
        [_gxx(), "-shared", "-fPIC", "-O0", "-std=c++20", f"-I{site}/torch/include",
         f"-I{site}/torch/include/torch/csrc/api/include", str(source), "-o", str(library),
         f"-L{site}/torch/lib", "-Wl,--no-as-needed", "-lc10", "-ltorch_cpu", "-ltorch"],
        check=True, capture_output=True, timeout=900,
    )  # fmt: skip
    (tmp_path / "w").mkdir()
    # built with this host's g++ (newer libstdc++ than manylinux_2_28 allows): a plain linux tag
    wheel = make_wheel(
        tmp_path / "w", "twice", "1.0", {"twice/libtwice.so": library},
        tag="cp311-cp311-linux_x86_64",
    )  # fmt: skip
    loads = _check_against_import(cli_run, torch_venv, wheel, torch_wheel, tmp_path / "a")
    assert loads["verdict"] == "loads"
    old = _check_against_import(
        cli_run, torch_cpu_venv, wheel, fetch_wheel("torch==2.13.0"), tmp_path / "b"
    )
    assert old["verdict"] == "does-not-load"
    code, out, _err = cli_run(
        "can-load", str(wheel), "--with", str(fetch_wheel("torch==2.13.0")), "--format", "json"
    )
    (lib,) = json.loads(out)["libraries"]
    names = sorted(s.get("demangled", s["name"]).split("(")[0] for s in lib["missing_symbols"])
    if shutil.which("c++filt"):
        assert names == [
            "torch::autograd::_wrap_outputs",
            "torch::autograd::fire_node_creation_hooks",
        ]
    assert any("another torch version" in c for c in lib["causes"])


def test_demangling_falls_back_to_mangled_names(monkeypatch: pytest.MonkeyPatch) -> None:
    from archwheel.interfaces.commands.can_load import demangle

    if shutil.which("c++filt"):
        assert demangle(["_ZN3c103fooEi"]) == {"_ZN3c103fooEi": "c10::foo(int)"}
    monkeypatch.setenv("PATH", "/nonexistent")
    assert demangle(["_ZN3c103fooEi"]) == {}
