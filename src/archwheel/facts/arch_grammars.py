"""Who reads the arch list, and what each reader makes of it: the entry points.

An arch list reaches the compiler through code that parses it, and each parser has its own
grammar. archwheel models six of them as data (``arch_consumers.toml``, loaded by
``arch_consumers``) plus pure functions (``arch_readers``):

``torch-cmake``
    PyTorch's CMake (``select_compute_arch.cmake``, ``CUDA_SELECT_NVCC_ARCH_FLAGS``), which reads
    ``TORCH_CUDA_ARCH_LIST`` when PyTorch itself or a ``find_package(Torch)`` project is built.
``cmake-findcuda``
    CMake's own FindCUDA ``select_compute_arch.cmake`` (the same function, CMake's pattern, names
    and error), which projects that call ``cuda_select_nvcc_arch_flags`` themselves read.
``cpp-extension``
    ``torch.utils.cpp_extension._get_cuda_arch_flags``, which reads ``TORCH_CUDA_ARCH_LIST`` for
    setuptools ``CUDAExtension`` builds.
``cmake``
    CMake's ``CUDA_ARCHITECTURES`` (``CMAKE_CUDA_ARCHITECTURES``): ``80``, ``90-real``, ``90a``.
``nvcc``
    plain nvcc flags: ``-gencode=arch=compute_90,code=sm_90``, ``-arch=sm_90``.
projects (``flash-attn``)
    a project's own variable in its own format (``FLASH_ATTN_CUDA_ARCHS="80;90;100;120"``).

``read(consumer, value)`` emulates the consumer on a value as written: the images it produces, or
the entries it would reject, drop, ignore or reinterpret (``Finding``), with the consumer's own
error text where it stops. ``render(consumer, archs)`` writes an ``ArchList`` in exactly what that
consumer accepts, or raises ``ArchListError`` naming the consumer's rule and the nearest list it
does accept; the rendered value is read back and must give the requested images.
``consumer_views`` does both for every consumer (``archwheel arch --consumers``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from archwheel.errors import ArchListError
from archwheel.facts.arch import ArchList, ArchSpec, Target, Variant
from archwheel.facts.arch_consumers import (
    CMAKE,
    CMAKE_FINDCUDA,
    CPP_EXTENSION,
    NVCC,
    TORCH_CMAKE,
    Grammars,
    cmake_regex,
    load_grammars,
)
from archwheel.facts.arch_readers import (
    CMAKE_DOC,
    NVCC_DOC,
    Finding,
    Reading,
    image_names,
    read_cmake,
    read_cpp_extension,
    read_nvcc,
    read_project,
    read_select_compute_arch,
)
from archwheel.facts.catalog import CudaFacts, load_facts
from archwheel.facts.versions import CudaVersion

# -- reading ------------------------------------------------------------------------------------


def read(
    consumer: str,
    value: str | None,
    *,
    torch: str | None = None,
    cuda: CudaVersion | None = None,
    cflags: Iterable[str] = (),
    variable: str | None = None,
    grammars: Grammars | None = None,
    facts: CudaFacts | None = None,
) -> Reading:
    """What ``consumer`` makes of ``value`` as written (None: the variable is unset)."""
    g, var = _grammar_of(consumer, grammars, variable)
    if consumer == TORCH_CMAKE:
        tables = g.for_torch(torch).select_compute_arch
        reading = read_select_compute_arch(value, tables, var, consumer)
    elif consumer == CMAKE_FINDCUDA:
        assert g.findcuda is not None  # check_consumer refused it otherwise
        reading = read_select_compute_arch(value, g.findcuda.select_compute_arch, var, consumer)
    elif consumer == CPP_EXTENSION:
        reading = read_cpp_extension(value, g.for_torch(torch), tuple(cflags), var)
    elif consumer == CMAKE:
        reading = read_cmake(value, var)
    elif consumer == NVCC:
        reading = read_nvcc(value, var)
    else:
        reading = read_project(value, g.projects[consumer], cuda, var)
    return _check_real(reading, facts or load_facts())


def _grammar_of(
    consumer: str, grammars: Grammars | None, variable: str | None
) -> tuple[Grammars, str]:
    """The grammars (loaded unless given), checked to know ``consumer``, and its variable."""
    g = grammars or load_grammars()
    g.check_consumer(consumer)
    return g, variable or g.variable(consumer)


def _check_real(reading: Reading, facts: CudaFacts) -> Reading:
    """An image of a compute capability no GPU has is a compile error waiting to happen."""
    if reading.fails:
        return reading
    extra: list[Finding] = []
    for name in reading.images:
        try:
            _, target = Target.from_name(name)
        except ArchListError:
            extra.append(Finding("reject", name, "nvcc has no such target"))
            continue
        if not facts.is_known(target.cc):
            extra.append(
                Finding("reject", name, f"no GPU has compute capability {target.cc}; nvcc fails")
            )
    if not extra:
        return reading
    return replace(reading, images=(), findings=reading.findings + tuple(extra))


# -- rendering -----------------------------------------------------------------------------------


def nearest(
    consumer: str,
    archs: ArchList,
    *,
    torch: str | None = None,
    cuda: CudaVersion | None = None,
    grammars: Grammars | None = None,
) -> ArchList:
    """The closest list ``consumer`` accepts: PTX-only becomes SASS+PTX, 'f' the plain target,
    and targets it cannot take at all are left out."""
    g = grammars or load_grammars()
    out: list[ArchSpec] = []
    if consumer in (CMAKE, NVCC):
        return archs
    if consumer == CMAKE_FINDCUDA and g.findcuda is not None:
        number = cmake_regex(g.findcuda.number_regex)
        for s in archs:
            plain = Target(s.target.cc)
            if number.search(plain.dotted):
                out.append(ArchSpec(plain, sass=True, ptx=s.ptx or not s.sass))
        return ArchList.of(out)
    if consumer in g.projects:
        p = g.projects[consumer]
        allowed = {e.target for e in p.entries if cuda is None or cuda >= e.min_cuda}
        for s in archs:
            plain = Target(s.target.cc)
            if plain in allowed:
                out.append(ArchSpec(plain, sass=True, ptx=False))
        return ArchList.of(out)
    tg = g.for_torch(torch)
    supported = set(tg.cpp_extension_supported)
    for s in archs:
        target = s.target
        spec = ArchSpec(target, sass=True, ptx=s.ptx or not s.sass)
        if consumer == CPP_EXTENSION:
            if target.variant is Variant.FAMILY_SPECIFIC:
                target = Target(target.cc)
                spec = ArchSpec(target, sass=True, ptx=spec.ptx)
            if target.dotted not in supported:
                continue
        out.append(spec)
    return ArchList.of(out)


def render(
    consumer: str,
    archs: ArchList,
    *,
    torch: str | None = None,
    cuda: CudaVersion | None = None,
    variable: str | None = None,
    grammars: Grammars | None = None,
    facts: CudaFacts | None = None,
) -> str:
    """``archs`` written for ``consumer``; raises ``ArchListError`` with the nearest it accepts."""
    g, var = _grammar_of(consumer, grammars, variable)
    problem = _render_problem(consumer, archs, g, torch, cuda)
    value = problem[1] if problem[0] is None else ""
    if problem[0] is None:
        reading = read(
            consumer, value, torch=torch, cuda=cuda, variable=var, grammars=g, facts=facts
        )
        if reading.ok and tuple(sorted(reading.images)) == image_names(archs):
            return value
        why = reading.describe() if not reading.ok else f"it would build {reading.describe()}"
        problem = (f"{value!r}: {why}", "")
    near = nearest(consumer, archs, torch=torch, cuda=cuda, grammars=g)
    near_text = _render_problem(consumer, near, g, torch, cuda)[1] if len(near) else ""
    rule_source = _source_of(consumer, g, torch)
    raise ArchListError(
        f"{consumer} ({var}, {rule_source}) cannot take {archs}: {problem[0]}",
        hint=(
            f"nearest list it accepts: {near}"
            + (f" ({var}={near_text})" if near_text and near_text != str(near) else "")
            if len(near)
            else "it builds none of them: ask for archs it builds instead, "
            + _accepts(consumer, g, torch)
        ),
    )


def _source_of(consumer: str, g: Grammars, torch: str | None) -> str:
    if consumer == CMAKE_FINDCUDA and g.findcuda is not None:
        return f"CMake {g.findcuda.cmake} FindCUDA select_compute_arch.cmake"
    if consumer == TORCH_CMAKE:
        tg = g.for_torch(torch)
        return f"torch {tg.torch} select_compute_arch.cmake"
    if consumer == CPP_EXTENSION:
        tg = g.for_torch(torch)
        return f"torch {tg.torch} cpp_extension._get_cuda_arch_flags"
    if consumer in g.projects:
        return g.projects[consumer].source.split(":")[0]
    return CMAKE_DOC if consumer == CMAKE else NVCC_DOC


def _accepts(consumer: str, g: Grammars, torch: str | None) -> str:
    if consumer == CPP_EXTENSION:
        return " ".join(g.for_torch(torch).cpp_extension_supported) + " (each may take +PTX)"
    if consumer in g.projects:
        p = g.projects[consumer]
        return p.separator.join(e.entry for e in p.entries)
    if consumer == CMAKE_FINDCUDA:
        return "X.Y with a one-digit major (each may take +PTX), e.g. 8.0;9.0"
    return "see docs/building-extensions.md"


def _render_problem(
    consumer: str,
    archs: ArchList,
    g: Grammars,
    torch: str | None,
    cuda: CudaVersion | None,
) -> tuple[str | None, str]:
    """(why not, "") or (None, the value)."""
    if consumer == CMAKE:
        return None, archs.to_cmake()
    if consumer == NVCC:
        return None, " ".join(archs.to_gencode())
    if consumer in g.projects:
        p = g.projects[consumer]
        by_target = {e.target: e for e in p.entries}
        parts: list[str] = []
        for s in archs:
            entry = by_target.get(s.target)
            if s.ptx or not s.sass:
                return f"{p.name} adds no PTX ({s.render()})", ""
            if entry is None:
                return (
                    f"{p.name} has no entry for {s.target.sm} (it acts on "
                    f"{p.separator.join(e.entry for e in p.entries)} only; others are dropped)",
                    "",
                )
            if cuda is not None and cuda < entry.min_cuda:
                return f"{p.name} adds {s.target.sm} only with CUDA >= {entry.min_cuda}", ""
            parts.append(entry.entry)
        return None, p.separator.join(parts)
    tg = g.for_torch(torch)
    parts = []
    for s in archs:
        if not s.sass:
            return f"TORCH_CUDA_ARCH_LIST cannot ask for PTX without SASS ({s.render()})", ""
        findcuda = g.findcuda if consumer == CMAKE_FINDCUDA else None
        if findcuda is not None and not cmake_regex(findcuda.number_regex).search(s.target.dotted):
            return (
                f"{s.target.dotted} does not match CMake {findcuda.cmake}'s pattern "
                f"{findcuda.number_regex} (one-digit majors, no 'a'/'f'); CMake stops "
                "with 'Unknown CUDA Architecture Name'",
                "",
            )
        if consumer == CPP_EXTENSION:
            if s.target.variant is Variant.FAMILY_SPECIFIC:
                return (
                    f"family-specific 'f' targets are not in its supported list ({s.render()})",
                    "",
                )
            if s.target.dotted not in tg.cpp_extension_supported:
                return f"{s.target.dotted} is not in torch {tg.torch}'s supported list", ""
        parts.append(s.render())
    return None, ";".join(parts)


# -- one list, every consumer ---------------------------------------------------------------------


def parse_arch_list(
    text: str, *, torch: str | None = None, facts: CudaFacts | None = None
) -> ArchList:
    """``ArchList.parse``, and where it refuses, what PyTorch's CMake accepts (``Ampere+PTX``)."""
    try:
        return ArchList.parse(text, facts)
    except ArchListError as exc:
        reading = read(TORCH_CMAKE, text, torch=torch, facts=facts)
        targets = reading.targets() if reading.ok else None
        if targets is None:
            raise exc from None
        return targets


