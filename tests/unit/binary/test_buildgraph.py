"""The build.ninja graph reader (``binary.buildgraph``): every edge with its kind and its three
lists of waits, on hand-written files and on PyTorch 2.6.0's recorded configured build."""

from __future__ import annotations

import tarfile
from collections import Counter

import pytest

from archwheel.binary.buildgraph import BuildGraph, edge_kind, read_ninja_graph
from tests.support.paths import DATA

SMALL = """\
rule CUDA_COMPILER__k_Release
  command = nvcc -c $in -o $out
rule CXX_COMPILER__k_Release
  command = g++ -c $in -o $out
rule CXX_SHARED_LIBRARY_LINKER__k_Release
  command = g++ -shared $in -o $out
rule CUSTOM_COMMAND
  command = $COMMAND
build gen/ops.h gen/ops.cpp | gen/stamp: CUSTOM_COMMAND ops.yaml
  COMMAND = python3 gen.py
  DESC = Generating ops
build order_k: phony || gen/ops.h
build k.cu.o: CUDA_COMPILER__k_Release k.cu | k.h || order_k
build ops.cpp.o: CXX_COMPILER__k_Release gen/ops.cpp || order_k
build libk.so: CXX_SHARED_LIBRARY_LINKER__k_Release k.cu.o ops.cpp.o
build all: phony libk.so
build unused.o: CXX_COMPILER__k_Release unused.cpp
default all
"""


def test_a_small_file_reads_into_edges_with_their_kinds_and_waits() -> None:
    graph = read_ninja_graph(SMALL)
    kinds = [e.kind for e in graph.edges]
    assert kinds == ["codegen", "phony", "cuda", "cxx", "link", "phony", "cxx"]
    gen, order, kernel, ops, link, _, _ = graph.edges
    assert gen.outputs == ("gen/ops.h", "gen/ops.cpp", "gen/stamp")
    assert gen.description == "Generating ops"
    assert kernel.inputs == ("k.cu",) and kernel.implicit == ("k.h",)
    assert kernel.order_only == ("order_k",)
    assert graph.deps(kernel) == (order.index,)
    assert graph.deps(order) == (gen.index,)
    assert graph.deps(ops) == (gen.index, order.index)  # explicit first, order-only after
    assert graph.deps(link) == (kernel.index, ops.index)
    assert graph.defaults == ("all",)


def test_a_plain_ninja_runs_what_the_default_targets_reach() -> None:
    graph = read_ninja_graph(SMALL)
    reached = {e.outputs[0] for e in graph.reached()}
    assert "unused.o" not in reached
    assert {"gen/ops.h", "order_k", "k.cu.o", "ops.cpp.o", "libk.so", "all"} == reached
    no_default = read_ninja_graph(SMALL.replace("default all\n", ""))
    # ninja's root nodes: every output no edge takes (an implicit output too)
    assert set(no_default.targets()) == {"all", "unused.o", "gen/stamp"}
    assert "unused.o" in {e.outputs[0] for e in no_default.reached()}


@pytest.mark.parametrize(
    ("rule", "kind"),
    [
        ("CUDA_COMPILER__torch_cuda_unscanned_Release", "cuda"),
        ("C_COMPILER__clog_unscanned_Release", "c"),
        ("CXX_STATIC_LIBRARY_LINKER__kineto_Release", "link"),
        ("CXX_EXECUTABLE_LINKER__torch_shm_manager_Release", "link"),
        ("CXX_MODULE_LIBRARY_LINKER__functorch_Release", "link"),
        ("CMAKE_SYMLINK_LIBRARY", "symlink"),
        ("cuda_compile", "cuda"),
        ("RERUN_CMAKE", "other"),
    ],
)
def test_edge_kinds_come_from_rule_names(rule: str, kind: str) -> None:
    assert edge_kind(rule) == kind


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


def test_pytorchs_recorded_graph_counts_its_edges_by_kind(pytorch: BuildGraph) -> None:
    assert pytorch.problems == ()
    assert len(pytorch.edges) == 2462
    assert Counter(e.kind for e in pytorch.edges) == {
        "cxx": 1604, "cuda": 341, "phony": 276, "codegen": 152, "c": 55, "link": 20,
        "symlink": 11, "other": 3,
    }  # fmt: skip
    # what `ninja` (default all) runs: every compile and link, 7 of the 152 custom commands
    assert Counter(e.kind for e in pytorch.reached()) == {
        "cxx": 1604, "cuda": 341, "phony": 59, "c": 55, "link": 20, "symlink": 11, "codegen": 7,
    }  # fmt: skip


def test_pytorchs_cuda_link_waits_for_its_objects_and_they_for_codegen(
    pytorch: BuildGraph,
) -> None:
    makers = pytorch.makers()
    link = pytorch.edges[makers["lib/libtorch_cuda.so.2.6.0"]]
    assert link.kind == "link"
    waits = {pytorch.edges[d] for d in pytorch.deps(link, makers)}
    cuda_objects = {e for e in pytorch.edges if e.kind == "cuda"}
    assert cuda_objects <= waits  # all 341 CUDA objects are torch_cuda's
    # and, order-only, for libtorch_cpu (through its symlink's edge)
    cpu = pytorch.edges[makers["lib/libtorch_cpu.so"]]
    assert cpu in waits and cpu.kind == "symlink" and "lib/libtorch_cpu.so" in link.order_only
    # an object waits (order-only, through its target's phony) for the ATen codegen
    flash = next(e for e in cuda_objects if "flash_fwd_hdim128_fp16_sm80" in e.source)
    order = [pytorch.edges[d] for d in pytorch.deps(flash, makers)]
    assert [e.kind for e in order] == ["phony"]
    ancestors = {pytorch.edges[d].description for d in _closure(pytorch, order[0].index)}
    assert "Generating ATen headers" in ancestors


def _closure(graph: BuildGraph, index: int) -> set[int]:
    makers = graph.makers()
    seen: set[int] = set()
    todo = [index]
    while todo:
        i = todo.pop()
        for d in graph.deps(graph.edges[i], makers):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen
