"""The build-file proof on PyTorch 2.6.0's own configured build (tests/support/data/
pytorch-2.6.0-cuda: Debian's source, CUDA 12.4, TORCH_CUDA_ARCH_LIST="8.0;9.0")."""

from __future__ import annotations

import json
import lzma
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from archwheel.binary.buildfile import read_compile_commands, shell_words
from archwheel.facts.arch import ArchList
from archwheel.facts.pytorch_additions import load_additions
from archwheel.inspection.build_files import prove_build_files, read_steps, tree_progress
from archwheel.verdicts.build_files import check_objects, prove_steps
from tests.support.paths import DATA

RECORDED = DATA / "pytorch-2.6.0-cuda"
ADDED = {
    "/src/pytorch/aten/src/ATen/native/cuda/RowwiseScaledMM.cu": "pytorch-rowwise-scaled-mm-sm90a",
    "/src/pytorch/torch/csrc/distributed/c10d/cuda/AsyncMM.cu": "pytorch-c10d-async-mm-sm90a",
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pytorch")
    with tarfile.open(RECORDED / "configured.tar.xz") as archive:
        archive.extractall(root, filter="data")
    return root


def test_every_cuda_step_carries_exactly_the_request(tree: Path) -> None:
    start = time.perf_counter()
    proof = prove_build_files(tree / "build", ArchList.parse("8.0;9.0"))
    took = time.perf_counter() - start
    assert (proof.torch, proof.nvcc) == ("2.6.0", "12.4.131")
    assert proof.builds == 2462 and dict(proof.languages) == {"CUDA": 341, "CXX": 1604, "C": 55}
    assert (proof.cuda_steps, proof.exact, proof.with_additions) == (341, 339, 2)
    assert proof.ok and proof.deviations == () and proof.problems == ()
    assert {a.source: a.rule for a in proof.additions} == ADDED
    assert {a.image for a in proof.additions} == {"sm_90a"}
    assert took < 2.0, took  # 0.4 s measured on a loaded 2-core machine (8.4 MB, 2,462 builds)


def test_another_request_deviates_in_every_step(tree: Path) -> None:
    proof = prove_build_files(tree / "build", ArchList.parse("8.0;9.0;10.0"))
    assert len(proof.deviations) == 341 and not proof.ok
    assert {d.missing for d in proof.deviations} == {("sm_100",)}
    # 9.0 dropped: CMake's rule does not apply, the recorded sm_90a and sm_90 are extra
    proof = prove_build_files(tree / "build", ArchList.parse("8.0"))
    rowwise = next(d for d in proof.deviations if d.source.endswith("RowwiseScaledMM.cu"))
    assert rowwise.extra == ("sm_90", "sm_90a")


def test_the_steps_carry_pytorchs_own_flags(tree: Path) -> None:
    steps = read_steps(tree / "build" / "build.ninja")
    fill = next(s for s in steps.cuda if s.source.endswith("native/cuda/FillKernel.cu"))
    assert fill.argv[0] == "/usr/bin/nvcc" and "-c" in fill.argv
    assert fill.output.endswith("FillKernel.cu.o") and "--expt-relaxed-constexpr" in fill.argv


def test_the_compilation_database_says_the_same() -> None:
    entries = json.loads(lzma.decompress((RECORDED / "compile_commands.cuda.json.xz").read_bytes()))
    proof = prove_steps(
        read_compile_commands(entries),
        ArchList.parse("8.0;9.0"),
        load_additions(),
        path="compile_commands.json",
        torch="2.6.0",
        nvcc="12.4.131",
    )
    assert (proof.cuda_steps, proof.exact, proof.with_additions, len(proof.deviations)) == (
        341, 339, 2, 0)  # fmt: skip
    assert {a.source: a.rule for a in proof.additions} == ADDED


def test_each_step_is_the_command_ninja_itself_would_run(tree: Path) -> None:
    ninja = shutil.which("ninja")
    if ninja is None:
        pytest.skip("ninja is not installed (Debian: ninja-build)")
    answer = subprocess.run(
        [ninja, "-C", str(tree / "build"), "-t", "compdb", "CUDA_COMPILER__torch_cuda_unscanned_Release"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    theirs = {e["output"]: shell_words(e["command"]) for e in json.loads(answer.stdout)}
    ours = {s.output: s.argv for s in read_steps(tree / "build" / "build.ninja").cuda}
    assert len(theirs) == len(ours) == 341
    assert ours == theirs  # every word of every expanded CUDA command, as ninja 1.11 expands it


def test_objects_are_checked_against_their_own_steps(tree: Path) -> None:
    # what a partial build's objects hold, against what their steps in build.ninja promise
    steps = read_steps(tree / "build" / "build.ninja")
    by_source = {Path(s.source).name: s.output for s in steps.cuda}
    rowwise, sleep = by_source["RowwiseScaledMM.cu"], by_source["Sleep.cu"]
    found = {rowwise: ["sm_80", "sm_90", "sm_90a"], sleep: ["sm_90", "sm_80", "compute_90"]}
    checks = check_objects(steps, ArchList.parse("8.0;9.0"), load_additions(), found,
                           torch="2.6.0", nvcc="12.4.131")  # fmt: skip
    assert {Path(c.source).name: (c.found, c.expected, c.ok) for c in checks} == {
        "RowwiseScaledMM.cu": (("sm_80", "sm_90", "sm_90a"), ("sm_80", "sm_90", "sm_90a"), True),
        "Sleep.cu": (("sm_80", "sm_90", "compute_90"), ("sm_80", "sm_90"), False),  # PTX extra
    }
    # an object the request alone does not explain: sm_90a where no rule adds it
    (wrong,) = check_objects(steps, ArchList.parse("8.0;9.0"), load_additions(),
                             {sleep: ["sm_80", "sm_90", "sm_90a"]}, torch="2.6.0")  # fmt: skip
    assert not wrong.ok and wrong.to_json_dict()["ok"] is False


def test_a_trees_progress_counts_what_ninjas_log_records(tree: Path) -> None:
    build = tree / "build"
    assert tree_progress(tree / "nothing-here") is None
    steps = read_steps(build / "build.ninja")
    cuda = [step.output for step in steps.cuda[:3]]
    log = build / ".ninja_log"
    log.write_text(
        "# ninja log v7\n"
        + "".join(f"1\t2\t3\t{output}\tabc\n" for output in [*cuda, "c10/a.cpp.o", "gen.h"])
    )
    try:
        progress = tree_progress(build)
    finally:
        log.unlink()
    assert progress is not None
    assert (progress.compiled, progress.cuda_compiled, progress.cuda) == (4, 3, 341)
    assert progress.compiles == sum(steps.languages.values()) == 2000
    assert progress.line() == f"4 of {progress.compiles} compile steps done (3 of 341 CUDA)"
    nothing = tree_progress(build)  # configured, no log yet
    assert nothing is not None and nothing.compiled == nothing.cuda_compiled == 0
