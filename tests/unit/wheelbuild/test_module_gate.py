"""The gate's second half (wheelbuild/wheel/module_gate.py): CUDA sources nvcc never compiled (a module
that fell back to CPU) and archs beyond the request (a project that ignored the arch list),
judged from the build's nvcc record and ccache's stats log; the record as real nvcc 13 writes
it (tests/integration/nvcc/test_nvcc_record.py makes one)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from archwheel.binary.buildfile import read_ninja
from archwheel.errors import RecipeError
from archwheel.facts.arch import ArchList
from archwheel.facts.catalog import load_facts
from archwheel.inspection.build_files import read_build_trees
from archwheel.wheelbuild.compile.nvcc_record import parse_nvcc_record
from archwheel.wheelbuild.recipes.recipe import load_recipe
from archwheel.wheelbuild.recipes.recipe_model import GateSpec
from archwheel.wheelbuild.wheel.gate import GateVerdict
from archwheel.wheelbuild.wheel.module_gate import ModuleEvidence, check_modules, forecast_unbuilt
from tests.support.paths import ROOT

FACTS = load_facts()
STABLE = load_recipe(ROOT / "recipes" / "stable-ops.toml", facts=FACTS)
PYTORCH = load_recipe(ROOT / "recipes" / "pytorch-2.14.1-cu130.toml", facts=FACTS)
ARCHS = ArchList.parse("9.0")
# What nvcc 13.0 appends with --time (two compiles; header, phases, the driver's own row).
RECORD = """source file name , phase name , phase input files , phase output file , arch , tool, metric , unit
csrc/ops_cuda.cu , gcc (preprocessing 4) , csrc/ops_cuda.cu  , /tmp/x-5.ii ,  , nvcc , 92.8 , ms
csrc/ops_cuda.cu , cicc ,  /tmp/x-7.ii  , /tmp/x-6.ptx , compute_90 , nvcc , 263.8 , ms
csrc/ops_cuda.cu , ptxas , /tmp/x-6.ptx  , /tmp/x-8.cubin , sm_90 , nvcc , 54.2 , ms
/build/src/csrc/extra.cu , ptxas , /tmp/y-6.ptx  , /tmp/y-8.cubin , sm_80 , nvcc , 54.2 , ms
/build/src/csrc/extra.cu , ptxas , /tmp/y-6.ptx  , /tmp/y-9.cubin , sm_90 , nvcc , 54.2 , ms
 , nvcc (driver) ,  , build/ops.o ,  , nvcc , 0.98 , ms
