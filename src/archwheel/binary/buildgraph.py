"""A ``build.ninja`` as the graph ninja runs: every build edge, what it makes, what it waits for.

Pure, like ``binary/buildfile.py`` whose reader it shares (the caller hands the text and a
callback for the files an ``include``/``subninja`` names). No command is expanded: an edge's
kind comes from its rule's name, which CMake writes per language and target
(``CUDA_COMPILER__torch_cuda_unscanned_Release``, ``CXX_SHARED_LIBRARY_LINKER__torch_cpu_Release``,
``CUSTOM_COMMAND``, ``phony``) and ``torch.utils.cpp_extension`` as ``cuda_compile``, ``compile``
and ``link``.

An edge waits, as ninja 1.11 makes it wait, for the edges that make its explicit inputs, its
implicit inputs (after ``|``) and its order-only inputs (after ``||``); a path no edge makes is a
source file. Validations (after ``|@``) do not gate an edge and are left out. What a plain
``ninja`` builds is what the ``default`` targets reach (every output no edge takes, when the file
names none): ``BuildGraph.reached`` gives those edges.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from types import MappingProxyType

from archwheel.binary.buildfile import _Reader, _Scope

_COMPILER = re.compile(r"^([A-Za-z]+)_COMPILER__")
_LINKER = re.compile(r"_(?:LIBRARY|EXECUTABLE)_LINKER__|^link$")
_SIMPLE_KINDS = MappingProxyType(
    {
        "phony": "phony",
        "CUSTOM_COMMAND": "codegen",
        "CMAKE_SYMLINK_LIBRARY": "symlink",
        "cuda_compile": "cuda",
        "compile": "cxx",
        "link": "link",
    }
)


@dataclasses.dataclass(frozen=True)
class GraphEdge:
    """One build statement: its outputs, rule, kind and the three lists of what it waits for."""

    index: int  # its place among the file's build statements
    outputs: tuple[str, ...]  # explicit, then implicit outputs
    rule: str
    kind: str  # cuda, cxx, c, link, codegen, symlink, phony, or "other" (CMake's own)
    inputs: tuple[str, ...]
    implicit: tuple[str, ...] = ()
    order_only: tuple[str, ...] = ()
    description: str = ""  # the build's DESC binding, where it has one

    @property
    def source(self) -> str:
        """The first explicit input (a compile step's source file)."""
        return self.inputs[0] if self.inputs else ""

    def waits_for(self) -> tuple[str, ...]:
        """Every path this edge waits for: explicit, implicit, then order-only inputs."""
        return self.inputs + self.implicit + self.order_only


@dataclasses.dataclass(frozen=True)
class BuildGraph:
    """Every build edge of a build.ninja, and its ``default`` targets."""

    edges: tuple[GraphEdge, ...]
    defaults: tuple[str, ...]
    problems: tuple[str, ...] = ()

    def makers(self) -> dict[str, int]:
        """Each output path and the index of the edge that makes it."""
        return {out: edge.index for edge in self.edges for out in edge.outputs}

    def deps(self, edge: GraphEdge, makers: dict[str, int] | None = None) -> tuple[int, ...]:
        """The edges ``edge`` waits for (indices, each once, in the order first named)."""
        makers = self.makers() if makers is None else makers
        found = dict.fromkeys(makers[p] for p in edge.waits_for() if p in makers)
        found.pop(edge.index, None)
        return tuple(found)

    def targets(self) -> tuple[str, ...]:
        """What a plain ``ninja`` builds: the ``default`` targets, else every output no edge
        takes."""
        if self.defaults:
            return self.defaults
        taken = {p for edge in self.edges for p in edge.waits_for()}
        return tuple(p for edge in self.edges for p in edge.outputs if p not in taken)

    def reached(self, targets: Iterable[str] | None = None) -> tuple[GraphEdge, ...]:
        """The edges a build of ``targets`` (default: ``targets()``) runs, in file order."""
        makers = self.makers()
        todo = [makers[t] for t in (self.targets() if targets is None else targets) if t in makers]
        seen: set[int] = set()
        while todo:
            index = todo.pop()
            if index in seen:
                continue
            seen.add(index)
            todo.extend(makers[p] for p in self.edges[index].waits_for() if p in makers)
        return tuple(e for e in self.edges if e.index in seen)


def edge_kind(rule: str) -> str:
    """An edge's kind from its rule's name (CMake's or torch.utils.cpp_extension's)."""
    if rule in _SIMPLE_KINDS:
        return _SIMPLE_KINDS[rule]
    m = _COMPILER.match(rule)
    if m:
        return m.group(1).lower()
    if _LINKER.search(rule):
        return "link"
    return "other"


def read_ninja_graph(
    text: str,
    read_included: Callable[[str], str | None] | None = None,
    name: str = "build.ninja",
) -> BuildGraph:
    """Every build edge of a ``build.ninja`` (``read_included`` as for ``read_ninja``)."""
    reader = _Reader(read_included)
    reader.parse(text, name, _Scope({}), 0)
    edges = tuple(
        GraphEdge(
            index=i,
            outputs=tuple(build.outputs + build.implicit_outputs),
            rule=build.rule,
            kind=edge_kind(build.rule),
            inputs=tuple(build.inputs),
            implicit=tuple(build.implicit),
            order_only=tuple(build.order_only),
            description=build.bindings.get("DESC", ""),
        )
        for i, build in enumerate(reader.builds)
    )
    return BuildGraph(edges, tuple(reader.defaults), tuple(reader.problems))
