"""Which arch list to build: the smallest one that runs natively on every GPU of a fleet.

A plain cubin sm_XY runs on every X.Z GPU with Z >= Y (rule ``sass-same-major``), so one target
per major version covers all GPUs of that major: the highest target the toolkit can compile that
is not above the fleet's lowest GPU of that major. 'a' cubins run on one compute capability only
and 'f' cubins cover no more than plain ones, so they are used only when asked for (their value is
features such as Hopper's wgmma, not coverage). ``--ptx`` adds PTX of the highest target, which
the driver can JIT-compile for GPUs newer than all of them (rule ``ptx-jit``).

``estimate_size`` predicts a wheel's size for an arch list from the bytes each arch costs in a
reference wheel the audit measured; it is an estimate, and says how it was computed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from archwheel.binary.model import Compression, InputInventory
from archwheel.facts.arch import ArchList, ArchSpec, CodeKind, Target, Variant, toolkit_problem
from archwheel.facts.catalog import CudaFacts, Toolkit, load_facts
from archwheel.facts.rules import ptx_jits_on, rule_for, sass_runs_on
from archwheel.facts.versions import ComputeCapability, CudaVersion
from archwheel.verdicts.compat.explain import renamed_capabilities
from archwheel.verdicts.compat.gpus import Gpu
from archwheel.verdicts.compat.modules import RELOCATABLE_SECTIONS
from archwheel.verdicts.compat.report import Reason
from archwheel.verdicts.document import document_header

ARCH_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class GpuCoverage:
    """How one GPU is served by an arch list."""

    gpu: Gpu
    mode: str  # "native", "jit", "none"
    image: str | None  # "sm_80", "compute_120"
    reason: Reason

    def to_json_dict(self) -> dict[str, Any]:
        """One entry of the recommendation's ``coverage``: the GPU, how it is served and why."""
        return {
            "gpu": self.gpu.to_json_dict(),
            "mode": self.mode,
            "image": self.image,
            "reason": self.reason.to_json_dict(),
        }


@dataclass(frozen=True)
class LibrarySizeEstimate:
    """One library's device code in the reference wheel and as estimated for the recommended list,
    with the archs whose cost was extrapolated or unknown."""

    path: str
    reference_device_bytes: int
    estimated_device_bytes: int
    extrapolated: tuple[str, ...]  # archs whose cost was extrapolated
    unestimated: tuple[str, ...]  # archs whose cost is unknown (counted as 0)


@dataclass(frozen=True)
class SizeEstimate:
    """A predicted wheel size, and how it was computed."""

    reference: str
    reference_bytes: int
    estimated_bytes: int
    removed_bytes: int
    added_bytes: int
    libraries: tuple[LibrarySizeEstimate, ...]
    method: str
    caveats: tuple[str, ...]

    @property
    def lower_bound(self) -> bool:
        """Some arch's cost is unknown (counted as 0), so the estimate is a lower bound."""
        return any(lib.unestimated for lib in self.libraries)

    def to_json_dict(self) -> dict[str, Any]:
        """The ``size_estimate`` object of the recommendation document."""
        return {
            "reference": self.reference,
            "reference_bytes": self.reference_bytes,
            "estimated_bytes": self.estimated_bytes,
            "removed_bytes": self.removed_bytes,
            "added_bytes": self.added_bytes,
            "lower_bound": self.lower_bound,
            "method": self.method,
            "caveats": list(self.caveats),
            "libraries": [
                {
                    "path": lib.path,
                    "reference_device_bytes": lib.reference_device_bytes,
                    "estimated_device_bytes": lib.estimated_device_bytes,
                    "extrapolated": list(lib.extrapolated),
                    "unestimated": list(lib.unestimated),
                }
                for lib in self.libraries
            ],
        }