"""
FILES = ("setup.py", "csrc/ops.cpp", "csrc/ops_cuda.cu", "csrc/extra.cu", "csrc/axpy.h")
SWITCHES = (
    "project switches",
    "not set: FORCE_CUDA (setup.py:12): set in [build] env the one that selects or turns on "
    "what you build; set by archwheel itself (leave them to it): TORCH_CUDA_ARCH_LIST (setup.py:3)",
)
GOOD = GateVerdict(True, "all 1 libraries with device code (x/_C.so) hold 9.0")


def evidence(**changes: object) -> ModuleEvidence:
    base = ModuleEvidence(FILES, "/build/src", parse_nvcc_record(RECORD), (), (SWITCHES,))
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_every_cuda_source_compiled_passes() -> None:
    assert check_modules(GOOD, STABLE, ARCHS, evidence()) == GOOD


def test_a_cuda_source_never_compiled_fails_naming_it_and_the_switches() -> None:
    files = (*FILES, "csrc/cpu_fallback/kernels.cu")
    good = dataclasses.replace(GOOD, without_device_code=("x/_cpu.so",))
    verdict = check_modules(good, STABLE, ARCHS, evidence(files=files))
    assert not verdict.ok
    assert "the wheel's modules without device code: x/_cpu.so" in verdict.summary
    assert "1 CUDA sources of the project were never compiled by nvcc" in verdict.summary
    assert (
        "csrc/cpu_fallback/kernels.cu" in verdict.summary and "fell back to CPU" in verdict.summary
    )
    assert "the recipe does not set: FORCE_CUDA (setup.py:12);" in verdict.summary
    assert "TORCH_CUDA_ARCH_LIST" not in verdict.summary  # archwheel sets it: never advised
    assert '[gate] unbuilt_cuda = ["csrc/cpu_fallback/*.cu"]' in verdict.summary
    # a recipe that says those are not meant to be built
    exempt = dataclasses.replace(STABLE, gate=GateSpec(unbuilt_cuda=("csrc/cpu_fallback/*",)))
    assert check_modules(GOOD, exempt, ARCHS, evidence(files=files)).ok


def test_what_ccache_answered_counts_as_compiled() -> None:
    files = (*FILES, "csrc/cached.cu")
    assert not check_modules(GOOD, STABLE, ARCHS, evidence(files=files)).ok
    assert check_modules(GOOD, STABLE, ARCHS, evidence(files=files, cached=("csrc/cached.cu",))).ok
    # nothing recorded at all (no nvcc ran): the audit gate judged the wheel alone
    assert check_modules(GOOD, STABLE, ARCHS, evidence(files=files, record=None)) == GOOD


def test_archs_beyond_the_request_fail_an_extension_naming_where() -> None:
    extra = dataclasses.replace(GOOD, extra=(("x/_C.so", ("sm_80",)),))
    rows = (("source check", "setup.py:40 hard-codes -gencode arch=compute_80,code=sm_80"),)
    verdict = check_modules(extra, STABLE, ARCHS, evidence(source_rows=rows))
    assert not verdict.ok
    assert "x/_C.so carries sm_80 beyond the request 9.0: the build ignored the arch list" in (
        verdict.summary
    )
    assert "nvcc compiled /build/src/csrc/extra.cu for them" in verdict.summary
    assert "setup.py:40 hard-codes" in verdict.summary and "[gate] extra_archs" in verdict.summary
    allowed = dataclasses.replace(STABLE, gate=GateSpec(extra_archs=True))
    assert check_modules(extra, allowed, ARCHS, evidence()).ok
    # PyTorch adds sm_90a kernels to a 9.0 build on purpose: reported, not refused
    assert check_modules(extra, PYTORCH, ARCHS, evidence()).ok


def test_a_wheel_without_device_code_says_which_switches_the_project_reads() -> None:
    none = GateVerdict(
        False, "no library in the wheel carries device code", without_device_code=("x/_C.so",)
    )
    verdict = check_modules(none, STABLE, ARCHS, evidence(record=None))
    assert verdict.summary.startswith("no library in the wheel carries device code; ")
    assert "modules: x/_C.so" in verdict.summary
    assert "FORCE_CUDA (setup.py:12)" in verdict.summary


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('unbuilt_cuda = ["/abs/*.cu"]', "is not a glob inside the source"),
        ('unbuilt_cuda = ["../x.cu"]', "is not a glob inside the source"),
        ('extra_archs = "yes"', "true or false"),
        ("other = 1", "other"),
    ],
)
def test_a_gate_table_that_cannot_work_is_refused(tmp_path: Path, table: str, message: str) -> None:
    path = tmp_path / "stable-ops.toml"
    text = (ROOT / "recipes" / "stable-ops.toml").read_text()
    text = text.replace('path = "../examples/stable-ops"', f'path = "{ROOT}/examples/stable-ops"')
    path.write_text(f"{text}\n[gate]\n{table}\n")
    with pytest.raises(RecipeError) as info:
        load_recipe(path, facts=FACTS)
    assert message in info.value.one_line()


def test_a_record_the_project_wrote_garbage_into_is_read_without_a_word() -> None:
    """The work folder is the build's: its code can write anything into the record."""
    garbage = RECORD + "\0\0\0\n" + ("x," * 5 + "y" * 200_000) + "\n" + '"unterminated,\n'
    parsed = parse_nvcc_record(garbage)
    assert parsed.archs_of("csrc/ops_cuda.cu") == {"sm_90"}


