"""The CUDA binary-compatibility rules as pure functions (cuda-facts.md section 2).

Each function answers one question about one image and one GPU and is cited by rule id
(``sass-same-major``, ``ptx-jit`` ...) from ``cuda_facts.toml``. Verdicts over whole wheels
live in ``archwheel.verdicts``; this module knows nothing about wheels.
"""

from __future__ import annotations

from archwheel.facts.arch import CodeKind, Target, Variant
from archwheel.facts.catalog import CudaFacts, load_facts
from archwheel.facts.versions import ComputeCapability, CudaVersion, DriverVersion, PtxIsaVersion


def sass_runs_on(
    target: Target,
    gpu: ComputeCapability,
    *,
    cuda: CudaVersion | None = None,
    facts: CudaFacts | None = None,
) -> bool:
    """Can a cubin built for ``target`` execute natively on a GPU of compute capability ``gpu``?

    Plain sm_XY: same major, GPU minor >= Y. sm_XYa: exactly X.Y. sm_XYf: same major, GPU
    minor >= Y. Never across majors. Integrated GPUs (rule ``sass-integrated``): their cubins
    run only on that device (10.1 and 11.0 are one device), and discrete GPUs' cubins run on
    them only where the facts say so from a CUDA version on; ``cuda`` is the CUDA the code runs
    under (the wheel's runtime). Unknown (None) is judged as before that version: the
    conservative answer.
    """
    facts = facts or load_facts()
    cc = target.cc
    code_integrated = facts.is_integrated(cc)
    gpu_integrated = facts.is_integrated(gpu)
    if code_integrated or gpu_integrated:
        if code_integrated:
            return facts.same_device(cc, gpu)
        info = facts.integrated[gpu]
        since = info.desktop_cubins_from
        if since is None or cuda is None or cuda < since:
            return False
        # From that version the discrete cubin follows the ordinary rule below.
    if cc.major != gpu.major:
        return False
    if target.variant is Variant.ARCH_SPECIFIC:
        return gpu == cc
    return gpu.minor >= cc.minor


def ptx_jits_on(target: Target, gpu: ComputeCapability) -> bool:
    """Can PTX for ``target`` be JIT-compiled for ``gpu`` (ignoring the driver's PTX ISA)?

    Plain compute_XY: any GPU >= X.Y, across majors. 'a' PTX: exactly X.Y. 'f' PTX: the same
    family (major) with minor >= Y.
    """
    cc = target.cc
    if target.variant is Variant.ARCH_SPECIFIC:
        return gpu == cc
    if target.variant is Variant.FAMILY_SPECIFIC:
        return gpu.major == cc.major and gpu.minor >= cc.minor
    return gpu >= cc


def image_serves(
    kind: CodeKind, target: Target, gpu: ComputeCapability, *, cuda: CudaVersion | None = None
) -> bool:
    """Whether an image of this kind can serve kernels on ``gpu`` at all (LTO-IR never can:
    it is input to a device link, not loadable code)."""
    if kind is CodeKind.SASS:
        return sass_runs_on(target, gpu, cuda=cuda)
    if kind is CodeKind.PTX:
        return ptx_jits_on(target, gpu)
    return False


def rule_for(kind: CodeKind, target: Target) -> str:
    """The rule id that governs an image of this kind and variant."""
    if kind is CodeKind.PTX:
        return "ptx-jit"
    if load_facts().is_integrated(target.cc):
        return "sass-integrated"
    return {
        Variant.PLAIN: "sass-same-major",
        Variant.ARCH_SPECIFIC: "sass-arch-specific",
        Variant.FAMILY_SPECIFIC: "sass-family-specific",
    }[target.variant]


def driver_cuda_version(
    driver: DriverVersion, facts: CudaFacts | None = None
) -> CudaVersion | None:
    """The newest CUDA version the driver supports (nvidia-smi's "CUDA Version")."""
    return (facts or load_facts()).driver_cuda_version(driver)


def driver_can_jit(
    isa: PtxIsaVersion, driver: DriverVersion, facts: CudaFacts | None = None
) -> bool | None:
    """Whether the driver understands PTX of this ISA version; None when the ISA is unknown."""
    facts = facts or load_facts()
    needed = facts.ptx_isa_min_cuda(isa)
    have = facts.driver_cuda_version(driver)
    if needed is None or have is None:
        return None
    return have >= needed


def runtime_supported(
    runtime: CudaVersion, driver: DriverVersion, facts: CudaFacts | None = None
) -> str:
    """How a driver serves a CUDA runtime: ``full``, ``minor-compat`` or ``unsupported``.

    ``full``: the driver's CUDA version is >= the runtime's. ``minor-compat``: same major and
    the driver is at least that major's compatibility branch (limited features, no newer PTX).
    """
    facts = facts or load_facts()
    have = facts.driver_cuda_version(driver)
    if have is not None and have >= runtime:
        return "full"
    same_major = [tk for tk in facts.toolkits if tk.version.major == runtime.major]
    if same_major:
        compat_floor = min(tk.compat_driver for tk in same_major)
        if driver >= compat_floor:
            return "minor-compat"
    return "unsupported"
