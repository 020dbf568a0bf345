"""A build.ninja's graph as farm jobs, with each step's seconds from PyTorch's measured strata.

``graph_jobs`` turns the edges a plain ``ninja`` runs (``binary/buildgraph.py``) into the jobs
``verdicts/farm_schedule.py`` schedules: one job per edge, waiting for the edges that make its
explicit, implicit and order-only inputs (a link for its objects, an object for the codegen its
target orders first; a ``phony`` edge is a job of no seconds, so a wait through it is kept).
Compile steps (CUDA, C++, C) may go to a farm; links, symlinks, codegen and everything else run
on the building machine.

Seconds come from ``PYTORCH_STRATA``: CPU seconds per object measured on PyTorch 2.6.0 with
CUDA 12.4 for "8.0;9.0" (docs/building-pytorch.md; 2 cores shared and loaded, so CPU seconds,
not wall). A step whose file was measured alone gets its own figure; every other step is
classified into a stratum by its path and sampled within the stratum's measured range with a
fixed seed (``random.Random(seed)``, steps taken in file order), so a run is reproducible. A
stratum with a measured median is sampled half below it and half above. Links and codegen
commands were not measured one by one: their figures are assumptions, and their stratum says
so. For one arch a CUDA step costs its stratum's measured ratio of two (0.62 for ordinary
kernels, 0.47 for flash-attention); host code is paid once either way.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from archwheel.binary.buildgraph import BuildGraph, GraphEdge
from archwheel.verdicts.compile_jobs import Job, Where

COMPILE_KINDS = frozenset({"cuda", "cxx", "c"})


@dataclass(frozen=True)
class Stratum:
    """A class of build steps and the seconds one of them takes (two archs)."""

    name: str
    low: float
    high: float
    median: float | None  # sampled half below, half above; None: uniform in [low, high]
    basis: str  # what was measured, or that it is assumed
    one_arch: float = 1.0  # the cost of one arch over two (CUDA steps)

    def sample(self, rng: random.Random) -> float:
        """One step's seconds, drawn from ``rng`` (one draw per step, whatever the stratum)."""
        u = rng.random()
        if self.median is None:
            return self.low + (self.high - self.low) * u
        if u < 0.5:
            return self.low + (self.median - self.low) * u * 2
        return self.median + (self.high - self.median) * (u - 0.5) * 2


_MEASURED = "measured"
_ASSUMED = "assumed, not measured"
PYTORCH_STRATA = {
    s.name: s
    for s in (
        Stratum("c10", 0.5, 1.4, None, f"{_MEASURED}: 93 CPU-s over c10 + c10_cuda's 99 steps"),
        Stratum(
            "cuda kernel",
            5.0,
            60.0,
            22.0,
            f"{_MEASURED}: 5-60 CPU-s, median 22; memory-efficient attention's kernels, not "
            "measured apart, are sampled here too",
            0.62,
        ),
        Stratum("cuda heavy", 106.0, 358.0, None, f"{_MEASURED}: 106-358 CPU-s", 0.62),
        Stratum("flash-attention", 186.0, 322.0, None, f"{_MEASURED}: 186-322 CPU-s", 0.47),
        Stratum("generated", 44.0, 79.0, None, f"{_MEASURED}: 44-79 CPU-s"),
        Stratum("c++ object", 1.4, 14.0, None, f"{_MEASURED}: 1.4-14 CPU-s (C objects too)"),
        Stratum(
            "codegen",
            30.0,
            60.0,
            None,
            f"{_MEASURED} 1-2 min wall for ATen + autograd codegen together; per command "
            f"{_ASSUMED}",
        ),
        Stratum("shared link", 5.0, 60.0, None, _ASSUMED),
        Stratum("static archive", 0.5, 2.0, None, _ASSUMED),
        Stratum("no work", 0.0, 0.0, None, "phony edges and library symlinks"),
    )
}
# Objects compiled and timed alone (user CPU seconds; docs/building-pytorch.md).
PYTORCH_MEASURED = {
    "aten/src/ATen/cuda/Sleep.cu": 26.0,
    "aten/src/ATen/native/cuda/RowwiseScaledMM.cu": 200.0,
}
HEAVY_KERNELS = ("Logcumsumexp", "BinaryRemainder")
_GENERATED = (
    "/csrc/autograd/generated/",
    "/csrc/lazy/generated/",
    "/csrc/inductor/aoti_torch/generated/",
)


