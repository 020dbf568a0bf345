"""``archwheel build-files``: the proof printed, its exit codes, an unreadable build file."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

import archwheel
from tests.support.cli import CliRun

SCHEMA = Path(archwheel.__file__).parent / "interfaces/schema/build-files.schema.json"

NINJA = """\
include CMakeFiles/rules.ninja
build a.cu.o: CUDA_COMPILER__t_Release /src/aten/src/ATen/native/cuda/Fill.cu
  FLAGS = -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
build b.cu.o: CUDA_COMPILER__t_Release /src/aten/src/ATen/native/cuda/RowwiseScaledMM.cu
  FLAGS = -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 $
-gencode arch=compute_90a,code=sm_90a
"""
RULES = """\
rule CUDA_COMPILER__t_Release
  command = /usr/bin/nvcc $FLAGS -x cu -c $in -o $out
"""
CUDA_CMAKE = 'set(CMAKE_CUDA_COMPILER_VERSION "12.4.131")\n'


def _build(root: Path) -> Path:
    build = root / "build"
    (build / "CMakeFiles/3.31.6").mkdir(parents=True)
    (build / "build.ninja").write_text(NINJA)
    (build / "CMakeFiles/rules.ninja").write_text(RULES)
    (build / "CMakeFiles/3.31.6/CMakeCUDACompiler.cmake").write_text(CUDA_CMAKE)
    (root / "version.txt").write_text("2.6.0a0\n")
    return build


def test_proof_in_json_and_text(cli_run: CliRun, tmp_path: Path) -> None:
    _build(tmp_path)
    code, out, err = cli_run("build-files", str(tmp_path), "--arch", "8.0;9.0", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    assert (doc["torch"], doc["nvcc"]) == ("2.6.0", "12.4.131")  # found beside the build
    assert (doc["cuda_steps"], doc["exact"], doc["with_additions"], doc["deviating"]) == (
        2, 1, 1, 0)  # fmt: skip
    code, out, _ = cli_run("build-files", str(tmp_path / "build"), "--arch", "8.0;9.0")
    assert code == 0
    assert "2 CUDA steps: 1 exact, 1 exact with PyTorch's own additions, 0 deviating" in out
    assert "addition: /src/aten/src/ATen/native/cuda/RowwiseScaledMM.cu: sm_90a" in out


def test_deviation_exits_one(cli_run: CliRun, tmp_path: Path) -> None:
    build = _build(tmp_path)
    code, out, _ = cli_run("build-files", str(build / "build.ninja"), "--arch", "8.0;9.0;10.0")
    assert code == 1
    assert "NOT PROVED: 2 CUDA steps deviate" in out and "missing sm_100" in out


def test_unreadable_build_file_is_one_line(cli_run: CliRun, tmp_path: Path) -> None:
    code, _, err = cli_run("build-files", str(tmp_path), "--arch", "8.0")
    assert code == 3 and "holds no build.ninja" in err
    (tmp_path / "build.ninja").write_text("build a: cu b\n")
    code, _, err = cli_run("build-files", str(tmp_path), "--arch", "8.0")
    assert code == 3 and "unknown build rule 'cu'" in err and err.count("\n") == 1
