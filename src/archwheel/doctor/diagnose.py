"""``archwheel doctor``: what is on this host, and will the installed torch run on its GPUs?

Probes the GPUs (NVML, then nvidia-smi), the Python environment (``--python``) and its torch,
audits the installed torch libraries, and gives a verdict per GPU with a concrete fix. Every probe
failure is reported as a finding, never raised: the doctor must work on a machine without a GPU,
without a driver, without torch, or with a torch that fails to import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from archwheel.binary.model import InputInventory
from archwheel.binary.scan.inputs import scan_installed
from archwheel.effects.host import (
    GpuInfo,
    GpuProbeResult,
    NvidiaSmiProbe,
    NvmlProbe,
    PythonEnvironment,
    PythonProbe,
    probe_gpus,
)
from archwheel.errors import ArchwheelError
from archwheel.exit_codes import EXIT_INCOMPLETE, ExitCode
from archwheel.facts.arch import ArchList, CodeKind, Target
from archwheel.facts.catalog import CudaFacts, load_facts
from archwheel.facts.versions import ComputeCapability, CudaVersion, parse_or_none
from archwheel.verdicts.compat.explain import (
    minimum_driver_for,
    official_builds_covering,
    pytorch_install_advice,
)
from archwheel.verdicts.compat.gpus import Gpu
from archwheel.verdicts.compat.judge import check_runtime, judge_input
from archwheel.verdicts.compat.report import LibraryVerdict, Reason, RuntimeCheck, worst
from archwheel.verdicts.document import document_header
from archwheel.verdicts.recommend import coverage_of
from archwheel.verdicts.variant_claims import ClaimsCheck, check_variant_file
from archwheel.verdicts.vocabulary import Verdict

DOCTOR_SCHEMA_VERSION = 1

Scanner = Callable[[str, "str | None"], InputInventory]


@dataclass(frozen=True)
class GpuDiagnosis:
    """The installed torch on one GPU of this host."""

    gpu: GpuInfo
    verdict: Verdict | None  # None: nothing to judge (no torch, unknown compute capability)
    basis: str  # what the verdict rests on
    headline: str
    libraries: tuple[LibraryVerdict, ...] = ()
    reasons: tuple[Reason, ...] = ()
    fixes: tuple[str, ...] = ()

    def to_json_dict(self) -> dict[str, Any]:
        """This GPU's part of the doctor document (``gpus``)."""
        return {
            "gpu": self.gpu.to_json_dict(),
            "verdict": self.verdict.value if self.verdict else None,
            "basis": self.basis,
            "headline": self.headline,
            "reasons": [r.to_json_dict() for r in self.reasons],
            "fixes": list(self.fixes),
            "libraries": [lib.to_json_dict() for lib in self.libraries],
        }


@dataclass(frozen=True)
class DoctorReport:
    """Everything doctor found on this host: the GPUs and driver, the Python environment, the audit
    of its torch, and a verdict and fixes per GPU."""

    host: GpuProbeResult
    environment: PythonEnvironment
    audit: InputInventory | None
    audit_error: str | None
    runtime: RuntimeCheck | None
    diagnoses: tuple[GpuDiagnosis, ...]
    findings: tuple[str, ...]
    # The installed torch's .dist-info/variant.json against its device code (None: none).
    variant: ClaimsCheck | None = None

    @property
    def exit_code(self) -> int:
        """As can-run's (13 where torch's ``variant.json`` claims what its device code does
        not back); 3 when the Python environment could not be inspected at all."""
        verdicts = [d.verdict for d in self.diagnoses if d.verdict is not None]
        if self.runtime is not None and self.runtime.blocks:
            verdicts.append(Verdict.DRIVER_TOO_OLD)
        code = worst(verdicts).exit_code if verdicts else 0
        if code in (0, Verdict.JIT.exit_code) and self.variant and not self.variant.ok:
            return ExitCode.VARIANT_UNBACKED
        if code == 0 and self.environment.errors:
            return EXIT_INCOMPLETE
        return code

    def audit_summary(self) -> dict[str, Any] | None:
        """The ``audit`` object of the doctor document: each library's SASS and PTX, the scan's
        problems and the ``variant.json`` check (None when torch was not audited)."""
        if self.audit is None:
            return None
        libraries = []
        for lib in self.audit.device_libraries:
            libraries.append(
                {
                    "path": lib.path,
                    "sass": sorted({t.sm for t in lib.targets(CodeKind.SASS)}, key=_sm_key),
                    "ptx": sorted({t.compute for t in lib.targets(CodeKind.PTX)}, key=_sm_key),
                }
            )
        return {
            "source": self.audit.source,
            "complete": self.audit.complete,
            "problems": [p.one_line() for p in self.audit.problems],
            "libraries": libraries,
            **({"variant": self.variant.to_json_dict()} if self.variant is not None else {}),
        }

    def to_json_dict(self) -> dict[str, Any]:
        """The whole doctor JSON document (``interfaces/schema/doctor.schema.json``)."""
        return {
            **document_header(
                DOCTOR_SCHEMA_VERSION, "doctor", facts_version=load_facts().facts_version
            ),
            "host": self.host.to_json_dict(),
            "environment": self.environment.to_json_dict(),
            "audit": self.audit_summary(),
            "audit_error": self.audit_error,
            "runtime": self.runtime.to_json_dict() if self.runtime else None,
            "gpus": [d.to_json_dict() for d in self.diagnoses],
            "findings": list(self.findings),
            "exit_code": self.exit_code,
        }


