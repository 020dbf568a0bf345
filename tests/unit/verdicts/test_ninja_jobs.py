"""A build.ninja's graph as farm jobs (``verdicts.ninja_jobs``): the waits a plain ninja keeps,
PyTorch's strata by path, and the sampling's reproducibility; then the recorded PyTorch 2.6.0
build against the projection made from the same measurements."""

from __future__ import annotations

import tarfile
import time

import pytest

from archwheel.binary.buildgraph import BuildGraph, read_ninja_graph
from archwheel.verdicts.compile_jobs import Job
from archwheel.verdicts.farm_schedule import critical_chain, farm_walls, serial_work
from archwheel.verdicts.ninja_jobs import (
    PYTORCH_STRATA,
    graph_jobs,
    pytorch_jobs,
    pytorch_stratum,
)
from tests.support.paths import DATA

SMALL = """\
rule CUSTOM_COMMAND
  command = $COMMAND
rule CUDA_COMPILER__torch_cuda_Release
  command = nvcc -c $in -o $out
rule CXX_COMPILER__torch_cpu_Release
  command = g++ -c $in -o $out
rule CXX_SHARED_LIBRARY_LINKER__torch_cuda_Release
  command = g++ -shared $in -o $out
build aten/src/ATen/Functions.h aten/src/ATen/RegisterCUDA.cpp: CUSTOM_COMMAND x.yaml
  COMMAND = python3 -m torchgen.gen
build order_torch_cuda: phony || aten/src/ATen/Functions.h
build fa.cu.o: CUDA_COMPILER__torch_cuda_Release /src/pytorch/aten/src/ATen/native/transformers/cuda/flash_attn/kernels/flash_fwd_hdim64_fp16_sm80.cu || order_torch_cuda
build lc.cu.o: CUDA_COMPILER__torch_cuda_Release /src/pytorch/aten/src/ATen/native/cuda/LogcumsumexpKernel.cu || order_torch_cuda
build fill.cu.o: CUDA_COMPILER__torch_cuda_Release /src/pytorch/aten/src/ATen/native/cuda/Fill.cu || order_torch_cuda
build sleep.cu.o: CUDA_COMPILER__torch_cuda_Release /src/pytorch/aten/src/ATen/cuda/Sleep.cu || order_torch_cuda
build reg.cpp.o: CXX_COMPILER__torch_cpu_Release /src/pytorch/build/aten/src/ATen/RegisterCUDA.cpp || order_torch_cuda
build c10/CMakeFiles/c10.dir/core/Device.cpp.o: CXX_COMPILER__torch_cpu_Release /src/pytorch/c10/core/Device.cpp
build misc.cpp.o: CXX_COMPILER__torch_cpu_Release /src/pytorch/torch/csrc/jit/ir/ir.cpp
build lib/libtorch_cuda.so: CXX_SHARED_LIBRARY_LINKER__torch_cuda_Release fa.cu.o lc.cu.o fill.cu.o sleep.cu.o reg.cpp.o c10/CMakeFiles/c10.dir/core/Device.cpp.o misc.cpp.o
build all: phony lib/libtorch_cuda.so
default all
"""


def _by_label(jobs: tuple[Job, ...]) -> dict[str, Job]:
    return {j.name.split(" ", 1)[1]: j for j in jobs}


def test_each_step_falls_in_its_stratum_by_path() -> None:
    graph = read_ninja_graph(SMALL)
    strata = {e.outputs[0]: pytorch_stratum(e) for e in graph.edges}
    assert strata == {
        "aten/src/ATen/Functions.h": "codegen",
        "order_torch_cuda": "no work",
        "fa.cu.o": "flash-attention",
        "lc.cu.o": "cuda heavy",
        "fill.cu.o": "cuda kernel",
        "sleep.cu.o": "cuda kernel",  # its stratum; its seconds are its own measurement
        "reg.cpp.o": "generated",
        "c10/CMakeFiles/c10.dir/core/Device.cpp.o": "c10",
        "misc.cpp.o": "c++ object",
        "lib/libtorch_cuda.so": "shared link",
        "all": "no work",
    }