# CMake's compiles while it configures, as nvcc 13 records them (cmake 3.25 configuring a CUDA
# project with CUDAARCHS=80-real;90: the id probe for nvcc's default sm_75, the ABI probe for
# the requested list).
CMAKE_RECORD = (
    RECORD
    + """\
CMakeCUDACompilerId.cu , ptxas , /tmp/z.ptx , /tmp/z.cubin , sm_75 , nvcc , 10.0 , ms
/usr/share/cmake-3.25/Modules/CMakeCUDACompilerABI.cu , ptxas , /tmp/a.ptx , /tmp/a.cubin , sm_80 , nvcc , 9.0 , ms
/build/src/build/CMakeFiles/CMakeScratch/TryCompile-x/main.cu , ptxas , /tmp/b.ptx , /tmp/b.cubin , sm_80 , nvcc , 9.0 , ms
/build/src/csrc/kernels.cu , ptxas , /tmp/c.ptx , /tmp/c.cubin , sm_75 , nvcc , 9.0 , ms
"""
)


def test_cmakes_probe_files_are_no_sources_of_the_project() -> None:
    extra = dataclasses.replace(GOOD, extra=(("x/_C.so", ("sm_75", "sm_80")),))
    verdict = check_modules(
        extra, STABLE, ARCHS, evidence(record=parse_nvcc_record(CMAKE_RECORD), source_rows=())
    )
    assert not verdict.ok
    assert "nvcc compiled /build/src/csrc/extra.cu, /build/src/csrc/kernels.cu for them" in (
        verdict.summary
    )
    assert "CMake" not in verdict.summary and "TryCompile" not in verdict.summary


def test_the_advice_names_the_recipes_variable_when_it_is_the_cause() -> None:
    extra = dataclasses.replace(GOOD, extra=(("x/_C.so", ("sm_75",)),))
    cause = (
        "arch variable",
        "CMakeLists.txt:7 enables CMake's CUDA language, which takes its archs from "
        "CMAKE_CUDA_ARCHITECTURES (a -D option or CUDAARCHS), never from TORCH_CUDA_ARCH_LIST: "
        'CMake builds its fallback 75;86; set [arch] format = "cmake"',
    )
    verdict = check_modules(extra, STABLE, ARCHS, evidence(source_rows=(cause,)))
    assert not verdict.ok
    assert f"the recipe's arch variable {STABLE.arch.variable} is the cause: CMakeLists.txt:7" in (
        verdict.summary
    )
    assert "patch the project" not in verdict.summary
    assert "change [arch] in the recipe" in verdict.summary
    # a variable of the project's own, found by the source check, is the same cause
    own = ("source check", "setup.py:3 reads its own arch variable MY_ARCHS (the recipe sets X)")
    said = check_modules(extra, STABLE, ARCHS, evidence(source_rows=(own,))).summary
    assert "is the cause: setup.py:3 reads its own arch variable MY_ARCHS" in said
    # where the project's own list is the cause, patching it is the advice
    coded = ("cmake", "CMakeLists.txt:4 sets CMAKE_CUDA_ARCHITECTURES to 75 whatever is given")
    said = check_modules(extra, STABLE, ARCHS, evidence(source_rows=(coded,))).summary
    assert "the build files: CMakeLists.txt:4 sets" in said and "patch the project's list" in said


