"""The arch-list grammars against the real shipped code (slow: real torch wheels, cmake, a venv).

- the stored torch tables equal what the wheels' own files say (torch 2.13.0 and 2.14.1);
- ``torch.utils.cpp_extension._get_cuda_arch_flags`` runs in a venv with the CPU torch 2.13.0
  (imported as installed) and with torch 2.14.1's own function source (taken from the 2.14.1
  wheel and run in the same venv), on many lists; its flags or its exception equal the model's;
- ``select_compute_arch.cmake`` and ``utils.cmake`` from each wheel run under real cmake in script
  mode (``torch_cuda_get_nvcc_gencode_flag``, exactly as PyTorch's CMake calls it); CMake's
  success or error and its nvcc flags equal the model's;
- CMake's own ``Modules/FindCUDA/select_compute_arch.cmake`` (consumer ``cmake-findcuda``), taken
  from the cmake 3.31.10 wheel that recipes/torchopt-0.7.3.toml builds with: its tables equal the
  stored ``[findcuda]`` ones, and ``CUDA_SELECT_NVCC_ARCH_FLAGS`` run by the host's ``cmake -P``
  (Debian's CMake 3.25 running the 3.31.10 module text; script mode needs nothing newer) on the
  lists below fails exactly where the model stops, with the model's error text, and otherwise
  writes the model's flags. ``Auto`` (and an empty list) needs ``try_run``, which script mode
  refuses, so it runs in one project-mode configure with no GPU visible.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from archwheel.errors import ArchListError
from archwheel.facts import arch_consumers as ac
from archwheel.facts import arch_grammars as ag
from archwheel.facts import arch_readers as ar
from archwheel.facts.arch import ArchList, Target, Variant
from archwheel.facts.catalog import load_facts
from tests.support.components import fetch_wheel, require
from tests.support.paths import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.realwheel]

CPU_TORCH_SPEC = "torch==2.13.0+cpu"
CPP_EXTENSION = "torch/utils/cpp_extension.py"
CMAKE_DIR = "torch/share/cmake/Caffe2/"
SELECT = CMAKE_DIR + "Modules_CUDA_fix/upstream/FindCUDA/select_compute_arch.cmake"
UTILS = CMAKE_DIR + "public/utils.cmake"

LISTS = [
    "8.0;9.0+PTX",
    "8.0 9.0",
    "8.0\t9.0",
    " 8.0",
    "Ampere",
    "Ampere+PTX",
    "Ada;Hopper",
    "Hopper+PTX",
    "Blackwell",
    "Blackwell+PTX",
    "Blackwell+Tegra",
    "Ampere+Tegra;Turing",
    "Rubin",
    "10.7",
    "10.0f",
    "12.0f",
    "10.0f;12.0f+PTX",
    "9.0a;10.0a+PTX",
    "12.1a+PTX",
    "8.6(8.0)",
    "8.6(8.0)+PTX",
    "9.0a(8.0)",
    "8.0,9.0",
    "8.0;9.0;",
    "8.0;;9.0",
    "8.0;8.0+PTX;8.0",
    "8.8",
    "10.1",
    "11.0",
    "0.0",
    "hopper",
    "HOPPER",
    "8.0+ptx",
    "9.0+PTX+PTX",
    "sm_90",
    "90",
    "90-real",
    "native",
]
# What both CMake readers must see as CMake does: '$' is the end of the text (a trailing newline
# is part of the entry), '+PTX' on its own breaks if(), blanks alone give no flag at all.
CMAKE_EDGES = ["8.0\n", "8.0\n9.0", "Ampere\n", "+PTX", "8.0 +PTX", " ", "\t"]


# -- the tables ----------------------------------------------------------------------------------


def member(wheel: Path, name: str, dest: Path) -> Path:
    out = dest / name
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf:
        out.write_bytes(zf.read(name))
    return out


@pytest.fixture(scope="module")
def wheels(torch_wheel: Path) -> dict[str, Path]:
    return {"2.13.0": fetch_wheel(CPU_TORCH_SPEC), "2.14.1": torch_wheel}


@pytest.fixture(scope="module")
def shipped(wheels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each torch's cpp_extension.py and its two CMake files, unpacked (folder per version)."""
    out: dict[str, Path] = {}
    for version, wheel in wheels.items():
        root = tmp_path_factory.mktemp(f"torch-{version}")
        for name in (CPP_EXTENSION, SELECT, UTILS):
            member(wheel, name, root)
        out[version] = root
    return out