def test_jobs_keep_ninjas_waits_and_where_each_step_may_run() -> None:
    graph = read_ninja_graph(SMALL)
    jobs, counts = pytorch_jobs(graph, seed=3)
    named = _by_label(jobs)
    link = named["link libtorch_cuda.so"]
    assert len(link.deps) == 7 and link.where == "local"
    fa = named["cuda fa.cu.o"]
    assert fa.deps == (named["phony order_torch_cuda"].name,)
    assert fa.where == "farm"
    assert named["codegen Functions.h"].where == "local"
    assert counts["measured alone"] == 1 and named["cuda sleep.cu.o"].seconds == 26.0
    for job in jobs:
        if job.kind in PYTORCH_STRATA and not job.name.endswith("sleep.cu.o"):
            s = PYTORCH_STRATA[job.kind]
            assert s.low <= job.seconds <= s.high
    # the chain: the codegen, its phony, the longest compile that waits for it, the link, all
    longest = max((j for j in jobs if j.where == "farm" and j.deps), key=lambda j: j.seconds)
    chain = critical_chain(jobs)
    assert [j.name for j in chain] == [
        named["codegen Functions.h"].name,
        named["phony order_torch_cuda"].name,
        longest.name,
        link.name,
        named["phony all"].name,
    ]


def test_sampling_is_reproducible_and_one_arch_costs_less() -> None:
    graph = read_ninja_graph(SMALL)
    first, _ = pytorch_jobs(graph, seed=1)
    assert pytorch_jobs(graph, seed=1)[0] == first
    assert pytorch_jobs(graph, seed=2)[0] != first
    one, _ = pytorch_jobs(graph, seed=1, archs=1)
    two_by, one_by = _by_label(first), _by_label(one)
    assert one_by["cuda fa.cu.o"].seconds == pytest.approx(0.47 * two_by["cuda fa.cu.o"].seconds)
    assert one_by["cuda fill.cu.o"].seconds == pytest.approx(
        0.62 * two_by["cuda fill.cu.o"].seconds
    )
    assert one_by["cxx misc.cpp.o"].seconds == two_by["cxx misc.cpp.o"].seconds
    with pytest.raises(ValueError, match="one or two archs"):
        pytorch_jobs(graph, archs=3)


def test_graph_jobs_times_any_build_file() -> None:
    graph = read_ninja_graph(SMALL)
    jobs = graph_jobs(graph, graph.reached(), lambda e: 1.0 if e.kind != "phony" else 0.0)
    assert len(jobs) == len(graph.edges)
    assert serial_work(jobs) == 9.0  # 7 compiles, the codegen, the link


@pytest.fixture(scope="module")
def pytorch(tmp_path_factory: pytest.TempPathFactory) -> BuildGraph:
    root = tmp_path_factory.mktemp("pytorch")
    with tarfile.open(DATA / "pytorch-2.6.0-cuda" / "configured.tar.xz") as archive:
        archive.extractall(root, filter="data")
    build = root / "build"

    def included(name: str) -> str | None:
        path = build / name
        return path.read_text() if path.is_file() else None

    return read_ninja_graph((build / "build.ninja").read_text(), included)


def test_pytorchs_graph_agrees_with_the_projection_from_its_measurements(
    pytorch: BuildGraph,
) -> None:
    start = time.perf_counter()
    jobs, counts = pytorch_jobs(pytorch, seed=0)
    assert counts["flash-attention"] == 48 and counts["c10"] == 99
    assert counts["cuda heavy"] == 2 and counts["measured alone"] == 2
    assert sum(counts.values()) == 2097
    # 8-10 CPU-hours for "8.0;9.0" (docs/building-pytorch.md), within 20%
    assert 8 * 0.8 <= serial_work(jobs) / 3600 <= 10 * 1.2
    walls = farm_walls(jobs, (1, 16, 64, 256), cores=2)
    assert 4 * 0.8 <= walls[1] / 3600 <= 5 * 1.2  # one server of 2 cores: 4-5 h
    assert walls[1] > walls[16] > walls[64] >= walls[256]
    assert walls[256] >= sum(j.seconds for j in critical_chain(jobs)) - 1e-6
    assert time.perf_counter() - start < 10