@dataclass(frozen=True)
class Recommendation:
    """The smallest arch list for a fleet, checked against a toolkit."""

    gpus: tuple[Gpu, ...]
    toolkit: CudaVersion | None
    variant: str  # "plain", "a", "f"
    ptx: bool
    arch_list: ArchList | None  # None when no GPU can be covered
    coverage: tuple[GpuCoverage, ...]
    problems: tuple[str, ...]  # GPUs the toolkit cannot cover, with the CUDA they need
    buildable_with: tuple[CudaVersion, ...]  # toolkits that can compile the list
    size: SizeEstimate | None = None

    @property
    def ok(self) -> bool:
        """An arch list was found and nothing stood in its way."""
        return not self.problems and self.arch_list is not None

    def to_json_dict(self) -> dict[str, Any]:
        """The ``arch --recommend`` JSON document."""
        forms = arch_forms(self.arch_list) if self.arch_list else None
        return {
            **document_header(ARCH_SCHEMA_VERSION, "arch-recommendation"),
            "gpus": [g.to_json_dict() for g in self.gpus],
            "cuda": str(self.toolkit) if self.toolkit else None,
            "variant": self.variant,
            "ptx": self.ptx,
            "arch_list": forms,
            "coverage": [c.to_json_dict() for c in self.coverage],
            "problems": list(self.problems),
            "buildable_with": [str(v) for v in self.buildable_with],
            "size_estimate": self.size.to_json_dict() if self.size else None,
        }


# -- normalized forms ---------------------------------------------------------------------------


def arch_forms(archs: ArchList) -> dict[str, Any]:
    """Every spelling of an arch list; a form that cannot express it says why (as text)."""
    forms: dict[str, Any] = {"canonical": str(archs)}
    try:
        forms["torch_cuda_arch_list"] = archs.to_torch()
        forms["torch_cuda_arch_list_error"] = None
    except Exception as exc:  # ArchListError: a form PyTorch cannot express
        forms["torch_cuda_arch_list"] = None
        forms["torch_cuda_arch_list_error"] = getattr(exc, "message", str(exc))
    forms["cmake_cuda_architectures"] = archs.to_cmake()
    forms["gencode"] = archs.to_gencode()
    return forms


def buildable_with(archs: ArchList, facts: CudaFacts) -> tuple[CudaVersion, ...]:
    """The toolkits in the facts that can compile every target of the list."""
    return tuple(tk.version for tk in facts.toolkits if not archs.problems_with(tk, facts))


def natively_served(
    target: Target, facts: CudaFacts, cuda: CudaVersion | None = None
) -> list[ComputeCapability]:
    """Compute capabilities in the catalog a cubin of ``target`` runs on (under ``cuda``, the
    CUDA the code runs with; unknown: the conservative answer, rule ``sass-integrated``)."""
    return [
        cc for cc in sorted(facts.capabilities) if sass_runs_on(target, cc, cuda=cuda, facts=facts)
    ]


@dataclass(frozen=True)
class ArchForms:
    """The normalized forms of one arch list, optionally checked against a toolkit."""

    archs: ArchList
    cuda: str | None  # the toolkit it was checked against
    buildable: tuple[str, ...]  # the toolkits that can compile it

    @classmethod
    def of(cls, archs: ArchList, cuda: CudaVersion | None, facts: CudaFacts) -> ArchForms:
        """The forms of ``archs``, which the caller has checked against ``cuda`` if given."""
        return cls(
            archs, str(cuda) if cuda else None, tuple(str(v) for v in buildable_with(archs, facts))
        )

    def to_json_dict(self) -> dict[str, Any]:
        """The ``arch`` JSON document: every spelling of the list (``arch_forms``) and, per target,
        the GPUs it runs on natively."""
        facts = load_facts()
        targets = []
        for spec in self.archs:
            cuda = CudaVersion.parse(self.cuda) if self.cuda else None
            served = natively_served(spec.target, facts, cuda) if spec.sass else []
            targets.append(
                {
                    "target": spec.target.dotted,
                    "sass": spec.sass,
                    "ptx": spec.ptx,
                    "runs_natively_on": [str(cc) for cc in served],
                }
            )
        return {
            **document_header(ARCH_SCHEMA_VERSION, "arch-list"),
            **arch_forms(self.archs),
            "cuda": self.cuda,
            "buildable_with": list(self.buildable),
            "targets": targets,
        }


@dataclass(frozen=True)
class GpuCatalogEntry:
    """The GPUs of one compute capability, in catalog order."""

    cc: ComputeCapability
    family: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class GpuCatalog:
    """The GPU names and compute capabilities the commands accept (``archwheel gpus``)."""

    facts: CudaFacts

    @classmethod
    def load(cls) -> GpuCatalog:
        """The catalog of the bundled CUDA facts."""
        return cls(load_facts())

    def by_capability(self) -> tuple[GpuCatalogEntry, ...]:
        """One entry per compute capability, in the order the catalog first names it."""
        names: dict[ComputeCapability, list[str]] = {}
        for g in self.facts.gpus:
            names.setdefault(g.cc, []).append(g.name)
        return tuple(
            GpuCatalogEntry(cc, self.facts.family(cc), tuple(group)) for cc, group in names.items()
        )

    def to_json_dict(self) -> dict[str, Any]:
        """The ``gpus`` JSON document: every known GPU with its compute capability and family."""
        facts = self.facts
        return {
            **document_header(
                ARCH_SCHEMA_VERSION, "gpu-catalog", facts_version=facts.facts_version
            ),
            "gpus": [
                {"name": g.name, "compute_capability": str(g.cc), "family": facts.family(g.cc)}
                for g in facts.gpus
            ],
        }