@pytest.mark.parametrize("version", ["2.13.0", "2.14.1"])
def test_stored_tables_equal_the_shipped_files(shipped: dict[str, Path], version: str) -> None:
    grammar = ac.load_grammars().for_torch(version)
    assert grammar.torch == version
    names, supported = ac.cpp_extension_tables((shipped[version] / CPP_EXTENSION).read_text())
    assert names == grammar.cpp_extension_names
    assert supported == grammar.cpp_extension_supported
    regex, cmake_names = ac.cmake_tables((shipped[version] / SELECT).read_text())
    assert regex == grammar.cmake_number_regex
    assert cmake_names == grammar.cmake_names
    assert grammar.cmake_file.startswith(SELECT)
    assert grammar.cpp_extension_file.startswith(CPP_EXTENSION)


def test_the_versions_differ_where_the_files_do(shipped: dict[str, Path]) -> None:
    old, new = (ac.load_grammars().for_torch(v) for v in ("2.13.0", "2.14.1"))
    assert "10.7" in new.cpp_extension_supported and "10.7" not in old.cpp_extension_supported
    assert "Rubin" in {n.name for n in new.cmake_names} - {n.name for n in old.cmake_names}


# -- cpp_extension, run for real ----------------------------------------------------------------

RUNNER = r"""
import ast, collections, json, logging, os, re, sys
import torch
path, cases = sys.argv[1], json.loads(sys.argv[2])
if path == "-":
    from torch.utils.cpp_extension import _get_cuda_arch_flags as get
else:
    tree = ast.parse(open(path).read())
    fn = next(n for n in tree.body
              if isinstance(n, ast.FunctionDef) and n.name == "_get_cuda_arch_flags")
    ns = {"os": os, "re": re, "collections": collections, "torch": torch,
          "logger": logging.getLogger("cpp_extension")}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), path, "exec"), ns)
    get = ns["_get_cuda_arch_flags"]
out = []
for value, cflags in cases:
    if value is None:
        os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
    else:
        os.environ["TORCH_CUDA_ARCH_LIST"] = value
    try:
        out.append({"flags": get(cflags)})
    except Exception as exc:
        out.append({"error": f"{type(exc).__name__}: {exc}"})
print(json.dumps(out))
"""

CFLAGS = [
    ["-O3", "--use_fast_math"],
    ["-gencode", "arch=compute_80,code=sm_80"],
    ["-DTORCH_EXTENSION_NAME=arch_ops"],
    ["-Xcompiler", "-march=native"],
]


def run_cpp_extension(
    python: Path, source: str, cases: list[tuple[str | None, list[str]]]
) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [str(python), "-c", RUNNER, source, json.dumps(cases)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def cpp_cases() -> list[tuple[str | None, list[str]]]:
    cases: list[tuple[str | None, list[str]]] = [(v, []) for v in LISTS]
    cases += [("", []), (None, [])]
    cases += [(v, flags) for v in ("8.0;9.0+PTX", "10.0f", None) for flags in CFLAGS]
    return cases


@pytest.mark.parametrize("version", ["2.13.0", "2.14.1"])
def test_cpp_extension_model_equals_the_real_function(
    torch_cpu_venv: Path, shipped: dict[str, Path], version: str
) -> None:
    source = "-" if version == "2.13.0" else str(shipped[version] / CPP_EXTENSION)
    cases = cpp_cases()
    real = run_cpp_extension(torch_cpu_venv, source, cases)
    accepted = 0
    for (value, cflags), got in zip(cases, real, strict=True):
        model = ag.read(ac.CPP_EXTENSION, value, torch=version, cflags=cflags)
        where = f"torch {version}, TORCH_CUDA_ARCH_LIST={value!r}, cflags={cflags}"
        if "error" in got:
            assert model.error == got["error"], where
            assert model.fails, where
        else:
            assert model.error is None, where
            assert list(model.flags) == got["flags"], where
            accepted += bool(got["flags"])
            if got["flags"] == []:
                assert [f.kind for f in model.findings] == ["ignore"], where
    assert accepted >= 8  # the cases are not all failures


# -- PyTorch's CMake, run for real --------------------------------------------------------------

DRIVER = """\
include("${TORCH_CMAKE}/public/utils.cmake")
include("${TORCH_CMAKE}/Modules_CUDA_fix/upstream/FindCUDA/select_compute_arch.cmake")
torch_cuda_get_nvcc_gencode_flag(NVCC_FLAGS_EXTRA)
message(STATUS "ARCHWHEEL-FLAGS=${NVCC_FLAGS_EXTRA}")
"""


def run_torch_cmake(
    root: Path, driver: Path, value: str, cuda: str = "13.0"
) -> tuple[int, list[str]]:
    proc = subprocess.run(
        ["cmake", f"-DCUDA_VERSION={cuda}", f"-DTORCH_CMAKE={root / CMAKE_DIR}", "-P", str(driver)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**os.environ, "TORCH_CUDA_ARCH_LIST": value},
    )
    flags: list[str] = []
    for line in (proc.stdout + proc.stderr).splitlines():
        if "ARCHWHEEL-FLAGS=" in line:
            text = line.split("ARCHWHEEL-FLAGS=", 1)[1]
            flags = [f for f in text.split(";") if f]
    return proc.returncode, flags


@pytest.fixture(scope="module")
def cmake_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(shutil.which("cmake") is not None, "cmake not installed (apt-get install cmake)")
    path = tmp_path_factory.mktemp("cmake") / "driver.cmake"
    path.write_text(DRIVER)
    return path


@pytest.mark.parametrize("version", ["2.13.0", "2.14.1"])
def test_torch_cmake_model_equals_the_real_cmake(
    cmake_driver: Path, shipped: dict[str, Path], version: str
) -> None:
    accepted = 0
    for value in LISTS + CMAKE_EDGES:
        rc, flags = run_torch_cmake(shipped[version], cmake_driver, value)
        model = ag.read(ac.TORCH_CMAKE, value, torch=version)
        where = f"torch {version}, TORCH_CUDA_ARCH_LIST={value!r}"
        assert (rc != 0) == (model.error is not None), where
        if rc == 0:
            assert list(model.flags) == flags, where
            accepted += 1
    assert accepted >= 15


@pytest.mark.parametrize("value", ["All", "Common"])
def test_all_and_common_depend_on_the_cuda_version(
    cmake_driver: Path, shipped: dict[str, Path], value: str
) -> None:
    """Why the model refuses them: the real lists hold targets CUDA 13 cannot build."""
    rc, flags = run_torch_cmake(shipped["2.14.1"], cmake_driver, value, cuda="13.0")
    assert rc == 0
    assert any("sm_35" in f or "sm_50" in f for f in flags)  # removed in CUDA 13.0
    rc_old, flags_old = run_torch_cmake(shipped["2.14.1"], cmake_driver, value, cuda="12.4")
    assert rc_old == 0 and flags_old != flags
    model = ag.read(ac.TORCH_CMAKE, value, torch="2.14.1")
    assert [f.kind for f in model.findings] == ["reinterpret"]


# -- what archwheel renders, run through the real readers ---------------------------------------

RENDERED = [
    "7.5;8.0;8.6;9.0;10.0;12.0+PTX",  # the official cu130 list
    "8.0;9.0a;12.0+PTX",
    "8.0+PTX;8.6+PTX",  # Ampere+PTX as PyTorch's CMake means it
    "10.0f;12.0f+PTX",
    "9.0a;10.0a;10.3a;12.0a;12.1a+PTX",
    "11.0;12.1",
]


@pytest.mark.parametrize("version", ["2.13.0", "2.14.1"])
def test_rendered_values_are_accepted_by_the_real_readers(
    torch_cpu_venv: Path, cmake_driver: Path, shipped: dict[str, Path], version: str
) -> None:
    checked = 0
    cases: list[tuple[str | None, list[str]]] = []
    wanted: list[ArchList] = []
    for text in RENDERED:
        archs = ArchList.parse(text)
        rendered = ag.render(ac.TORCH_CMAKE, archs, torch=version)
        rc, flags = run_torch_cmake(shipped[version], cmake_driver, rendered)
        assert rc == 0, rendered
        images = {f.rsplit("code=", 1)[1] for f in flags if f.startswith("arch=")}
        assert images == {s.target.sm for s in archs if s.sass} | {
            s.target.compute for s in archs if s.ptx
        }, rendered
        checked += 1
        try:
            value = ag.render(ac.CPP_EXTENSION, archs, torch=version)
        except ArchListError:
            assert any(s.target.variant is Variant.FAMILY_SPECIFIC for s in archs)
            continue
        cases.append((value, []))
        wanted.append(archs)
    source = "-" if version == "2.13.0" else str(shipped[version] / CPP_EXTENSION)
    for (given, _), archs, got in zip(
        cases, wanted, run_cpp_extension(torch_cpu_venv, source, cases), strict=True
    ):
        assert "flags" in got, (given, got)
        assert {f.rsplit("code=", 1)[1] for f in got["flags"]} == set(ar.image_names(archs))
        checked += 1
    assert checked >= 10


# -- CMake's own FindCUDA (cmake-findcuda), run for real ----------------------------------------

FINDCUDA_LISTS = (
    LISTS
    + CMAKE_EDGES
    + [
        "Turing+PTX",
        "Ampere;Turing",
        "Volta",
        "Volta+PTX",
        "Pascal+PTX",
        "Maxwell",
        "Maxwell+Tegra+PTX",
        "Kepler",
        "Kepler+PTX",
        "Kepler+Tegra",
        "Kepler+Tesla",
        "Fermi",
        "Fermi+PTX",
        "Volta+Tegra",
        "Ada",
        "Hopper",
        "10.0",
        "10.0+PTX",
        "12.0",
        "9.0a",
        "9.0f",
        "7.5;8.0;8.6;9.0;10.0;12.0+PTX",  # the official cu130 list
        "8.6(8.0);8.6",
        "8.0(8.0)",
        "2.1(2.0)",
        "8.6(10.0)",
        "10.0(8.0)",
        "8.0()",
        "(8.0)",
        "8.0 9.0;7.5\t8.6",
        "8.0  9.0",
        "8.0+PTX 9.0+PTX",
        "8.0;8.0;8.0+PTX",
        "8.0+PTX;8.0",
        "8.0;;;9.0",
        ";8.0;",
        "Auto;8.0",
        "All;8.0",
        " All",
        "Common+PTX",
        "PTX",
        "1.0",
        "9.9",
        "OFF",
        "0",
    ]
)
# values meaning Auto: the unquoted ${...} drops empty elements, and an empty list is Auto
AUTO_LISTS = ["", ";", ";;", "Auto"]

# How TorchOpt 0.7.3's CMakeLists.txt hands the variable over (its minimum version, so its
# policies). Its `if(NOT TORCH_CUDA_ARCH_LIST)` -> Auto step is left out: it is TorchOpt's, not
# FindCUDA's (so OFF or 0 are Auto there, and an unknown name here).
FINDCUDA_BODY = """\
include("${FINDCUDA_MODULE}")
set(TORCH_CUDA_ARCH_LIST "$ENV{TORCH_CUDA_ARCH_LIST}")
cuda_select_nvcc_arch_flags(CUDA_ARCH_FLAGS ${TORCH_CUDA_ARCH_LIST})
message(STATUS "ARCHWHEEL-FLAGS=${CUDA_ARCH_FLAGS}")
"""
FINDCUDA_DRIVER = "cmake_minimum_required(VERSION 3.11)\n" + FINDCUDA_BODY
FINDCUDA_PROJECT = (
    "cmake_minimum_required(VERSION 3.11)\nproject(archwheel_findcuda LANGUAGES CXX)\n"
    + FINDCUDA_BODY
)


def findcuda_grammar() -> ac.FindCudaGrammar:
    grammar = ac.load_grammars().findcuda
    assert grammar is not None
    return grammar


def findcuda_member(grammar: ac.FindCudaGrammar) -> str:
    """Where the wheel holds the module: cmake/data/share/cmake-3.31/Modules/FindCUDA/..."""
    major, minor, _ = grammar.cmake.split(".")
    return f"cmake/data/share/cmake-{major}.{minor}/" + grammar.file.split(" ")[0]


@pytest.fixture(scope="module")
def findcuda(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cmake wheel's select_compute_arch.cmake, unpacked, with the driver beside it."""
    require(shutil.which("cmake") is not None, "cmake not installed (apt-get install cmake)")
    grammar = findcuda_grammar()
    root = tmp_path_factory.mktemp(f"cmake-{grammar.cmake}")
    module = member(fetch_wheel(f"cmake=={grammar.cmake}"), findcuda_member(grammar), root)
    (root / "driver.cmake").write_text(FINDCUDA_DRIVER)
    return module


def run_findcuda(module: Path, value: str, cuda: str = "13.0") -> tuple[int, list[str], str]:
    """``cmake -P``: exit status, the flags CUDA_SELECT_NVCC_ARCH_FLAGS wrote, the output."""
    root = module.parents[len(Path(findcuda_member(findcuda_grammar())).parts) - 1]
    proc = subprocess.run(
        ["cmake", f"-DCUDA_VERSION={cuda}", f"-DFINDCUDA_MODULE={module}",
         f"-DPROJECT_BINARY_DIR={root}",  # where Auto would write its probe (never '/')
         "-P", str(root / "driver.cmake")],
        capture_output=True, text=True, check=False, timeout=60,
        env={**os.environ, "TORCH_CUDA_ARCH_LIST": value},
    )  # fmt: skip
    return proc.returncode, cmake_flags(proc.stdout + proc.stderr), proc.stdout + proc.stderr


def cmake_flags(output: str) -> list[str]:
    flags: list[str] = []
    for line in output.splitlines():
        if "ARCHWHEEL-FLAGS=" in line:
            text = line.split("ARCHWHEEL-FLAGS=", 1)[1]
            flags = [f for f in text.split(";") if f]
    return flags


def words(text: str) -> str:
    """CMake wraps and indents its messages: compare texts blank-insensitively."""
    return " ".join(text.split())


def test_stored_findcuda_tables_equal_the_cmake_wheels_file(findcuda: Path) -> None:
    grammar = findcuda_grammar()
    text = findcuda.read_text()
    regex, names = ac.cmake_tables(text)
    assert regex == grammar.number_regex
    assert names == grammar.names
    assert ac.cmake_unknown_error(text) == grammar.unknown_error
    assert "Fermi" in {n.name for n in names} and "Hopper" not in {n.name for n in names}
    recipe = (ROOT / "recipes" / "torchopt-0.7.3.toml").read_text()
    assert f'"cmake=={grammar.cmake}"' in recipe  # the module of the cmake the recipe builds with


def test_findcuda_model_equals_the_real_cmake(findcuda: Path) -> None:
    accepted = rejected = 0
    for value in FINDCUDA_LISTS:
        rc, flags, output = run_findcuda(findcuda, value)
        model = ag.read(ac.CMAKE_FINDCUDA, value)
        where = f"CMake FindCUDA, TORCH_CUDA_ARCH_LIST={value!r}"
        assert "reinterpret" not in [f.kind for f in model.findings], where
        assert (rc != 0) == (model.error is not None), where
        if rc != 0:
            assert model.fails, where
            assert model.error is not None and words(model.error) in words(output), where
            rejected += 1
        else:
            assert list(model.flags) == flags, where
            # what the model still refuses where CMake wrote flags, nvcc would refuse
            assert all("nvcc" in f.rule for f in model.findings if f.kind == "reject"), where
            if not flags:
                assert [f.kind for f in model.findings] == ["ignore"], where
            accepted += bool(flags)
    assert accepted >= 25 and rejected >= 40  # both sides are exercised


@pytest.mark.parametrize("value", ["All", "Common"])
def test_findcuda_all_and_common_depend_on_the_cuda_version(findcuda: Path, value: str) -> None:
    """Why the model refuses them: with CUDA 13.0 they hold targets CUDA 13.0 cannot build."""
    rc, flags, _ = run_findcuda(findcuda, value, cuda="13.0")
    assert rc == 0
    built = {Target.from_name(f.rsplit("code=", 1)[1])[1].cc for f in flags if "code=" in f}
    assert built - load_facts().toolkit("13.0").targets
    rc_old, flags_old, _ = run_findcuda(findcuda, value, cuda="10.2")
    assert rc_old == 0 and flags_old != flags
    model = ag.read(ac.CMAKE_FINDCUDA, value)
    assert [f.kind for f in model.findings] == ["reinterpret"]


def test_findcuda_auto_without_a_gpu_is_the_common_list(findcuda: Path, tmp_path: Path) -> None:
    """An empty list means Auto; with no GPU visible (a build container) that is 'Common'."""
    require(shutil.which("c++") is not None, "no C++ compiler for CMake's project mode")
    rc, common, _ = run_findcuda(findcuda, "Common")
    assert rc == 0 and common
    (tmp_path / "CMakeLists.txt").write_text(FINDCUDA_PROJECT)
    for i, value in enumerate(AUTO_LISTS):
        proc = subprocess.run(
            ["cmake", "-S", str(tmp_path), "-B", str(tmp_path / f"build{i}"),
             "-DCUDA_VERSION=13.0", f"-DFINDCUDA_MODULE={findcuda}"],
            capture_output=True, text=True, check=False, timeout=120,
            env={**os.environ, "TORCH_CUDA_ARCH_LIST": value, "CUDA_VISIBLE_DEVICES": ""},
        )  # fmt: skip
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, output[-2000:]
        assert "Automatic GPU detection failed" in output, value
        assert cmake_flags(output) == common, value
        model = ag.read(ac.CMAKE_FINDCUDA, value)
        assert [f.kind for f in model.findings] == ["reinterpret"], value
        assert "'Common' list" in model.findings[0].rule
    assert [f.kind for f in ag.read(ac.CMAKE_FINDCUDA, None).findings] == ["reinterpret"]


FINDCUDA_RENDERED = ["9.0", "8.0;9.0+PTX", "7.5;8.0;8.6+PTX", "8.0+PTX;8.6+PTX", "compute_90"]


def test_findcuda_rendered_values_are_accepted_by_the_real_cmake(findcuda: Path) -> None:
    for text in FINDCUDA_RENDERED:
        archs = ArchList.parse(text)
        try:
            rendered = ag.render(ac.CMAKE_FINDCUDA, archs)
        except ArchListError:
            assert any(not s.sass for s in archs), text  # PTX without SASS: not expressible
            archs = ag.nearest(ac.CMAKE_FINDCUDA, archs)
            rendered = ag.render(ac.CMAKE_FINDCUDA, archs)
        rc, flags, output = run_findcuda(findcuda, rendered)
        assert rc == 0, output[-2000:]
        images = {f.rsplit("code=", 1)[1] for f in flags if f.startswith("arch=")}
        assert images == set(ar.image_names(archs)), rendered
