"""The judgement: which image the CUDA runtime loads for each module on a GPU, if any.

The unit the runtime chooses an image for is a fatbin *container* (one per translation unit,
"module" here): for a GPU it loads the best cubin that runs natively, else JIT-compiles PTX, else
the kernels of that module fail with "no kernel image is available". Modules are the scanner's
containers (``LibraryInventory.containers``). Where they do not account for every image (a
standalone cubin, a container whose entries could not be read), the library is judged one module
per section, a safe over-approximation of coverage that is reported as such.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from archwheel.binary.model import InputInventory, LibraryInventory
from archwheel.facts.arch import CodeKind, Target, Variant
from archwheel.facts.catalog import CudaFacts
from archwheel.facts.rules import (
    driver_can_jit,
    ptx_jits_on,
    runtime_supported,
    sass_runs_on,
)
from archwheel.facts.versions import ComputeCapability, CudaVersion, DriverVersion, PtxIsaVersion
from archwheel.verdicts.compat.explain import (
    library_fixes,
    library_reasons,
    link_only_reason,
    runtime_reason,
)
from archwheel.verdicts.compat.gpus import Gpu

# Modules are split below the judge (variant_claims counts them too); named here as before.
from archwheel.verdicts.compat.modules import RELOCATABLE_SECTIONS as RELOCATABLE_SECTIONS  # noqa: PLC0414
from archwheel.verdicts.compat.modules import Module as Module  # noqa: PLC0414
from archwheel.verdicts.compat.modules import split_modules as split_modules  # noqa: PLC0414
from archwheel.verdicts.compat.report import (
    InputGpuVerdict,
    InputVerdicts,
    LibraryVerdict,
    Reason,
    RuntimeCheck,
    worst,
)
from archwheel.verdicts.vocabulary import Verdict

# -- the judgement ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ModuleOutcome:
    verdict: Verdict
    image: Target | None  # the cubin (NATIVE) or the PTX (JIT, DRIVER_TOO_OLD) chosen
    isa: PtxIsaVersion | None = None


def judge_library(
    library: LibraryInventory,
    gpu: Gpu,
    *,
    driver: DriverVersion | None = None,
    toolkit_version: CudaVersion | None = None,
    pytorch: bool = False,
    facts: CudaFacts,
) -> LibraryVerdict:
    """The verdict for one library with device code on one GPU."""
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
            reasons=(link_only_reason(link_only),),
            link_only=tuple(link_only),
            exact_modules=exact,
        )

    outcomes = [_judge_module(m, gpu.cc, driver, facts, toolkit_version) for m in loadable]
    # The raw cubins beside fatbin modules: the library loads them itself, perhaps only on the
    # GPUs they serve (CUPTI's libcheckpoint.so keeps sm_35..sm_62 raw cubins beside fatbins
    # for every current GPU). Where none serves this GPU they are not counted as a module.
    ignored_raw: tuple[str, ...] = ()
    if len(loadable) > 1:
        kept = [
            (m, o)
            for m, o in zip(loadable, outcomes, strict=True)
            if not (m.raw and o.verdict is Verdict.NO_KERNEL_IMAGE)
        ]
        if len(kept) < len(loadable):
            ignored_raw = tuple(sorted({e.arch for m in loadable if m.raw for e in m.entries}))
            loadable = [m for m, _ in kept]
            outcomes = [o for _, o in kept]
    native = Counter(o.image for o in outcomes if o.verdict is Verdict.NATIVE and o.image)
    jit = Counter(
        o.image
        for o in outcomes
        if o.verdict in (Verdict.JIT, Verdict.DRIVER_TOO_OLD) and o.image is not None
    )
    missing = sum(1 for o in outcomes if o.verdict is Verdict.NO_KERNEL_IMAGE)
    blocked = sum(1 for o in outcomes if o.verdict is Verdict.DRIVER_TOO_OLD)
    verdict = worst(o.verdict for o in outcomes)

    failing = [
        e
        for m, o in zip(loadable, outcomes, strict=True)
        if o.verdict is Verdict.NO_KERNEL_IMAGE
        for e in m.entries
    ]
    could_serve = sorted(
        {
            e.arch
            for m in modules
            if not m.loadable
            for e in m.entries
            if (
                e.kind is CodeKind.SASS
                and sass_runs_on(e.target, gpu.cc, cuda=toolkit_version, facts=facts)
            )
            or (e.kind is CodeKind.PTX and ptx_jits_on(e.target, gpu.cc))
        }
    )
    reasons = library_reasons(
        gpu.cc,
        native=sorted(native),
        jit=sorted(jit, key=lambda t: t.compute),
        isas=sorted({o.isa for o in outcomes if o.isa is not None}),
        failing=failing,
        missing=missing,
        modules=len(loadable),
        relocatable=could_serve if verdict is not Verdict.NATIVE else [],
        link_only=link_only,
        driver=driver,
        facts=facts,
        cuda=toolkit_version,
    )
    if ignored_raw:
        reasons.append(
            Reason(
                f"raw cubins {', '.join(ignored_raw)} (outside any fatbin) do not serve {gpu.cc}; "
                "the library loads them itself, so they are not counted as a missing module",
                "raw-cubin",
            )
        )
    fixes = library_fixes(
        gpu.cc,
        missing=missing > 0,
        blocked=blocked > 0,
        toolkit_version=toolkit_version,
        pytorch=pytorch,
        facts=facts,
    )
    return LibraryVerdict(
        library=library.path,
        gpu=gpu,
        verdict=verdict,
        modules=len(loadable),
        native=tuple(sorted(native.items())),
        jit=tuple(sorted(jit.items())),
        missing_modules=missing,
        driver_blocked_modules=blocked,
        reasons=tuple(reasons),
        fixes=tuple(fixes),
        link_only=tuple(link_only),
        exact_modules=exact,
    )


def _variant_rank(target: Target) -> int:
    # Among cubins of one compute capability, the most specific is taken to be preferred.
    return {Variant.PLAIN: 0, Variant.FAMILY_SPECIFIC: 1, Variant.ARCH_SPECIFIC: 2}[target.variant]


def _judge_module(
    module: Module,
    gpu: ComputeCapability,
    driver: DriverVersion | None,
    facts: CudaFacts,
    cuda: CudaVersion | None = None,
) -> _ModuleOutcome:
    cubins = [
        e
        for e in module.entries
        if e.kind is CodeKind.SASS and sass_runs_on(e.target, gpu, cuda=cuda, facts=facts)
    ]
    if cubins:
        best = max(cubins, key=lambda e: (e.target.cc, _variant_rank(e.target)))
        return _ModuleOutcome(Verdict.NATIVE, best.target)
    ptx = [e for e in module.entries if e.kind is CodeKind.PTX and ptx_jits_on(e.target, gpu)]
    if ptx:
        best = max(ptx, key=lambda e: (e.target.cc, _variant_rank(e.target)))
        too_old = (
            driver is not None
            and best.ptx_isa is not None
            and driver_can_jit(best.ptx_isa, driver, facts) is False
        )
        if too_old:
            return _ModuleOutcome(Verdict.DRIVER_TOO_OLD, best.target, best.ptx_isa)
        return _ModuleOutcome(Verdict.JIT, best.target, best.ptx_isa)
    return _ModuleOutcome(Verdict.NO_KERNEL_IMAGE, None)


# -- wheels and fleets --------------------------------------------------------------------------


def check_runtime(
    runtime: CudaVersion | None,
    runtime_source: str | None,
    driver: DriverVersion | None,
    facts: CudaFacts,
) -> RuntimeCheck:
    """The driver against the CUDA runtime an input targets (rule runtime-driver)."""
    if runtime is None:
        status, runtime_source = "unknown-runtime", None
    elif driver is None:
        status = "no-driver"
    else:
        status = runtime_supported(runtime, driver, facts)
    reason = runtime_reason(status, runtime, driver, facts)
    return RuntimeCheck(runtime, runtime_source, driver, status, reason)


def judge_input(
    inventory: InputInventory,
    gpus: Sequence[Gpu],
    *,
    driver: DriverVersion | None = None,
    runtime: CudaVersion | None = None,
    runtime_source: str | None = None,
    name: str | None = None,
    version: str | None = None,
    facts: CudaFacts,
) -> InputVerdicts:
    """Every library of one input on every GPU, plus the driver/runtime check."""
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
