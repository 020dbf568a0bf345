"""Can this binary run on that GPU? Verdicts per module, per library, per wheel and per fleet.

The unit the CUDA runtime chooses an image for is a fatbin *container* (one per translation unit,
"module" here): for a GPU it loads the best cubin that runs natively, else JIT-compiles PTX, else
the kernels of that module fail with "no kernel image is available". A library is as good as its
worst module, a wheel as its worst library. Every verdict carries the rule it applies
(``cuda_facts.toml`` ``[rules]``), cited by id, so each message can say why in one line.

Modules are recovered from the audit's entries: entries of one container are contiguous
(``offset + stored_bytes`` is the next entry's offset), containers are separated by their 16-byte
headers. When that grouping disagrees with the scanner's container count, the library is judged
as one module (a safe over-approximation of coverage that is reported as such).

Everything here is pure: inventories, GPUs, a driver version and facts in; frozen results out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from archwheel import __version__
from archwheel.binary.model import FatbinEntry, InputInventory, LibraryInventory
from archwheel.errors import UsageError
from archwheel.facts.arch import ArchList, CodeKind, Target, Variant, toolkit_problem
from archwheel.facts.catalog import CudaFacts, Toolkit, load_facts
from archwheel.facts.rules import (
    driver_can_jit,
    ptx_jits_on,
    rule_for,
    runtime_supported,
    sass_runs_on,
)
from archwheel.facts.versions import ComputeCapability, CudaVersion, DriverVersion, PtxIsaVersion

CAN_RUN_SCHEMA_VERSION = 1

# Sections whose images are device-link input, not loaded by the CUDA runtime.
RELOCATABLE_SECTIONS = frozenset({"__nv_relfatbin"})

# Exit codes of `archwheel can-run` (docs/exit-codes.md); the generic ones stay in errors.py.
EXIT_ALL_NATIVE = 0
EXIT_SOME_JIT = 10
EXIT_NO_KERNEL_IMAGE = 11
EXIT_DRIVER_TOO_OLD = 12


class Verdict(str, Enum):
    """What happens when a GPU loads the code."""

    NO_DEVICE_CODE = "no-device-code"  # nothing to load: CPU only
    LINK_ONLY = "link-only"  # only relocatable device code: not loaded at run time
    NATIVE = "native"  # a cubin runs as is
    JIT = "jit"  # the driver compiles PTX at first load
    DRIVER_TOO_OLD = "driver-too-old"  # code exists but this driver cannot use it
    NO_KERNEL_IMAGE = "no-kernel-image"  # cudaErrorNoKernelImageAvailable

    @property
    def severity(self) -> int:
        return _SEVERITY[self]

    @property
    def exit_code(self) -> int:
        return _EXIT_CODES[self]


_SEVERITY = {
    Verdict.NO_DEVICE_CODE: 0,
    Verdict.LINK_ONLY: 0,
    Verdict.NATIVE: 0,
    Verdict.JIT: 1,
    Verdict.DRIVER_TOO_OLD: 2,
    Verdict.NO_KERNEL_IMAGE: 3,
}
_EXIT_CODES = {
    Verdict.NO_DEVICE_CODE: EXIT_ALL_NATIVE,
    Verdict.LINK_ONLY: EXIT_ALL_NATIVE,
    Verdict.NATIVE: EXIT_ALL_NATIVE,
    Verdict.JIT: EXIT_SOME_JIT,
    Verdict.DRIVER_TOO_OLD: EXIT_DRIVER_TOO_OLD,
    Verdict.NO_KERNEL_IMAGE: EXIT_NO_KERNEL_IMAGE,
}


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    """The most severe verdict (NATIVE for an empty input)."""
    return max(verdicts, key=lambda v: v.severity, default=Verdict.NATIVE)


# -- GPUs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    """A GPU to judge against: a catalog name or a bare compute capability."""

    cc: ComputeCapability
    name: str = ""  # "RTX 5090"; empty when given as --cc

    @property
    def label(self) -> str:
        return f"{self.name} ({self.cc})" if self.name else f"cc {self.cc}"

    def to_json_dict(self) -> dict[str, Any]:
        return {"name": self.name or None, "compute_capability": str(self.cc)}


def resolve_gpus(
    names: Sequence[str] = (), ccs: Sequence[str] = (), facts: CudaFacts | None = None
) -> tuple[Gpu, ...]:
    """GPUs from ``--gpu`` names and ``--cc`` values (each may be a comma list), in order."""
    facts = facts or load_facts()
    gpus: list[Gpu] = []
    for text in names:
        for item in _split_list(text):
            model = facts.find_gpu(item)
            gpus.append(Gpu(model.cc, model.name))
    for text in ccs:
        for item in _split_list(text):
            cc = ComputeCapability.parse(item)
            if not facts.is_known(cc):
                known = ", ".join(str(c) for c in sorted(facts.capabilities))
                raise UsageError(f"unknown compute capability {item!r}", hint=f"known: {known}")
            gpus.append(Gpu(cc))
    unique = tuple(dict.fromkeys(gpus))
    if not unique:
        raise UsageError(
            "no GPU given", hint='use --gpu "RTX 5090" or --cc 12.0 (comma lists work)'
        )
    return unique


def _split_list(text: str) -> list[str]:
    items = [part.strip() for part in text.split(",")]
    if any(not item for item in items):
        raise UsageError(f"empty item in {text!r}", hint="separate items with single commas")
    return items


# -- modules ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Module:
    """The entries of one fatbin container: the unit the runtime picks an image for."""

    section: str
    entries: tuple[FatbinEntry, ...]

    @property
    def loadable(self) -> bool:
        return self.section not in RELOCATABLE_SECTIONS


def split_modules(library: LibraryInventory) -> tuple[tuple[Module, ...], bool]:
    """The library's containers, and whether the grouping matches the scanner's count.

    When it does not (a scanner that does not report container boundaries consistently), each
    section becomes one module, which can only overstate coverage, never invent a failure.
    """
    ordered = sorted(library.entries, key=lambda e: (e.section, e.offset))
    groups: list[list[FatbinEntry]] = []
    for entry in ordered:
        last = groups[-1][-1] if groups else None
        if (
            last is not None
            and last.section == entry.section
            and last.offset + last.stored_bytes == entry.offset
        ):
            groups[-1].append(entry)
        else:
            groups.append([entry])
    exact = library.containers == len(groups)
    if not exact:
        by_section: dict[str, list[FatbinEntry]] = {}
        for entry in ordered:
            by_section.setdefault(entry.section, []).append(entry)
        groups = list(by_section.values())
    return tuple(Module(g[0].section, tuple(g)) for g in groups), exact


# -- verdicts -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reason:
    """One line of explanation and the rule it applies."""

    text: str
    rule_id: str

    def cite(self, facts: CudaFacts | None = None) -> str:
        return f"{self.text} [rule {self.rule_id}: {(facts or load_facts()).rule(self.rule_id)}]"

    def to_json_dict(self) -> dict[str, str]:
        return {"text": self.text, "rule": self.rule_id}


@dataclass(frozen=True)
class LibraryVerdict:
    """One library on one GPU."""

    library: str
    gpu: Gpu
    verdict: Verdict
    modules: int  # loadable modules judged
    native: tuple[tuple[str, int], ...] = ()  # (best cubin, modules it serves)
    jit: tuple[tuple[str, int], ...] = ()  # (PTX compiled, modules it serves)
    missing_modules: int = 0
    driver_blocked_modules: int = 0
    reasons: tuple[Reason, ...] = ()
    fixes: tuple[str, ...] = ()
    link_only: tuple[str, ...] = ()  # archs present only in relocatable fatbins
    exact_modules: bool = True  # False: judged per section (see split_modules)

    def summary(self) -> str:
        """One line: the verdict and what serves (or would fix) it."""
        return _library_summary(self)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "library": self.library,
            "verdict": self.verdict.value,
            "modules": self.modules,
            "native": [{"arch": a, "modules": n} for a, n in self.native],
            "jit": [{"arch": a, "modules": n} for a, n in self.jit],
            "missing_modules": self.missing_modules,
            "driver_blocked_modules": self.driver_blocked_modules,
            "summary": self.summary(),
            "reasons": [r.to_json_dict() for r in self.reasons],
            "fixes": list(self.fixes),
            "link_only": list(self.link_only),
            "exact_modules": self.exact_modules,
        }


@dataclass(frozen=True)
class RuntimeCheck:
    """The driver against the CUDA runtime a wheel was built for."""

    runtime: CudaVersion | None
    runtime_source: str | None
    driver: DriverVersion | None
    status: str  # full | minor-compat | unsupported | unknown-runtime | no-driver
    reason: Reason

    @property
    def blocks(self) -> bool:
        return self.status == "unsupported"

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "cuda_runtime": str(self.runtime) if self.runtime else None,
            "cuda_runtime_source": self.runtime_source,
            "driver": str(self.driver) if self.driver else None,
            "status": self.status,
            "reason": self.reason.to_json_dict(),
        }


@dataclass(frozen=True)
class InputGpuVerdict:
    """One input (wheel, file, directory) on one GPU: the worst of its libraries."""

    gpu: Gpu
    verdict: Verdict
    libraries: tuple[LibraryVerdict, ...]
    runtime: RuntimeCheck

    def libraries_with(self, verdict: Verdict) -> list[str]:
        return [lib.library for lib in self.libraries if lib.verdict is verdict]

    def headline(self) -> str:
        """``no kernel image in libtorch_cuda_linalg.so; native elsewhere``."""
        return _headline(self)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu.to_json_dict(),
            "verdict": self.verdict.value,
            "headline": self.headline(),
            "runtime": self.runtime.to_json_dict(),
            "libraries": [lib.to_json_dict() for lib in self.libraries],
        }


@dataclass(frozen=True)
class InputVerdicts:
    """Everything judged about one input."""

    source: str
    name: str | None
    version: str | None
    complete: bool
    problems: tuple[str, ...]
    per_gpu: tuple[InputGpuVerdict, ...]

    @property
    def verdict(self) -> Verdict:
        return worst(v.verdict for v in self.per_gpu)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "name": self.name,
            "version": self.version,
            "complete": self.complete,
            "problems": list(self.problems),
            "verdict": self.verdict.value,
            "gpus": [v.to_json_dict() for v in self.per_gpu],
        }


@dataclass(frozen=True)
class CanRunReport:
    """The fleet view: every input on every GPU."""

    inputs: tuple[InputVerdicts, ...]
    gpus: tuple[Gpu, ...]
    driver: DriverVersion | None
    facts_version: str
    rules: dict[str, str] = field(default_factory=dict)  # id -> text, for the rules cited

    @property
    def verdict(self) -> Verdict:
        return worst(i.verdict for i in self.inputs)

    @property
    def complete(self) -> bool:
        return all(i.complete for i in self.inputs)

    @property
    def exit_code(self) -> int:
        """11 missing > 12 driver > 3 incomplete > 10 JIT > 0 (docs/exit-codes.md)."""
        verdict = self.verdict
        if verdict.severity >= Verdict.DRIVER_TOO_OLD.severity:
            return verdict.exit_code
        if not self.complete:
            return 3
        return verdict.exit_code

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "schema_version": CAN_RUN_SCHEMA_VERSION,
            "kind": "can-run",
            "tool": {"name": "archwheel", "version": __version__},
            "facts_version": self.facts_version,
            "driver": str(self.driver) if self.driver else None,
            "gpus": [g.to_json_dict() for g in self.gpus],
            "verdict": self.verdict.value,
            "exit_code": self.exit_code,
            "inputs": [i.to_json_dict() for i in self.inputs],
            "rules": dict(self.rules),
        }


# -- the judgement ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ModuleOutcome:
    verdict: Verdict
    image: str | None  # the cubin or PTX chosen
    isa: PtxIsaVersion | None = None


def judge_library(
    library: LibraryInventory,
    gpu: Gpu,
    *,
    driver: DriverVersion | None = None,
    toolkit_version: CudaVersion | None = None,
    pytorch: bool = False,
    facts: CudaFacts | None = None,
) -> LibraryVerdict:
    """The verdict for one library with device code on one GPU."""
    facts = facts or load_facts()
    modules, exact = split_modules(library)
    loadable = [m for m in modules if m.loadable]
    link_only = sorted(
        {e.arch for m in modules if not m.loadable for e in m.entries}
        - {e.arch for m in loadable for e in m.entries}
    )
    if not loadable:
        return LibraryVerdict(
            library=library.path,
            gpu=gpu,
            verdict=Verdict.LINK_ONLY,
            modules=0,
            reasons=(
                Reason(
                    "only relocatable device code (" + ", ".join(link_only) + "): device-link "
                    "input, not loaded at run time",
                    "relocatable-link-only",
                ),
            ),
            link_only=tuple(link_only),
            exact_modules=exact,
        )

    outcomes = [_judge_module(m, gpu.cc, driver, facts) for m in loadable]
    native = Counter(o.image for o in outcomes if o.verdict is Verdict.NATIVE and o.image)
    jit = Counter(
        o.image
        for o in outcomes
        if o.verdict in (Verdict.JIT, Verdict.DRIVER_TOO_OLD) and o.image is not None
    )
    missing = sum(1 for o in outcomes if o.verdict is Verdict.NO_KERNEL_IMAGE)
    blocked = sum(1 for o in outcomes if o.verdict is Verdict.DRIVER_TOO_OLD)
    verdict = worst(o.verdict for o in outcomes)

    reasons: list[Reason] = []
    fixes: list[str] = []
    if native:
        best_targets = sorted({Target.from_name(a)[1] for a in native})
        for target in best_targets:
            reasons.append(
                Reason(
                    f"{target.sm} runs natively on {gpu.cc}",
                    rule_for(CodeKind.SASS, target),
                )
            )
    if jit:
        isas = sorted({o.isa for o in outcomes if o.isa is not None})
        for arch in sorted(jit):
            reasons.append(Reason(f"{arch} is JIT-compiled for {gpu.cc} by the driver", "ptx-jit"))
        reasons.append(
            Reason(
                "the first launch compiles the PTX (seconds to minutes); later runs use the "
                "driver's JIT cache",
                "ptx-jit-cost",
            )
        )
        reasons.append(_isa_reason(isas, driver, facts))
    if missing:
        reasons.extend(_why_not(loadable, outcomes, gpu.cc))
        reasons.append(
            Reason(
                f"{missing} of {len(loadable)} modules have no kernel image for {gpu.cc}",
                "no-kernel-image",
            )
        )
        fixes.extend(fixes_for(gpu.cc, toolkit_version, facts, pytorch=pytorch))
    if blocked:
        fixes.append(
            "upgrade the driver to one that knows the PTX ISA (see the reason above), or add "
            f"SASS for {gpu.cc} so no JIT is needed"
        )
    relocatable = [e for m in modules if not m.loadable for e in m.entries]
    could_serve = sorted(
        {
            e.arch
            for e in relocatable
            if (e.kind is CodeKind.SASS and sass_runs_on(e.target, gpu.cc))
            or (e.kind is CodeKind.PTX and ptx_jits_on(e.target, gpu.cc))
        }
    )
    if could_serve and verdict is not Verdict.NATIVE:
        reasons.append(
            Reason(
                "relocatable " + ", ".join(could_serve) + f" (__nv_relfatbin) would serve "
                f"{gpu.cc} only if the runtime JIT-links relocatable code (unverified; not "
                "counted)",
                "relocatable-link-only",
            )
        )
    elif link_only:
        reasons.append(
            Reason(
                "ignored relocatable images " + ", ".join(link_only) + " (__nv_relfatbin)",
                "relocatable-link-only",
            )
        )
    return LibraryVerdict(
        library=library.path,
        gpu=gpu,
        verdict=verdict,
        modules=len(loadable),
        native=tuple(sorted(native.items(), key=_arch_order)),
        jit=tuple(sorted(jit.items(), key=_arch_order)),
        missing_modules=missing,
        driver_blocked_modules=blocked,
        reasons=tuple(reasons),
        fixes=tuple(fixes),
        link_only=tuple(link_only),
        exact_modules=exact,
    )


def _arch_order(item: tuple[str, int]) -> tuple[Target, str]:
    kind, target = Target.from_name(item[0])
    return target, kind.value


def _variant_rank(target: Target) -> int:
    # Among cubins of one compute capability, the most specific is taken to be preferred.
    return {Variant.PLAIN: 0, Variant.FAMILY_SPECIFIC: 1, Variant.ARCH_SPECIFIC: 2}[target.variant]


def _judge_module(
    module: Module, gpu: ComputeCapability, driver: DriverVersion | None, facts: CudaFacts
) -> _ModuleOutcome:
    cubins = [e for e in module.entries if e.kind is CodeKind.SASS and sass_runs_on(e.target, gpu)]
    if cubins:
        best = max(cubins, key=lambda e: (e.target.cc, _variant_rank(e.target)))
        return _ModuleOutcome(Verdict.NATIVE, best.arch)
    ptx = [e for e in module.entries if e.kind is CodeKind.PTX and ptx_jits_on(e.target, gpu)]
    if ptx:
        best = max(ptx, key=lambda e: (e.target.cc, _variant_rank(e.target)))
        too_old = (
            driver is not None
            and best.ptx_isa is not None
            and driver_can_jit(best.ptx_isa, driver, facts) is False
        )
        if too_old:
            return _ModuleOutcome(Verdict.DRIVER_TOO_OLD, best.arch, best.ptx_isa)
        return _ModuleOutcome(Verdict.JIT, best.arch, best.ptx_isa)
    return _ModuleOutcome(Verdict.NO_KERNEL_IMAGE, None)


def _isa_reason(
    isas: Sequence[PtxIsaVersion], driver: DriverVersion | None, facts: CudaFacts
) -> Reason:
    if not isas:
        return Reason(
            "the PTX ISA version is unknown; the driver check is skipped", "ptx-isa-driver"
        )
    newest = max(isas)
    needed = facts.ptx_isa_min_cuda(newest)
    if needed is None:
        return Reason(
            f"PTX ISA {newest} is not in the facts; cannot tell which driver JITs it",
            "ptx-isa-driver",
        )
    min_driver = minimum_driver_for(needed, facts)
    need = f"a driver for CUDA >= {needed}" + (f" (>= {min_driver})" if min_driver else "")
    if driver is None:
        return Reason(
            f"PTX ISA {newest} needs {need}; no --driver given, not checked", "ptx-isa-driver"
        )
    have = facts.driver_cuda_version(driver)
    ok = driver_can_jit(newest, driver, facts)
    state = "supports it" if ok else "is too old (error 222: unsupported toolchain)"
    have_text = f"CUDA {have}" if have else "CUDA version unknown"
    return Reason(
        f"PTX ISA {newest} needs {need}; driver {driver} ({have_text}) {state}", "ptx-isa-driver"
    )


def minimum_driver_for(cuda: CudaVersion, facts: CudaFacts) -> DriverVersion | None:
    """The oldest Linux driver with full support for a CUDA version (None if not recorded)."""
    exact = [tk for tk in facts.toolkits if tk.version == cuda]
    if exact:
        return exact[0].min_driver
    newer = [tk for tk in facts.toolkits if tk.version >= cuda]
    return min(newer, key=lambda tk: tk.version).min_driver if newer else None


def _why_not(
    modules: Sequence[Module], outcomes: Sequence[_ModuleOutcome], gpu: ComputeCapability
) -> list[Reason]:
    """Why the images of the failing modules do not serve this GPU, one reason per rule."""
    failing = [
        m for m, o in zip(modules, outcomes, strict=True) if o.verdict is Verdict.NO_KERNEL_IMAGE
    ]
    sass = sorted({e.target for m in failing for e in m.entries if e.kind is CodeKind.SASS})
    ptx = sorted({e.target for m in failing for e in m.entries if e.kind is CodeKind.PTX})
    reasons: list[Reason] = []
    other_major = [t for t in sass if t.cc.major != gpu.major]
    if other_major:
        reasons.append(
            Reason(
                ", ".join(t.sm for t in other_major) + f" cannot run on {gpu}: a cubin never "
                "crosses major versions",
                "sass-same-major",
            )
        )
    higher_minor = [t for t in sass if t.cc.major == gpu.major and t.cc.minor > gpu.minor]
    if higher_minor:
        reasons.append(
            Reason(
                ", ".join(t.sm for t in higher_minor)
                + f" need{'s' if len(higher_minor) == 1 else ''} a {gpu.major}.x GPU of at "
                f"least {higher_minor[0].cc}; {gpu} is older",
                "sass-same-major",
            )
        )
    arch_specific = [
        t
        for t in sass
        if t.variant is Variant.ARCH_SPECIFIC
        and t.cc.major == gpu.major
        and t.cc != gpu
        and t.cc.minor <= gpu.minor
    ]
    if arch_specific:
        reasons.append(
            Reason(
                ", ".join(t.sm for t in arch_specific) + f" run only on exactly their own "
                f"compute capability, not {gpu}",
                "sass-arch-specific",
            )
        )
    if ptx:
        reasons.append(Reason("; ".join(_ptx_why_not(t, gpu) for t in ptx), "ptx-jit"))
    else:
        reasons.append(Reason(f"no PTX that the driver could JIT-compile for {gpu}", "ptx-jit"))
    return reasons


def _ptx_why_not(target: Target, gpu: ComputeCapability) -> str:
    if target.variant is Variant.ARCH_SPECIFIC:
        return f"{target.compute} JIT-compiles only for exactly {target.cc}, not {gpu}"
    if target.variant is Variant.FAMILY_SPECIFIC:
        return (
            f"{target.compute} JIT-compiles only for {target.cc.major}.x GPUs of at least "
            f"{target.cc}, not {gpu}"
        )
    return f"{target.compute} JIT-compiles only for GPUs of at least {target.cc}; {gpu} is lower"


# -- fixes --------------------------------------------------------------------------------------


def best_sass_target(
    cc: ComputeCapability, toolkit: Toolkit | None, facts: CudaFacts | None = None
) -> Target | None:
    """The plain cubin target that runs natively on ``cc``: ``cc`` itself when the toolkit can
    compile it, else the highest lower minor of the same major it can (sm_100 for 10.3 with CUDA
    12.8). Without a toolkit, any toolkit in the facts counts. None when nothing qualifies."""
    facts = facts or load_facts()
    pool = toolkit.targets if toolkit else frozenset(c for tk in facts.toolkits for c in tk.targets)
    renamed = renamed_capabilities(facts)
    candidates = [
        c
        for c in pool
        if c.major == cc.major and c.minor <= cc.minor and (c not in renamed or c == cc)
    ]
    return Target(max(candidates)) if candidates else None


def renamed_capabilities(facts: CudaFacts | None = None) -> frozenset[ComputeCapability]:
    """Compute capabilities a later toolkit renamed (10.1 became 11.0, Jetson Thor): another
    chip, so their cubins are never offered for a neighbouring minor."""
    facts = facts or load_facts()
    return frozenset(old for tk in facts.toolkits for old in tk.renamed)


def official_builds_covering(cc: ComputeCapability, facts: CudaFacts | None = None) -> list[str]:
    """Official PyTorch CUDA builds (``cu128`` ...) whose arch list runs natively on ``cc``."""
    facts = facts or load_facts()
    found: list[str] = []
    for tag, text in facts.official_arch_lists.items():
        archs = ArchList.parse(text, facts)
        if any(sass_runs_on(t, cc) for t in archs.sass_targets):
            found.append(tag)
    return sorted(found, key=CudaVersion.parse)


def pytorch_install_advice(
    cc: ComputeCapability, facts: CudaFacts | None = None, *, exclude: str | None = None
) -> str | None:
    """Which official PyTorch builds carry native code for ``cc``, worded as an install hint:
    ``a cu128-or-later build of torch >= 2.7`` (None when no official build does).

    ``exclude`` drops one build (``cu130``): the one installed, when its binaries have been seen
    to lack what its arch list promises."""
    facts = facts or load_facts()
    every = sorted(facts.official_arch_lists, key=CudaVersion.parse)
    covering = [b for b in official_builds_covering(cc, facts) if b != exclude]
    if not covering:
        return None
    first = covering[0]
    since = facts.torch_first_release.get(first)
    if covering == every[every.index(first) :]:
        return f"a {first}-or-later build of torch" + (f" >= {since}" if since else "")
    return "an official torch build for " + ", ".join(covering)


def fixes_for(
    cc: ComputeCapability,
    toolkit_version: CudaVersion | None,
    facts: CudaFacts | None = None,
    *,
    pytorch: bool = False,
) -> list[str]:
    """What to add to a build so that ``cc`` gets a kernel image, checked against the toolkit."""
    facts = facts or load_facts()
    toolkit: Toolkit | None = None
    if toolkit_version is not None:
        try:
            toolkit = facts.toolkit(toolkit_version)
        except UsageError:
            toolkit = None
    fixes: list[str] = []
    own = Target(cc)
    problem = toolkit_problem(own, toolkit, facts) if toolkit else None
    target = best_sass_target(cc, toolkit, facts)
    if toolkit is None or problem is None:
        fixes.append(
            f"rebuild with SASS for {cc}: TORCH_CUDA_ARCH_LIST='{cc}' "
            f"(nvcc -gencode=arch={own.compute},code={own.sm}; `nox -s build -- --arch {cc}`)"
        )
    elif target is not None:
        fixes.append(
            f"rebuild with SASS {target.sm}, which also runs on {cc}: TORCH_CUDA_ARCH_LIST="
            f"'{target.dotted}' (CUDA {toolkit.version} cannot target {cc}: {problem})"
        )
    else:
        first = facts.first_toolkit_targeting(cc)
        last = facts.last_toolkit_targeting(cc)
        if last is not None and toolkit is not None and last.version < toolkit.version:
            where = f"CUDA {last.version} or older"
        elif first is not None:
            where = f"CUDA {first.version} or newer"
        else:
            where = "a toolkit that targets it"
        fixes.append(f"{problem}; rebuild with {where} and TORCH_CUDA_ARCH_LIST='{cc}'")
    fixes.append(f"or embed PTX for {cc} or lower ('{cc}+PTX' also covers later GPUs by JIT)")
    if pytorch:
        own_build = toolkit_version.tag if toolkit_version else None
        advice = pytorch_install_advice(cc, facts, exclude=own_build)
        if advice:
            fixes.append(f"or install {advice} (official builds with native code for {cc})")
        if own_build in official_builds_covering(cc, facts):
            fixes.append(
                f"note: the official {own_build} arch list includes {cc}, yet this library "
                "lacks it: "
                f"check any wheel with `archwheel can-run WHEEL --cc {cc}` before installing it"
            )
    return fixes


# -- wheels and fleets --------------------------------------------------------------------------


def check_runtime(
    runtime: CudaVersion | None,
    runtime_source: str | None,
    driver: DriverVersion | None,
    facts: CudaFacts | None = None,
) -> RuntimeCheck:
    """The driver against the CUDA runtime an input targets (rule runtime-driver)."""
    facts = facts or load_facts()
    if runtime is None:
        return RuntimeCheck(
            None,
            None,
            driver,
            "unknown-runtime",
            Reason(
                "the CUDA runtime it targets is unknown (no +cuXYZ, pin or libcudart)",
                "runtime-driver",
            ),
        )
    minimum = minimum_driver_for(runtime, facts)
    need = (
        f"CUDA {runtime} runtime needs a driver >= {minimum}"
        if minimum
        else (f"CUDA {runtime} runtime needs a driver for CUDA >= {runtime}")
    )
    if driver is None:
        return RuntimeCheck(
            runtime,
            runtime_source,
            None,
            "no-driver",
            Reason(f"{need}; no --driver given, not checked", "runtime-driver"),
        )
    status = runtime_supported(runtime, driver, facts)
    have = facts.driver_cuda_version(driver)
    have_text = f"CUDA {have}" if have else "CUDA version unknown"
    text = {
        "full": f"{need}; driver {driver} ({have_text}) supports it fully",
        "minor-compat": f"{need}; driver {driver} ({have_text}) runs it through minor-version "
        "compatibility only (limited features, no PTX newer than the driver)",
        "unsupported": f"{need}; driver {driver} ({have_text}) is too old: the CUDA runtime "
        "fails to initialise",
    }[status]
    return RuntimeCheck(runtime, runtime_source, driver, status, Reason(text, "runtime-driver"))


def judge_input(
    inventory: InputInventory,
    gpus: Sequence[Gpu],
    *,
    driver: DriverVersion | None = None,
    runtime: CudaVersion | None = None,
    runtime_source: str | None = None,
    name: str | None = None,
    version: str | None = None,
    facts: CudaFacts | None = None,
) -> InputVerdicts:
    """Every library of one input on every GPU, plus the driver/runtime check."""
    facts = facts or load_facts()
    runtime_check = check_runtime(runtime, runtime_source, driver, facts)
    per_gpu: list[InputGpuVerdict] = []
    for gpu in gpus:
        libraries = tuple(
            judge_library(
                lib,
                gpu,
                driver=driver,
                toolkit_version=runtime,
                pytorch=name == "torch",
                facts=facts,
            )
            for lib in inventory.device_libraries
        )
        if not libraries:
            verdict = Verdict.NO_DEVICE_CODE
        else:
            verdict = worst(lib.verdict for lib in libraries)
        if runtime_check.blocks:
            verdict = worst([verdict, Verdict.DRIVER_TOO_OLD])
        per_gpu.append(InputGpuVerdict(gpu, verdict, libraries, runtime_check))
    return InputVerdicts(
        source=inventory.source,
        name=name,
        version=version,
        complete=inventory.complete,
        problems=tuple(p.one_line() for p in inventory.problems),
        per_gpu=tuple(per_gpu),
    )


def build_report(
    inputs: Sequence[InputVerdicts],
    gpus: Sequence[Gpu],
    driver: DriverVersion | None,
    facts: CudaFacts | None = None,
) -> CanRunReport:
    facts = facts or load_facts()
    cited = sorted(
        {
            reason.rule_id
            for item in inputs
            for per_gpu in item.per_gpu
            for reason in (
                per_gpu.runtime.reason,
                *(r for lib in per_gpu.libraries for r in lib.reasons),
            )
        }
    )
    return CanRunReport(
        inputs=tuple(inputs),
        gpus=tuple(gpus),
        driver=driver,
        facts_version=facts.facts_version,
        rules={rule_id: facts.rule(rule_id) for rule_id in cited},
    )


# -- wording ------------------------------------------------------------------------------------


def _counted(items: Sequence[tuple[str, int]], total: int) -> str:
    if len(items) == 1 and items[0][1] == total:
        return items[0][0]
    return ", ".join(f"{arch} ({n} of {total} modules)" for arch, n in items)


def _library_summary(v: LibraryVerdict) -> str:
    if v.verdict is Verdict.LINK_ONLY:
        return "only relocatable device code: nothing loaded at run time"
    parts: list[str] = []
    if v.native:
        parts.append("native: " + _counted(v.native, v.modules))
    if v.jit:
        label = "JIT (driver too old)" if v.driver_blocked_modules else "JIT"
        parts.append(f"{label}: " + _counted(v.jit, v.modules) + ", compiled at first launch")
    if v.missing_modules:
        parts.append(
            f"no kernel image for {v.gpu.cc} in {v.missing_modules} of {v.modules} modules"
        )
    return "; ".join(parts)


def _headline(v: InputGpuVerdict) -> str:
    if v.verdict is Verdict.NO_DEVICE_CODE:
        return "no CUDA device code: nothing for the GPU to load (CPU only)"
    parts: list[str] = []
    for verdict, label in (
        (Verdict.NO_KERNEL_IMAGE, "no kernel image in"),
        (Verdict.DRIVER_TOO_OLD, "driver too old for the PTX of"),
        (Verdict.JIT, "JIT (first launch compiles) in"),
    ):
        names = [_short(n) for n in v.libraries_with(verdict)]
        if names:
            parts.append(f"{label} {', '.join(names)}")
    if v.runtime.blocks:
        parts.append(f"driver {v.runtime.driver} too old for the CUDA {v.runtime.runtime} runtime")
    native = v.libraries_with(Verdict.NATIVE)
    if parts:
        if native:
            parts.append(f"native in {', '.join(_short(n) for n in native)}")
        return "; ".join(parts)
    return f"native in all {len(native)} libraries with device code"


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]
