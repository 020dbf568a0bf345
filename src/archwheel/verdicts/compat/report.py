"""The verdict vocabulary and the frozen results of ``can-run``, up to the fleet report.

A library is as good as its worst module, an input (wheel) as its worst library, the report as
its worst input on any GPU; the exit code follows from that (docs/exit-codes.md). Each result
renders itself as JSON (``to_json_dict``) and as the one line the JSON carries (``summary``,
``headline``); the images that serve a library are typed targets, named only here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from archwheel.exit_codes import EXIT_INCOMPLETE, ExitCode
from archwheel.facts.arch import Target
from archwheel.facts.catalog import CudaFacts
from archwheel.facts.versions import CudaVersion, DriverVersion
from archwheel.verdicts.compat.gpus import Gpu
from archwheel.verdicts.document import document_header
from archwheel.verdicts.vocabulary import Verdict

if TYPE_CHECKING:
    from archwheel.verdicts.variant_claims import ClaimsCheck

CAN_RUN_SCHEMA_VERSION = 1


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    """The most severe verdict (NATIVE for an empty input)."""
    return max(verdicts, key=lambda v: v.severity, default=Verdict.NATIVE)


# -- verdicts -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reason:
    """One line of explanation and the rule it applies."""

    text: str
    rule_id: str

    def cite(self, facts: CudaFacts) -> str:
        """The reason followed by the rule it applies, as the facts word it, for text that must
        stand alone."""
        return f"{self.text} [rule {self.rule_id}: {facts.rule(self.rule_id)}]"

    def to_json_dict(self) -> dict[str, str]:
        """The reason as the JSON documents write it: its text and rule id."""
        return {"text": self.text, "rule": self.rule_id}


@dataclass(frozen=True)
class LibraryVerdict:
    """One library on one GPU."""

    library: str
    gpu: Gpu
    verdict: Verdict
    modules: int  # loadable modules judged
    native: tuple[tuple[Target, int], ...] = ()  # (best cubin, modules it serves)
    jit: tuple[tuple[Target, int], ...] = ()  # (PTX compiled, modules it serves)
    missing_modules: int = 0
    driver_blocked_modules: int = 0
    reasons: tuple[Reason, ...] = ()
    fixes: tuple[str, ...] = ()
    link_only: tuple[str, ...] = ()  # archs present only in relocatable fatbins
    exact_modules: bool = True  # False: judged per section (see split_modules)

    def native_archs(self) -> tuple[tuple[str, int], ...]:
        """``native`` named: ``(("sm_90a", 12), ...)``."""
        return tuple((target.sm, n) for target, n in self.native)

    def jit_archs(self) -> tuple[tuple[str, int], ...]:
        """``jit`` named: ``(("compute_90", 3), ...)``."""
        return tuple((target.compute, n) for target, n in self.jit)

    def summary(self) -> str:
        """One line: the verdict and what serves (or would fix) it."""
        return _library_summary(self)

    def to_json_dict(self) -> dict[str, Any]:
        """The library's part of the can-run document: its verdict, what serves each module, reasons
        and fixes."""
        return {
            "library": self.library,
            "verdict": self.verdict.value,
            "modules": self.modules,
            "native": [{"arch": a, "modules": n} for a, n in self.native_archs()],
            "jit": [{"arch": a, "modules": n} for a, n in self.jit_archs()],
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
        """The driver cannot serve the CUDA runtime at all: every library fails, whatever its
        images."""
        return self.status == "unsupported"

    def to_json_dict(self) -> dict[str, Any]:
        """The ``runtime`` object of the can-run document."""
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
        """The paths of the libraries judged ``verdict`` on this GPU, for the headline."""
        return [lib.library for lib in self.libraries if lib.verdict is verdict]

    def headline(self) -> str:
        """``no kernel image in libtorch_cuda_linalg.so; native elsewhere``."""
        return _headline(self)

    def to_json_dict(self) -> dict[str, Any]:
        """This input's part of the can-run document for one GPU: verdict, headline, runtime check
        and libraries."""
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
    # Its .dist-info/variant.json judged against its device code (None: it has none).
    variant: ClaimsCheck | None = None

    @property
    def verdict(self) -> Verdict:
        """The input's verdict: its worst over every GPU judged."""
        return worst(v.verdict for v in self.per_gpu)

    @property
    def variant_ok(self) -> bool:
        """Every property its ``variant.json`` claims is backed (True without one)."""
        return self.variant is None or self.variant.ok

    def to_json_dict(self) -> dict[str, Any]:
        """One entry of the can-run document's ``inputs``."""
        return {
            "source": self.source,
            "name": self.name,
            "version": self.version,
            "complete": self.complete,
            "problems": list(self.problems),
            "verdict": self.verdict.value,
            "gpus": [v.to_json_dict() for v in self.per_gpu],
            **({"variant": self.variant.to_json_dict()} if self.variant is not None else {}),
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
        """The fleet's verdict: the worst of every input on every GPU."""
        return worst(i.verdict for i in self.inputs)

    @property
    def complete(self) -> bool:
        """Every input was read completely (otherwise a verdict may rest on part of it)."""
        return all(i.complete for i in self.inputs)

    @property
    def exit_code(self) -> int:
        """11 missing > 12 driver > 13 unbacked variant claim > 3 incomplete > 10 JIT > 0
        (docs/exit-codes.md)."""
        verdict = self.verdict
        if verdict.severity >= Verdict.DRIVER_TOO_OLD.severity:
            return verdict.exit_code
        if not all(i.variant_ok for i in self.inputs):
            return ExitCode.VARIANT_UNBACKED
        if not self.complete:
            return EXIT_INCOMPLETE
        return verdict.exit_code

    def to_json_dict(self) -> dict[str, Any]:
        """The whole can-run JSON document (``interfaces/schema/can-run.schema.json``)."""
        return {
            **document_header(CAN_RUN_SCHEMA_VERSION, "can-run", facts_version=self.facts_version),
            "driver": str(self.driver) if self.driver else None,
            "gpus": [g.to_json_dict() for g in self.gpus],
            "verdict": self.verdict.value,
            "exit_code": self.exit_code,
            "inputs": [i.to_json_dict() for i in self.inputs],
            "rules": dict(self.rules),
        }


def build_report(
    inputs: Sequence[InputVerdicts],
    gpus: Sequence[Gpu],
    driver: DriverVersion | None,
    facts: CudaFacts,
) -> CanRunReport:
    """Gather the judged inputs into the fleet report, with the text of every rule their reasons
    cite, so the document explains itself."""
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
        parts.append("native: " + _counted(v.native_archs(), v.modules))
    if v.jit:
        label = "JIT (driver too old)" if v.driver_blocked_modules else "JIT"
        parts.append(
            f"{label}: " + _counted(v.jit_archs(), v.modules) + ", compiled at first launch"
        )
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
