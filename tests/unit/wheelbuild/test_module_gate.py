"""The gate's second half (wheelbuild/module_gate.py): CUDA sources nvcc never compiled (a module
that fell back to CPU) and archs beyond the request (a project that ignored the arch list),
judged from the build's nvcc record and ccache's stats log; the record as real nvcc 13 writes
it (tests/integration/nvcc/test_nvcc_record.py makes one)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from archwheel.errors import RecipeError
from archwheel.facts.arch import ArchList
from archwheel.facts.catalog import load_facts
from archwheel.wheelbuild.gate import GateVerdict
from archwheel.wheelbuild.module_gate import ModuleEvidence, check_modules
from archwheel.wheelbuild.nvcc_record import parse_nvcc_record
from archwheel.wheelbuild.recipe import load_recipe
from archwheel.wheelbuild.recipe_model import GateSpec
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
SWITCHES = ("project switches", "FORCE_CUDA (setup.py:12): set them in [build] env")
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
    assert "FORCE_CUDA (setup.py:12)" in verdict.summary
    assert '[gate] unbuilt_cuda (e.g. "csrc/cpu_fallback/*.cu")' in verdict.summary
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