# -- coverage of a given list -------------------------------------------------------------------


def coverage_of(
    archs: ArchList, gpus: Sequence[Gpu], cuda: CudaVersion | None = None
) -> tuple[GpuCoverage, ...]:
    """For each GPU: the cubin that runs natively, else the PTX it JITs, else nothing."""
    facts = load_facts()
    result: list[GpuCoverage] = []
    for gpu in gpus:
        cubins = [t for t in archs.sass_targets if sass_runs_on(t, gpu.cc, cuda=cuda, facts=facts)]
        if cubins:
            best = max(cubins, key=lambda t: (t.cc, t.variant is not Variant.PLAIN))
            result.append(
                GpuCoverage(
                    gpu,
                    "native",
                    best.sm,
                    Reason(f"{best.sm} runs natively on {gpu.cc}", rule_for(CodeKind.SASS, best)),
                )
            )
            continue
        ptx = [t for t in archs.ptx_targets if ptx_jits_on(t, gpu.cc)]
        if ptx:
            best = max(ptx)
            result.append(
                GpuCoverage(
                    gpu,
                    "jit",
                    best.compute,
                    Reason(
                        f"{best.compute} is JIT-compiled for {gpu.cc} at first launch", "ptx-jit"
                    ),
                )
            )
            continue
        result.append(
            GpuCoverage(
                gpu,
                "none",
                None,
                _nothing_runs(archs, gpu.cc, facts),
            )
        )
    return tuple(result)


def _nothing_runs(archs: ArchList, cc: ComputeCapability, facts: CudaFacts) -> Reason:
    """Why no image of ``archs`` serves ``cc``: an integrated GPU passed over by cubins of its
    major (rule ``sass-integrated``), or no cubin of its major and no PTX at all."""
    if facts.is_integrated(cc) and any(t.cc.major == cc.major for t in archs.sass_targets):
        return Reason(
            f"nothing in {archs} runs on {cc}: {cc} is an integrated GPU, whose cubins are its "
            f"own (sm_{cc.number}); no PTX at or below it",
            "sass-integrated",
        )
    return Reason(
        f"nothing in {archs} runs on {cc}: no cubin of major {cc.major} at or below it, no PTX "
        "at or below it",
        "no-kernel-image",
    )


# -- the recommendation -------------------------------------------------------------------------


def recommend(
    gpus: Sequence[Gpu],
    *,
    cuda: CudaVersion | None = None,
    ptx: bool = False,
    variant: str = "plain",
    facts: CudaFacts,
) -> Recommendation:
    """The smallest arch list that runs natively on every GPU (see the module docstring)."""
    if variant not in ("plain", "a", "f"):
        raise ValueError(f"variant must be plain, a or f, not {variant!r}")
    toolkit = facts.toolkit(cuda) if cuda is not None else None
    plain_pool = _pool(toolkit, facts, Variant.PLAIN)
    renamed = renamed_capabilities(facts)

    specs: list[ArchSpec] = []
    problems: list[str] = []
    remaining = list(dict.fromkeys(gpus))

    if variant == "a":
        a_pool = _pool(toolkit, facts, Variant.ARCH_SPECIFIC)
        for gpu in list(remaining):
            if gpu.cc in a_pool:
                specs.append(ArchSpec(Target(gpu.cc, Variant.ARCH_SPECIFIC)))
                remaining.remove(gpu)
    if variant == "f":
        f_pool = _pool(toolkit, facts, Variant.FAMILY_SPECIFIC)
        covered, f_specs = _per_major_cover(
            remaining, f_pool, Variant.FAMILY_SPECIFIC, renamed, facts=facts, cuda=cuda
        )
        specs.extend(f_specs)
        remaining = [g for g in remaining if g not in covered]

    covered, plain_specs = _per_major_cover(
        remaining, plain_pool, Variant.PLAIN, renamed, facts=facts, cuda=cuda
    )
    specs.extend(plain_specs)
    for gpu in remaining:
        if gpu not in covered:
            problems.append(_uncoverable(gpu, toolkit, facts))

    if ptx and specs:
        highest = max(s.target.cc for s in specs)
        specs.append(ArchSpec(Target(highest), sass=False, ptx=True))
    archs = ArchList.of(specs) if specs else None
    if archs is not None and toolkit is not None:
        problems.extend(archs.problems_with(toolkit, facts))  # empty by construction
    builders = buildable_with(archs, facts) if archs else ()
    if archs is not None and toolkit is None and not builders:
        problems.append(_no_single_toolkit(archs, facts))
    coverage = (
        coverage_of(archs, gpus, cuda)
        if archs
        else tuple(
            GpuCoverage(g, "none", None, Reason("no target can be built for it", "toolkit-targets"))
            for g in gpus
        )
    )
    return Recommendation(
        gpus=tuple(gpus),
        toolkit=toolkit.version if toolkit else None,
        variant=variant,
        ptx=ptx,
        arch_list=archs,
        coverage=coverage,
        problems=tuple(dict.fromkeys(problems)),
        buildable_with=builders,
    )