@dataclass(frozen=True)
class ConsumerView:
    """What to set for one consumer, and what it makes of the list as the user wrote it."""

    consumer: str
    variable: str
    source: str
    value: str | None  # the canonical list rendered for this consumer
    refusal: str | None  # why it cannot take the list, with the nearest list it takes
    as_written: Reading | None  # TORCH_CUDA_ARCH_LIST readers: the text itself
    as_written_matches: bool | None  # the text gives exactly the canonical images

    def to_json_dict(self) -> dict[str, Any]:
        """The view as a JSON object, for ``archwheel arch --format json``."""
        doc: dict[str, Any] = {
            "consumer": self.consumer,
            "variable": self.variable,
            "source": self.source,
            "value": self.value,
            "refusal": self.refusal,
        }
        if self.as_written is not None:
            doc["as_written"] = {
                "value": self.as_written.value,
                "ok": self.as_written.ok,
                "images": list(self.as_written.images),
                "findings": [
                    {"kind": f.kind, "entry": f.entry, "rule": f.rule}
                    for f in self.as_written.findings
                ],
                "error": self.as_written.error,
                "matches_canonical": self.as_written_matches,
            }
        return doc


def consumer_views(
    text: str | None,
    archs: ArchList,
    *,
    torch: str | None = None,
    cuda: CudaVersion | None = None,
    facts: CudaFacts | None = None,
) -> tuple[ConsumerView, ...]:
    """For every known consumer, what to set to build ``archs``, or why it cannot take them;
    with ``text`` (the list as the user wrote it), what the torch readers make of it."""
    g = load_grammars()
    views: list[ConsumerView] = []
    wanted = image_names(archs)
    for consumer in g.consumers:
        variable = g.variable(consumer)
        try:
            value: str | None = render(consumer, archs, torch=torch, cuda=cuda, facts=facts)
            refusal = None
        except ArchListError as exc:
            value, refusal = None, exc.one_line()
        as_written: Reading | None = None
        matches: bool | None = None
        if text is not None and consumer in (TORCH_CMAKE, CPP_EXTENSION):
            as_written = read(consumer, text, torch=torch, cuda=cuda, facts=facts)
            matches = as_written.ok and tuple(sorted(as_written.images)) == wanted
            if as_written.ok and not matches:
                got = " ".join(as_written.images)
                finding = Finding("reinterpret", text, f"it builds {got}, not {' '.join(wanted)}")
                as_written = replace(as_written, findings=(finding,), error=None)
        views.append(
            ConsumerView(
                consumer,
                variable,
                _source_of(consumer, g, torch),
                value,
                refusal,
                as_written,
                matches,
            )
        )
    return tuple(views)