def _sm_key(name: str) -> tuple[Target, str]:
    kind, target = Target.from_name(name)
    return target, kind.value


def run_doctor(
    python: str | None = None,
    *,
    gpu_probe: str = "auto",
    audit: bool = True,
    scanner: Scanner | None = None,
    python_timeout: float = 180.0,
) -> DoctorReport:
    """Probe, audit and judge; never raises for a probe that fails."""
    chain: tuple[NvmlProbe | NvidiaSmiProbe, ...] = {
        "auto": (NvmlProbe(), NvidiaSmiProbe()),
        "nvml": (NvmlProbe(),),
        "nvidia-smi": (NvidiaSmiProbe(),),
    }[gpu_probe]
    host = probe_gpus(chain)
    environment = PythonProbe(python, timeout=python_timeout).probe()
    return diagnose(host, environment, audit=audit, scanner=scanner or scan_installed)


def diagnose(
    host: GpuProbeResult,
    environment: PythonEnvironment,
    *,
    audit: bool = True,
    scanner: Scanner,
) -> DoctorReport:
    """Judge probed facts (separate from probing, so it is tested with fakes of both)."""
    facts = load_facts()
    findings: list[str] = []
    torch = environment.torch
    for error in environment.errors:
        findings.append(f"cannot inspect {environment.python}: {error.message}")
    if not host.has_driver:
        why = "; ".join(e.one_line() for e in host.errors)
        findings.append(
            f"no NVIDIA GPU or driver found ({why}); no per-GPU verdict, the installed torch "
            "is still reported"
        )
    elif not host.gpus:
        findings.append(f"the NVIDIA driver {host.driver} answers but reports no GPU")

    inventory: InputInventory | None = None
    audit_error: str | None = None
    if not torch.installed:
        if not environment.errors:
            findings.append(f"torch is not installed in {environment.python}")
    elif torch.import_error:
        findings.append(
            f"torch {torch.version} is installed but `import torch` fails: {torch.import_error}"
        )
    if torch.installed and audit:
        try:
            inventory = scanner("torch", environment.python)
        except ArchwheelError as exc:
            audit_error = exc.one_line()
            findings.append(f"the audit of the installed torch failed: {audit_error}")

    runtime: RuntimeCheck | None = None
    runtime_version = parse_or_none(CudaVersion.parse, torch.cuda)
    if torch.installed and torch.version and torch.cuda is None and not torch.import_error:
        findings.append(f"torch {torch.version} is a CPU-only build (torch.version.cuda is None)")
    if runtime_version is not None and host.driver is not None:
        runtime = check_runtime(runtime_version, "torch.version.cuda", host.driver, facts)
        if runtime.blocks:
            minimum = minimum_driver_for(runtime_version, facts)
            findings.append(
                f"driver {host.driver} is too old for torch's CUDA {runtime_version} runtime: "
                f"upgrade the driver to >= {minimum}, or install a torch built for CUDA <= "
                f"{host.cuda_driver_version}"
            )
    findings.extend(_flags_versus_audit(torch.arch_flags, inventory))
    variant = None
    if inventory is not None and inventory.variant_json is not None:
        # uv picked this torch for this machine by these claims (wheel variants).
        variant = check_variant_file(inventory.variant_json, inventory.device_libraries)
        findings.extend(
            f"torch's variant.json claims what its device code does not back: {line}"
            for line in variant.unbacked
        )
    if host.gpus and torch.cuda_available is False and runtime is not None and not runtime.blocks:
        findings.append(
            "torch.cuda.is_available() is False although a GPU and a recent enough driver are "
            "present: check the container's device access (--gpus), CUDA_VISIBLE_DEVICES and "
            "the driver's kernel module"
        )

    diagnoses = tuple(
        _diagnose_gpu(gpu, environment, inventory, host, runtime_version, facts=facts)
        for gpu in host.gpus
    )
    return DoctorReport(
        host=host,
        environment=environment,
        audit=inventory,
        audit_error=audit_error,
        runtime=runtime,
        diagnoses=diagnoses,
        findings=tuple(findings),
        variant=variant,
    )


