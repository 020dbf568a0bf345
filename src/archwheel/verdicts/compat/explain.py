"""Why a library does or does not run, in words, and what would make it run.

Reasons name the rule they apply (``cuda_facts.toml`` ``[rules]``) so each can be cited in one
line; fixes are checked against the toolkit of the wheel's CUDA runtime, and for torch name the
official builds whose arch list covers the GPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from archwheel.binary.model import FatbinEntry
from archwheel.errors import UsageError
from archwheel.facts.arch import ArchList, CodeKind, Target, Variant, toolkit_problem
from archwheel.facts.catalog import CudaFacts, Toolkit, load_facts
from archwheel.facts.rules import driver_can_jit, rule_for, sass_runs_on
from archwheel.facts.versions import ComputeCapability, CudaVersion, DriverVersion, PtxIsaVersion
from archwheel.verdicts.compat.report import Reason

# -- reasons ------------------------------------------------------------------------------------


def link_only_reason(link_only: Sequence[str]) -> Reason:
    """Why a library with only relocatable device code has nothing to load."""
    return Reason(
        "only relocatable device code (" + ", ".join(link_only) + "): device-link "
        "input, not loaded at run time",
        "relocatable-link-only",
    )


def library_reasons(
    gpu: ComputeCapability,
    *,
    native: Sequence[Target],
    jit: Sequence[Target],
    isas: Sequence[PtxIsaVersion],
    failing: Sequence[FatbinEntry],
    missing: int,
    modules: int,
    relocatable: Sequence[str],
    link_only: Sequence[str],
    driver: DriverVersion | None,
    facts: CudaFacts,
    cuda: CudaVersion | None = None,
) -> list[Reason]:
    """Why a library's modules run (or do not) on ``gpu``, in the order the verdict reads them.

    ``native``/``jit``: the cubins and PTX chosen; ``isas``: the PTX ISA versions to JIT;
    ``failing``: the entries of the ``missing`` modules (of ``modules``) with no image;
    ``relocatable``: relocatable images that would serve ``gpu`` where nothing loadable serves
    it natively; ``link_only``: archs present only in relocatable code.
    """
    reasons = [Reason(f"{t.sm} runs natively on {gpu}", rule_for(CodeKind.SASS, t)) for t in native]
    if jit:
        reasons.extend(
            Reason(f"{t.compute} is JIT-compiled for {gpu} by the driver", "ptx-jit") for t in jit
        )
        reasons.append(
            Reason(
                "the first launch compiles the PTX (seconds to minutes); later runs use the "
                "driver's JIT cache",
                "ptx-jit-cost",
            )
        )
        reasons.append(isa_reason(isas, driver, facts))
    if missing:
        reasons.extend(why_not(failing, gpu, cuda))
        reasons.append(
            Reason(
                f"{missing} of {modules} modules have no kernel image for {gpu}", "no-kernel-image"
            )
        )
    if relocatable:
        reasons.append(
            Reason(
                "relocatable " + ", ".join(relocatable) + f" (__nv_relfatbin) would serve "
                f"{gpu} only if the runtime JIT-links relocatable code (unverified; not "
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
    return reasons


def isa_reason(
    isas: Sequence[PtxIsaVersion], driver: DriverVersion | None, facts: CudaFacts
) -> Reason:
    """Whether ``driver`` can JIT the newest of the PTX ISA versions about to be compiled."""
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


def runtime_reason(
    status: str, runtime: CudaVersion | None, driver: DriverVersion | None, facts: CudaFacts
) -> Reason:
    """The driver check of the CUDA runtime an input targets, in words (``RuntimeCheck.status``:
    full, minor-compat, unsupported, unknown-runtime, no-driver)."""
    if runtime is None:
        return Reason(
            "the CUDA runtime it targets is unknown (no +cuXYZ, pin or libcudart)",
            "runtime-driver",
        )
    minimum = minimum_driver_for(runtime, facts)
    need = (
        f"CUDA {runtime} runtime needs a driver >= {minimum}"
        if minimum
        else (f"CUDA {runtime} runtime needs a driver for CUDA >= {runtime}")
    )
    if driver is None:
        return Reason(f"{need}; no --driver given, not checked", "runtime-driver")
    have = facts.driver_cuda_version(driver)
    have_text = f"CUDA {have}" if have else "CUDA version unknown"
    text = {
        "full": f"{need}; driver {driver} ({have_text}) supports it fully",
        "minor-compat": f"{need}; driver {driver} ({have_text}) runs it through minor-version "
        "compatibility only (limited features, no PTX newer than the driver)",
        "unsupported": f"{need}; driver {driver} ({have_text}) is too old: the CUDA runtime "
        "fails to initialise",
    }[status]
    return Reason(text, "runtime-driver")


def minimum_driver_for(cuda: CudaVersion, facts: CudaFacts) -> DriverVersion | None:
    """The oldest Linux driver with full support for a CUDA version (None if not recorded)."""
    exact = [tk for tk in facts.toolkits if tk.version == cuda]
    if exact:
        return exact[0].min_driver
    newer = [tk for tk in facts.toolkits if tk.version >= cuda]
    return min(newer, key=lambda tk: tk.version).min_driver if newer else None


def why_not(
    failing: Iterable[FatbinEntry], gpu: ComputeCapability, cuda: CudaVersion | None = None
) -> list[Reason]:
    """Why the images of the failing modules (their entries) do not serve this GPU, one reason
    per rule (``cuda``: the runtime, which decides the integrated-GPU rule)."""
    entries = list(failing)
    sass = sorted({e.target for e in entries if e.kind is CodeKind.SASS})
    ptx = sorted({e.target for e in entries if e.kind is CodeKind.PTX})
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
    facts = load_facts()
    apart = [
        t
        for t in sass
        if t.cc.major == gpu.major
        and t.cc.minor <= gpu.minor
        and (facts.is_integrated(t.cc) or facts.is_integrated(gpu))
        and not sass_runs_on(t, gpu, cuda=cuda, facts=facts)
    ]
    if apart:
        if facts.is_integrated(gpu):
            since = facts.integrated[gpu].desktop_cubins_from
            tail = f" before CUDA {since} (this runtime: {cuda or 'unknown'})" if since else ""
            text = (
                ", ".join(t.sm for t in apart) + f" cannot run on {gpu}: an integrated (Jetson) "
                f"GPU runs only cubins built for it (sm_{gpu.number}){tail}"
            )
        else:
            text = (
                ", ".join(t.sm for t in apart) + f" are built for an integrated (Jetson) GPU "
                f"and run only there, not on {gpu}"
            )
        reasons.append(Reason(text, "sass-integrated"))
    arch_specific = [
        t
        for t in sass
        if t.variant is Variant.ARCH_SPECIFIC
        and t.cc.major == gpu.major
        and t.cc != gpu
        and t.cc.minor <= gpu.minor
        and t not in apart
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
    cc: ComputeCapability, toolkit: Toolkit | None, facts: CudaFacts
) -> Target | None:
    """The plain cubin target that runs natively on ``cc``: ``cc`` itself when the toolkit can
    compile it, else the highest lower minor of the same major it can (sm_100 for 10.3 with CUDA
    12.8). Without a toolkit, any toolkit in the facts counts. None when nothing qualifies."""
    pool = toolkit.targets if toolkit else frozenset(c for tk in facts.toolkits for c in tk.targets)
    renamed = renamed_capabilities(facts)
    cuda = toolkit.version if toolkit else None
    candidates = [
        c
        for c in pool
        if c.major == cc.major
        and c.minor <= cc.minor
        and (c not in renamed or c == cc)
        and sass_runs_on(Target(c), cc, cuda=cuda, facts=facts)
    ]
    return Target(max(candidates)) if candidates else None


def renamed_capabilities(facts: CudaFacts) -> frozenset[ComputeCapability]:
    """Compute capabilities a later toolkit renamed (10.1 became 11.0, Jetson Thor): another
    chip, so their cubins are never offered for a neighbouring minor."""
    return frozenset(old for tk in facts.toolkits for old in tk.renamed)


def official_builds_covering(cc: ComputeCapability, facts: CudaFacts) -> list[str]:
    """Official PyTorch CUDA builds (``cu128`` ...) whose arch list runs natively on ``cc``."""
    found: list[str] = []
    for tag, text in facts.official_arch_lists.items():
        archs = ArchList.parse(text, facts)
        cuda = CudaVersion.parse(tag)
        if any(sass_runs_on(t, cc, cuda=cuda, facts=facts) for t in archs.sass_targets):
            found.append(tag)
    return sorted(found, key=CudaVersion.parse)


def pytorch_install_advice(
    cc: ComputeCapability, facts: CudaFacts, *, exclude: str | None = None
) -> str | None:
    """Which official PyTorch builds carry native code for ``cc``, worded as an install hint:
    ``a cu128-or-later build of torch >= 2.7`` (None when no official build does).

    ``exclude`` drops one build (``cu130``): the one installed, when its binaries have been seen
    to lack what its arch list promises."""
    every = sorted(facts.official_arch_lists, key=CudaVersion.parse)
    covering = [b for b in official_builds_covering(cc, facts) if b != exclude]
    if not covering:
        return None
    first = covering[0]
    since = facts.torch_first_release.get(first)
    if covering == every[every.index(first) :]:
        return f"a {first}-or-later build of torch" + (f" >= {since}" if since else "")
    return "an official torch build for " + ", ".join(covering)


def library_fixes(
    gpu: ComputeCapability,
    *,
    missing: bool,
    blocked: bool,
    toolkit_version: CudaVersion | None,
    pytorch: bool,
    facts: CudaFacts,
) -> list[str]:
    """What would make a library run on ``gpu``: for modules without an image (``missing``),
    and for PTX the driver is too old to JIT (``blocked``)."""
    fixes = fixes_for(gpu, toolkit_version, facts, pytorch=pytorch) if missing else []
    if blocked:
        fixes.append(
            "upgrade the driver to one that knows the PTX ISA (see the reason above), or add "
            f"SASS for {gpu} so no JIT is needed"
        )
    return fixes


def fixes_for(
    cc: ComputeCapability,
    toolkit_version: CudaVersion | None,
    facts: CudaFacts,
    *,
    pytorch: bool = False,
) -> list[str]:
    """What to add to a build so that ``cc`` gets a kernel image, checked against the toolkit."""
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