def _pool(
    toolkit: Toolkit | None, facts: CudaFacts, variant: Variant
) -> frozenset[ComputeCapability]:
    attr = {
        Variant.PLAIN: "targets",
        Variant.ARCH_SPECIFIC: "arch_specific",
        Variant.FAMILY_SPECIFIC: "family_specific",
    }[variant]
    if toolkit is not None:
        pool: frozenset[ComputeCapability] = getattr(toolkit, attr)
        return pool
    return frozenset(cc for tk in facts.toolkits for cc in getattr(tk, attr))


def _per_major_cover(
    gpus: Sequence[Gpu],
    pool: frozenset[ComputeCapability],
    variant: Variant,
    renamed: frozenset[ComputeCapability],
    *,
    facts: CudaFacts,
    cuda: CudaVersion | None,
) -> tuple[set[Gpu], list[ArchSpec]]:
    """One target per major: the highest in the pool not above the lowest coverable GPU.

    An integrated GPU (rule ``sass-integrated``) whose cubins are its own forms a group of its
    own: it gets a target of exactly its compute capability.
    """
    by_major: dict[tuple[int, str], list[Gpu]] = defaultdict(list)
    for gpu in gpus:
        apart = facts.is_integrated(gpu.cc) and not sass_runs_on(
            Target(ComputeCapability(gpu.cc.major, 0)), gpu.cc, cuda=cuda, facts=facts
        )
        by_major[(gpu.cc.major, str(gpu.cc) if apart else "")].append(gpu)
    covered: set[Gpu] = set()
    specs: list[ArchSpec] = []
    for (major, alone), members in sorted(by_major.items()):
        # A compute capability a later toolkit renamed (10.1 -> 11.0, Jetson Thor) is another
        # chip: its cubins serve only GPUs of exactly that capability.
        exact = {g.cc for g in members}
        same_major = [
            c
            for c in pool
            if c.major == major
            and (c not in renamed or c in exact)
            and (str(c) == alone if alone else not facts.is_integrated(c) or c in exact)
        ]
        coverable = [g for g in members if any(c <= g.cc for c in same_major)]
        if not coverable:
            continue
        lowest = min(g.cc for g in coverable)
        target = Target(max(c for c in same_major if c <= lowest), variant)
        specs.append(ArchSpec(target))
        covered.update(coverable)
    return covered, specs


def _uncoverable(gpu: Gpu, toolkit: Toolkit | None, facts: CudaFacts) -> str:
    if toolkit is None:
        return f"{gpu.label}: no known toolkit can compile for it"
    problem = toolkit_problem(Target(gpu.cc), toolkit, facts) or "not a target"
    for later in facts.toolkits:
        for old, new in later.renamed.items():
            if new == gpu.cc and old in toolkit.targets:
                problem += (
                    f" (CUDA {toolkit.version} calls this GPU {old}: build sm_{old.number} "
                    f"for it with CUDA {toolkit.version})"
                )
    return f"{gpu.label}: {problem}"


def _no_single_toolkit(archs: ArchList, facts: CudaFacts) -> str:
    needs: list[str] = []
    for spec in archs:
        able = [tk.version for tk in facts.toolkits if not toolkit_problem(spec.target, tk, facts)]
        if able:
            span = str(min(able)) if min(able) == max(able) else f"{min(able)} to {max(able)}"
            needs.append(f"{spec.target.sm} needs CUDA {span}")
    return "no single toolkit compiles this list: " + "; ".join(needs)