def pytorch_stratum(edge: GraphEdge) -> str:
    """The stratum of one of PyTorch's build steps, by its kind, rule and source path."""
    if edge.kind in ("phony", "symlink", "other"):
        return "no work"
    if edge.kind == "codegen":
        return "codegen"
    if edge.kind == "link":
        return "static archive" if "STATIC_LIBRARY" in edge.rule else "shared link"
    source = edge.source
    target = " ".join(edge.outputs)
    name = PurePosixPath(source).name
    if edge.kind == "cuda":
        if "/flash_attn/" in source:
            return "flash-attention"
        if name.startswith(HEAVY_KERNELS):
            return "cuda heavy"
        return "cuda kernel"
    if target.startswith("c10/"):
        return "c10"
    generated_aten = "/build/aten/src/ATen/" in source and "/native/" not in source
    if generated_aten or any(part in source for part in _GENERATED):
        return "generated"
    return "c++ object"


def measured_seconds(edge: GraphEdge) -> float | None:
    """The seconds of a step whose file was measured alone; None for every other step."""
    for suffix, seconds in PYTORCH_MEASURED.items():
        if edge.kind == "cuda" and edge.source.endswith("/" + suffix):
            return seconds
    return None


def _where(edge: GraphEdge) -> Where:
    return "farm" if edge.kind in COMPILE_KINDS else "local"


def edge_name(edge: GraphEdge) -> str:
    """A job's name: the edge's place in the file, its kind and its first output's name."""
    label = PurePosixPath(edge.outputs[0]).name if edge.outputs else edge.rule
    return f"{edge.index:04d} {edge.kind} {label}"


def graph_jobs(
    graph: BuildGraph,
    edges: Sequence[GraphEdge],
    seconds: Callable[[GraphEdge], float],
    kind: Callable[[GraphEdge], str] | None = None,
) -> tuple[Job, ...]:
    """One job per edge of ``edges`` (those a build runs: ``graph.reached()``), waiting for the
    edges among them that make what it takes; ``seconds`` times each, ``kind`` labels it."""
    makers = graph.makers()
    names = {e.index: edge_name(e) for e in edges}
    jobs = []
    for edge in edges:
        deps = tuple(names[d] for d in graph.deps(edge, makers) if d in names)
        label = kind(edge) if kind else edge.kind
        jobs.append(Job(names[edge.index], seconds(edge), deps, _where(edge), label))
    return tuple(jobs)


def pytorch_jobs(
    graph: BuildGraph, seed: int = 0, archs: int = 2
) -> tuple[tuple[Job, ...], dict[str, int]]:
    """The jobs a plain ``ninja`` runs on PyTorch's build graph, timed from its strata (a fixed
    ``seed``; ``archs`` 1 or 2), and how many steps each stratum (or "measured alone") has."""
    if archs not in (1, 2):
        raise ValueError("the strata were measured for one or two archs")
    rng = random.Random(seed)
    drawn: dict[int, float] = {}
    counts: dict[str, int] = {}
    edges = graph.reached()
    for edge in edges:
        stratum = PYTORCH_STRATA[pytorch_stratum(edge)]
        value = stratum.sample(rng)  # drawn for every step, so one measured file moves no other
        exact = measured_seconds(edge)
        label = "measured alone" if exact is not None else stratum.name
        counts[label] = counts.get(label, 0) + 1
        value = exact if exact is not None else value
        if archs == 1 and edge.kind == "cuda":
            value *= stratum.one_arch
        drawn[edge.index] = value
    jobs = graph_jobs(graph, edges, lambda e: drawn[e.index], pytorch_stratum)
    return jobs, counts