def test_a_work_folder_record_with_the_header_alone_is_no_record(tmp_path: Path) -> None:
    """The work folder starts with nvcc's header row written (so that nvcc processes starting
    at once append, never truncate): a record holding nothing else means no nvcc ran, as a
    missing one does, and the gate judges the wheel alone."""
    from archwheel.wheelbuild.compile.nvcc_record import (
        NVCC_RECORD,
        RECORD_HEADER,
        read_nvcc_record,
    )

    path = tmp_path / NVCC_RECORD.removeprefix("/build/")
    assert read_nvcc_record(tmp_path) is None  # missing
    path.parent.mkdir(parents=True)
    path.write_text(RECORD_HEADER)
    assert read_nvcc_record(tmp_path) is None  # the header alone
    path.write_text(RECORD_HEADER + "csrc/a.cu , ptxas , a.ptx , a.cubin , sm_90 , nvcc , 1 , ms\n")
    record = read_nvcc_record(tmp_path)
    assert record is not None and record.archs_of("csrc/a.cu") == {"sm_90"}


def _ninja(flags_per_source: dict[str, str]) -> str:
    rule = "rule cuda_compile\n  command = $nvcc -c $in -o $out $cuda_post_cflags\nnvcc = nvcc\n"
    builds = "".join(
        f"build {s}.o: cuda_compile /build/src/{s}\n  cuda_post_cflags = {f}\n"
        for s, f in flags_per_source.items()
    )
    return rule + builds


def test_a_compile_step_without_a_requested_arch_fails_though_the_library_holds_it(
    tmp_path: Path,
) -> None:
    both = "-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90"
    folder = tmp_path / "src" / "build" / "temp.linux-x86_64-cpython-311"
    folder.mkdir(parents=True)
    (folder / "build.ninja").write_text(
        _ninja({"csrc/ops_cuda.cu": both, "csrc/extra.cu": "-gencode=arch=compute_80,code=sm_80"})
    )
    trees = read_build_trees(tmp_path / "src")
    assert [name for name, _ in trees] == ["build/temp.linux-x86_64-cpython-311/build.ninja"]
    two = ArchList.parse("8.0;9.0")
    verdict = check_modules(GOOD, STABLE, two, evidence(build_steps=trees))
    assert not verdict.ok
    assert verdict.summary.startswith(
        "build/temp.linux-x86_64-cpython-311/build.ninja: 1 of 2 CUDA compile steps lack sm_90 "
        "(extra.cu)"
    )
    (folder / "build.ninja").write_text(_ninja({"csrc/ops_cuda.cu": both, "csrc/extra.cu": both}))
    trees = read_build_trees(tmp_path / "src")
    assert check_modules(GOOD, STABLE, two, evidence(build_steps=trees)) == GOOD


def test_after_configure_the_sources_no_step_compiles_are_named_before_the_compile() -> None:
    files = ["csrc/a.cu", "csrc/b.cu", "tests/t1.cu", "tests/t2.cu", "setup.py", "csrc/c.cpp"]
    steps = read_ninja(
        "rule CUDA_COMPILER__x\n  command = /usr/local/cuda/bin/nvcc -c $in -o $out "
        "-gencode arch=compute_90,code=sm_90\n"
        "build a.o: CUDA_COMPILER__x /build/src/csrc/a.cu\n"
        "build b.o: CUDA_COMPILER__x ../csrc/b.cu\n"
    )
    forecast = forecast_unbuilt(STABLE, files, [("build/build.ninja", steps)], "/build/src")
    assert forecast.missing == ("tests/t1.cu", "tests/t2.cu")
    assert forecast.proposal == ("tests/*.cu",)
    assert forecast.line().startswith("GATE: 2 CUDA sources of the project have no compile step")
    assert forecast.line().endswith('unbuilt_cuda = ["tests/*.cu"]')
    let_go = dataclasses.replace(STABLE, gate=GateSpec(unbuilt_cuda=("tests/*.cu",)))
    clear = forecast_unbuilt(let_go, files, [("build/build.ninja", steps)], "/build/src")
    assert clear.missing == () and clear.line().startswith("GATE: every CUDA source")
    # a source only one file of a folder: the proposal names the file, never the folder's glob
    alone = forecast_unbuilt(STABLE, [*files, "csrc/z.cu"], [("b", steps)], "/build/src")
    assert "csrc/z.cu" in alone.proposal and "csrc/*.cu" not in alone.proposal