# -- size estimate ------------------------------------------------------------------------------


def estimate_size(archs: ArchList, reference: InputInventory, reference_bytes: int) -> SizeEstimate:
    """Predict the size of a wheel built for ``archs`` from a reference wheel's per-arch bytes.

    Per library with device code: images kept are those the list asks for, plus the 'a'/'f'
    cubins of a major the list has a plain cubin for (PyTorch adds those for a few kernels when
    the base arch is built); images dropped are the rest. A requested cubin the reference lacks
    costs the mean of the library's fully-built plain cubins (extrapolated); requested PTX the
    reference lacks is not estimated (the estimate is then a lower bound). Host code is unchanged.
    """
    sass_majors = {t.cc.major for t in archs.sass_targets if t.variant is Variant.PLAIN}
    removed = added = 0
    libraries: list[LibrarySizeEstimate] = []
    compressed = total = 0
    for lib in reference.device_libraries:
        per_image: dict[tuple[CodeKind, Target], int] = defaultdict(int)
        per_image_count: dict[tuple[CodeKind, Target], int] = defaultdict(int)
        for e in lib.entries:
            per_image[(e.kind, e.target)] += e.stored_bytes
            if e.section not in RELOCATABLE_SECTIONS:
                per_image_count[(e.kind, e.target)] += 1
            total += e.stored_bytes
            if e.compression is not Compression.NONE:
                compressed += e.stored_bytes
        ref_bytes = sum(per_image.values())
        kept = 0
        for (kind, target), size in per_image.items():
            if _kept(kind, target, archs, sass_majors):
                kept += size
            else:
                removed += size
        plain_full = _fully_built_plain(per_image, per_image_count)
        mean_cost = sum(per_image[(CodeKind.SASS, t)] for t in plain_full) // max(
            len(plain_full), 1
        )
        extrapolated: list[str] = []
        unestimated: list[str] = []
        extra = 0
        for target in sorted(archs.sass_targets):
            if (CodeKind.SASS, target) not in per_image:
                if plain_full:
                    extra += mean_cost
                    extrapolated.append(target.sm)
                else:
                    unestimated.append(target.sm)
        for target in sorted(archs.ptx_targets):
            if (CodeKind.PTX, target) not in per_image:
                unestimated.append(target.compute)
        added += extra
        libraries.append(
            LibrarySizeEstimate(
                path=lib.path,
                reference_device_bytes=ref_bytes,
                estimated_device_bytes=kept + extra,
                extrapolated=tuple(extrapolated),
                unestimated=tuple(unestimated),
            )
        )
    caveats = [
        "the wheel's zip compression is assumed to leave device code at its stored size "
        "(true for ZSTD/LZ4-compressed fatbins, which do not deflate further)",
        "host code, Python files and libraries without device code are assumed unchanged",
    ]
    if total and compressed < total:
        share = 100 * (total - compressed) // total
        caveats.append(
            f"{share}% of the reference's device bytes are uncompressed fatbins, which the zip "
            "does shrink: the estimate is high by part of them"
        )
    if any(lib.unestimated for lib in libraries):
        caveats.append(
            "some requested images have no reference cost: the estimate is a lower bound"
        )
    return SizeEstimate(
        reference=reference.source,
        reference_bytes=reference_bytes,
        estimated_bytes=reference_bytes - removed + added,
        removed_bytes=removed,
        added_bytes=added,
        libraries=tuple(libraries),
        method=(
            "reference wheel size - stored bytes of device images the list does not keep + "
            "estimated bytes of requested images the reference lacks (mean of the library's "
            "fully built plain cubins)"
        ),
        caveats=tuple(caveats),
    )


def _kept(kind: CodeKind, target: Target, archs: ArchList, sass_majors: set[int]) -> bool:
    if kind is CodeKind.PTX:
        return target in archs.ptx_targets
    if target in archs.sass_targets:
        return True
    return target.variant is not Variant.PLAIN and target.cc.major in sass_majors


def _fully_built_plain(
    per_image: dict[tuple[CodeKind, Target], int],
    counts: dict[tuple[CodeKind, Target], int],
) -> list[Target]:
    """Plain cubin targets present in as many modules as the most common one."""
    plain = {
        t: counts.get((k, t), 0)
        for (k, t) in per_image
        if k is CodeKind.SASS and t.variant is Variant.PLAIN
    }
    if not plain:
        return []
    most = max(plain.values())
    return sorted(t for t, n in plain.items() if n == most)