def _flags_versus_audit(flags: tuple[str, ...], inventory: InputInventory | None) -> list[str]:
    """Where the build flags (what torch.cuda.get_arch_list() repeats) and the binaries differ."""
    if not flags or inventory is None:
        return []
    flagged = {f for f in flags if f.startswith("sm_")}
    findings: list[str] = []
    for lib in inventory.device_libraries:
        present = {t.sm for t in lib.targets(CodeKind.SASS)}
        lacking = sorted(flagged - present, key=_sm_key)
        if lacking:
            findings.append(
                f"{lib.path} has no {', '.join(lacking)} although the build flags list "
                f"{'it' if len(lacking) == 1 else 'them'}"
            )
    return findings


def _diagnose_gpu(
    gpu_info: GpuInfo,
    environment: PythonEnvironment,
    inventory: InputInventory | None,
    host: GpuProbeResult,
    runtime: CudaVersion | None,
    *,
    facts: CudaFacts,
) -> GpuDiagnosis:
    torch = environment.torch
    if gpu_info.cc is None:
        return GpuDiagnosis(gpu_info, None, "nothing", "compute capability unknown")
    if not torch.installed:
        return GpuDiagnosis(gpu_info, None, "nothing", "torch is not installed")
    gpu = Gpu(gpu_info.cc, gpu_info.name)
    cc = gpu_info.cc
    if inventory is not None and inventory.device_libraries:
        judged = judge_input(
            inventory, [gpu], driver=host.driver, runtime=runtime, name="torch", facts=facts
        ).per_gpu[0]
        failing = [lib for lib in judged.libraries if lib.verdict is not Verdict.NATIVE]
        reasons = tuple(r for lib in failing for r in lib.reasons)
        fixes = _fixes(cc, judged.verdict, torch.version, _cu_tag(runtime), failing, facts=facts)
        return GpuDiagnosis(
            gpu_info,
            judged.verdict,
            "audit of the installed torch libraries",
            judged.headline(),
            judged.libraries,
            tuple(dict.fromkeys(reasons)),
            fixes,
        )
    if torch.cuda is None and torch.version is not None and not torch.import_error:
        advice = pytorch_install_advice(cc, facts)
        return GpuDiagnosis(
            gpu_info,
            Verdict.NO_KERNEL_IMAGE,
            "torch.version.cuda",
            "this torch is a CPU-only build: it never uses the GPU",
            fixes=(f"install {advice}" if advice else "install a CUDA build of torch",),
        )
    if torch.arch_flags:
        try:
            archs = ArchList.parse(" ".join(torch.arch_flags))
        except ArchwheelError:
            archs = None
        if archs is not None:
            coverage = coverage_of(archs, [gpu], runtime)[0]
            verdict = {"native": Verdict.NATIVE, "jit": Verdict.JIT}.get(
                coverage.mode, Verdict.NO_KERNEL_IMAGE
            )
            return GpuDiagnosis(
                gpu_info,
                verdict,
                f"torch build flags ({torch.arch_flags_source}); the libraries were not audited",
                coverage.reason.text,
                reasons=(coverage.reason,),
                fixes=_fixes(cc, verdict, torch.version, None, [], facts=facts),
            )
    return GpuDiagnosis(gpu_info, None, "nothing", "torch's arch list is unknown (import failed?)")


def _cu_tag(runtime: CudaVersion | None) -> str | None:
    return runtime.tag if runtime else None


def _fixes(
    cc: ComputeCapability,
    verdict: Verdict,
    version: str | None,
    installed_tag: str | None,
    failing: list[LibraryVerdict],
    *,
    facts: CudaFacts,
) -> tuple[str, ...]:
    if verdict in (Verdict.NATIVE, Verdict.NO_DEVICE_CODE, Verdict.LINK_ONLY):
        return ()
    sm = Target(cc).sm
    advice = pytorch_install_advice(cc, facts, exclude=installed_tag)
    install = f"install {advice}" if advice else "no official torch build has it"
    build = f"build with `nox -s build -- --arch {cc}`"
    promised = installed_tag is not None and installed_tag in official_builds_covering(cc, facts)
    if promised and failing:
        names = ", ".join(lib.library.rsplit("/", 1)[-1] for lib in failing)
        install += (
            f" (the official {installed_tag} arch list includes {cc}, yet {names} lacks it: "
            f"check a wheel with `archwheel can-run WHEEL --cc {cc}` before installing it)"
        )
    if verdict is Verdict.JIT:
        return (
            f"this build runs on {cc} only by JIT-compiling PTX (slow first launch): for native "
            f"code, {install}, or {build}",
        )
    if verdict is Verdict.DRIVER_TOO_OLD:
        return ("upgrade the NVIDIA driver (see the findings), or " + install,)
    where = ""
    if failing:
        where = " in " + ", ".join(lib.library.rsplit("/", 1)[-1] for lib in failing)
    return (f"this build (torch {version}) has no {sm}{where}: {install}, or {build}",)
