"""The build-file proof: exact steps, PyTorch's own additions, deviations (verdicts/build_files)."""

from __future__ import annotations

import pytest

from archwheel.binary.buildfile import read_ninja
from archwheel.errors import FactsError
from archwheel.facts.arch import ArchList
from archwheel.facts.pytorch_additions import load_additions, parse_additions
from archwheel.verdicts.build_files import explained_extras, prove_steps, requested_images

RULE = "rule cu\n  command = /usr/bin/nvcc $FLAGS -x cu -c $in -o $out\n"
TWO = "-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90"
A90 = " -gencode arch=compute_90a,code=sm_90a"


def _ninja(*steps: tuple[str, str]) -> str:
    return RULE + "".join(f"build {s}.o: cu /src/{s}\n  FLAGS = {f}\n" for s, f in steps)


def _prove(text: str, arch: str, **kw: str | None):  # type: ignore[no-untyped-def]
    return prove_steps(read_ninja(text), ArchList.parse(arch), load_additions(), path="b", **kw)


def test_exact_with_pytorch_additions() -> None:
    text = _ninja(
        ("aten/src/ATen/native/cuda/Fill.cu", TWO),
        ("aten/src/ATen/native/cuda/RowwiseScaledMM.cu", TWO + A90),
        ("torch/csrc/distributed/c10d/cuda/AsyncMM.cu", TWO + A90),
    )
    proof = _prove(text, "8.0;9.0", torch="2.6.0", nvcc="12.4.131")
    assert proof.ok and (proof.cuda_steps, proof.exact, proof.with_additions) == (3, 1, 2)
    assert [(a.source.rsplit("/", 1)[-1], a.image, a.rule) for a in proof.additions] == [
        ("RowwiseScaledMM.cu", "sm_90a", "pytorch-rowwise-scaled-mm-sm90a"),
        ("AsyncMM.cu", "sm_90a", "pytorch-c10d-async-mm-sm90a"),
    ]
    assert proof.additions[0].rule_source.startswith("cmake/Codegen.cmake")
    doc = proof.to_json_dict()
    assert doc["kind"] == "build-files" and doc["deviating"] == 0


def test_addition_where_the_rule_does_not_apply_is_a_deviation() -> None:
    text = _ninja(("aten/src/ATen/native/cuda/RowwiseScaledMM.cu", TWO + A90))
    # nvcc 11.8: CMake adds nothing, so sm_90a is extra; 8.0 alone: no compute_90 in the flags
    for arch, nvcc in (("8.0;9.0", "11.8"), ("8.0;9.0", None)):
        proof = _prove(text, arch, nvcc=nvcc, torch="2.6.0")
        assert proof.ok == (nvcc is None)
    proof = _prove(_ninja(("aten/src/ATen/native/cuda/RowwiseScaledMM.cu", TWO)), "8.0;9.0",
                   nvcc="12.4")  # fmt: skip
    (dev,) = proof.deviations
    assert dev.missing == ("sm_90a",) and not proof.ok  # the rule applies, the step lacks it


def test_rules_are_for_their_release() -> None:
    text = _ninja(("aten/src/ATen/native/cuda/RowwiseScaledMM.cu", TWO + A90))
    assert not _prove(text, "8.0;9.0", torch="2.14.1").ok  # not read for 2.14: not excused


def test_deviations_name_found_and_expected() -> None:
    text = _ninja(
        ("a.cu", "-gencode arch=compute_80,code=sm_80"),
        ("b.cu", TWO + " -gencode arch=compute_90,code=compute_90"),
        ("c.cu", "-arch=native"),
    )
    proof = _prove(text, "8.0;9.0")
    assert not proof.ok and proof.exact == 0
    a, b, c = proof.deviations
    assert (a.found, a.missing, a.extra) == (("sm_80",), ("sm_90",), ())
    assert b.extra == ("compute_90",)
    assert c.problems and c.found == ()
    assert requested_images(ArchList.parse("8.0;9.0+PTX")) == ("sm_80", "sm_90", "compute_90")


def test_no_cuda_step_is_not_proved() -> None:
    assert not _prove(RULE, "8.0").ok


def test_a_malformed_rule_table_names_its_key() -> None:
    row = {"id": "x", "file": "f.cu", "adds": ["sm_90x"], "when": "compute_90",
           "nvcc_min": "12.0", "torch": ">=2.6", "source": "s", "text": "t"}  # fmt: skip
    with pytest.raises(FactsError, match="adds"):
        parse_additions({"schema_version": 1, "addition": [row]})
    with pytest.raises(FactsError, match="torch"):
        parse_additions({"schema_version": 1, "addition": [{**row, "adds": ["sm_90a"],
                                                            "torch": "two"}]})  # fmt: skip


def test_extras_a_wheel_carries_cite_the_rule_that_adds_them() -> None:
    said = explained_extras(["sm_90a", "sm_75"], ArchList.parse("8.0;9.0"), load_additions())
    assert said == (
        "sm_90a: RowwiseScaledMM.cu (pytorch-rowwise-scaled-mm-sm90a, "
        "cmake/Codegen.cmake:79-92 (pytorch 2.6.0))",
        "sm_90a: AsyncMM.cu (pytorch-c10d-async-mm-sm90a, caffe2/CMakeLists.txt:573-580 "
        "(pytorch 2.6.0))",
    )
    assert explained_extras(["sm_90a"], ArchList.parse("8.0"), load_additions()) == ()
