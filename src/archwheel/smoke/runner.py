"""Run a smoke test end to end: environment, install, probe, kernel steps, report.

``run_smoke`` never raises for what happens inside the environment: a failed install, a torch
that does not import, a step that hangs or crashes all become a ``SmokeReport`` with the
evidence. It raises only for bad input (``UsageError``) and a missing engine (``ToolError``),
before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archwheel.binary.model import InputInventory
from archwheel.binary.scan.inputs import scan_installed, scan_path
from archwheel.binary.wheelmeta import WheelMetadata, read_wheel_metadata
from archwheel.effects.watchdog import ChildOutcome, ChildStatus, Watchdog
from archwheel.facts.catalog import load_facts
from archwheel.facts.versions import ComputeCapability, CudaVersion, DriverVersion, parse_or_none
from archwheel.smoke.environments import SetupOutcome, SmokeEnvironment
from archwheel.verdicts.compat.gpus import Gpu
from archwheel.verdicts.compat.judge import judge_input
from archwheel.verdicts.smoke import (
    CPU_ENV,
    JIT_UNSET,
    KERNEL_STEPS,
    NATIVE_ENV,
    SNIPPET_STEP,
    Attempt,
    AttemptMode,
    DeviceReport,
    SmokeReport,
    StageReport,
    StepReport,
    check_arch_list,
    classify_cuda_error,
    cpu_part_verdict,
    decide_cpu_part,
    decide_step,
    failure_meaning,
    needs_jit_attempt,
    overall_verdict,
    verdict_message,
)
from archwheel.verdicts.vocabulary import SmokeVerdict, StepVerdict

DEFAULT_STEP_TIMEOUT = 300.0
# The probe imports torch and initialises CUDA on every device: give it more room than a step.
PROBE_TIMEOUT_FACTOR = 2.0

Progress = Callable[[str], None]
# (device compute capability, driver) -> can-run's one-line verdict, or None when unavailable
CanRun = Callable[[ComputeCapability, DriverVersion | None], str | None]


@dataclass(frozen=True)
class SmokeSettings:
    """How a smoke run goes: the time each step may take, the steps to run, and the devices (None:
    every device the probe finds)."""

    step_timeout: float = DEFAULT_STEP_TIMEOUT
    steps: tuple[str, ...] = KERNEL_STEPS
    devices: tuple[int, ...] | None = None  # None: every device the probe finds


def run_smoke(
    environment: SmokeEnvironment,
    inputs: Sequence[str],
    settings: SmokeSettings | None = None,
    *,
    watchdog: Watchdog | None = None,
    progress: Progress | None = None,
    can_run: CanRun | None = None,
) -> SmokeReport:
    """Run the smoke test in ``environment``; always returns a report, even when interrupted."""
    state = _RunState(tuple(inputs), environment.backend, environment.description)
    try:
        return _run(
            environment,
            state,
            settings=settings or SmokeSettings(),
            watchdog=watchdog or Watchdog(),
            say=progress or (lambda _msg: None),
            can_run=can_run,
        )
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM (the CLI turns it into KeyboardInterrupt): what was established so
        # far is still evidence. The watchdog has already killed the step that was running.
        done = len(state.steps)
        return state.report(
            SmokeVerdict.INTERRUPTED,
            f"interrupted after {done} step{'s' if done != 1 else ''}"
            + (f" ({overall_verdict(state.steps).value} so far)" if state.steps else ""),
        )
    finally:
        environment.close()


@dataclass
class _RunState:
    """What a run has established so far (mutable while it runs; the report is frozen)."""

    inputs: tuple[str, ...]
    backend: str
    where: str
    stages: tuple[StageReport, ...] = ()
    probe: Mapping[str, Any] = field(default_factory=dict)
    devices: tuple[DeviceReport, ...] = ()
    steps: list[StepReport] = field(default_factory=list)
    cpu_part: StepReport | None = None

    def report(self, verdict: SmokeVerdict, message: str) -> SmokeReport:
        return SmokeReport(
            inputs=self.inputs,
            backend=self.backend,
            environment=self.where,
            verdict=verdict,
            message=message,
            stages=self.stages,
            probe=self.probe,
            devices=self.devices,
            steps=tuple(self.steps),
            cpu_part=self.cpu_part,
        )


def _run(
    environment: SmokeEnvironment,
    state: _RunState,
    *,
    settings: SmokeSettings,
    watchdog: Watchdog,
    say: Progress,
    can_run: CanRun | None,
) -> SmokeReport:
    say(f"preparing {environment.backend} environment")
    setup = environment.prepare(watchdog)
    state.where = environment.description
    state.stages = _stages(setup)
    if not setup.ok:
        if setup.no_device:
            return state.report(SmokeVerdict.NO_DEVICE, f"no CUDA device: {setup.problem}")
        return state.report(
            SmokeVerdict.ENVIRONMENT_FAILED, setup.problem or "the environment failed"
        )

    say("probing torch and the CUDA devices")
    probe_out = watchdog.run(
        environment.command(
            "probe",
            ["probe", "--result", "{result}"],
            timeout=settings.step_timeout * PROBE_TIMEOUT_FACTOR,
            env={},
            unset_env=JIT_UNSET,
        )
    )
    state.stages = (*state.stages, _stage("probe", probe_out))
    if not probe_out.finished:
        return state.report(SmokeVerdict.HANG_OR_CRASH, f"the probe failed: {probe_out.problem}")
    state.probe = probe = probe_out.result or {}
    if probe.get("torch_import_error"):
        return state.report(
            SmokeVerdict.TORCH_BROKEN, f"torch does not import: {probe['torch_import_error']}"
        )
    device_rows = list(probe.get("devices") or [])
    found_any = bool(device_rows)
    if settings.devices is not None:
        device_rows = [d for d in device_rows if d.get("index") in settings.devices]
    if not device_rows:
        why = _no_device_message(probe, settings.devices)
        snippet = environment.snippet_path()
        if found_any or not snippet:
            return state.report(SmokeVerdict.NO_DEVICE, why)
        # No device at all: the snippet's CPU part is the smoke test this host can run.
        say("no CUDA device: running the snippet's CPU part (CUDA hidden)")
        state.cpu_part = _run_cpu_part(environment, watchdog, snippet, settings)
        verdict, message = cpu_part_verdict(state.cpu_part, why.removeprefix("no CUDA device: "))
        return state.report(verdict, message)

    driver = parse_or_none(DriverVersion.parse, probe.get("driver_version"))
    state.devices = tuple(_device_report(row, probe, driver, can_run) for row in device_rows)
    snippet = environment.snippet_path()
    step_names = (*settings.steps, *((SNIPPET_STEP,) if snippet else ()))
    for device in state.devices:
        for step in step_names:
            say(f"device {device.index} ({device.name}): {step}")
            report = _run_step(
                environment=environment,
                watchdog=watchdog,
                device=device,
                step=step,
                snippet=snippet,
                settings=settings,
            )
            state.steps.append(report)
            say(f"device {device.index}: {step}: {report.verdict.value}")
    verdict = overall_verdict(state.steps)
    return state.report(verdict, verdict_message(verdict, state.steps, len(state.devices)))


def _run_step(
    *,
    environment: SmokeEnvironment,
    watchdog: Watchdog,
    device: DeviceReport,
    step: str,
    snippet: str | None,
    settings: SmokeSettings,
) -> StepReport:
    args = ["kernel", step, "--device", str(device.index), "--result", "{result}"]
    if step == SNIPPET_STEP and snippet:
        args += ["--snippet", snippet]
    name = f"{step}-dev{device.index}"
    native = Attempt(
        AttemptMode.NATIVE,
        watchdog.run(
            environment.command(
                f"{name}-native",
                args,
                timeout=settings.step_timeout,
                env=NATIVE_ENV,
                unset_env=("CUDA_FORCE_PTX_JIT",),
            )
        ),
    )
    attempts = [native]
    if needs_jit_attempt(native):
        attempts.append(
            Attempt(
                AttemptMode.JIT,
                watchdog.run(
                    environment.command(
                        f"{name}-jit",
                        args,
                        timeout=settings.step_timeout,
                        env={},
                        unset_env=JIT_UNSET,
                    )
                ),
            )
        )
    report = decide_step(device.index, step, attempts)
    if report.verdict is StepVerdict.NO_KERNEL_IMAGE:
        report = _explain(report, device)
    return report


def _run_cpu_part(
    environment: SmokeEnvironment, watchdog: Watchdog, snippet: str, settings: SmokeSettings
) -> StepReport:
    """The snippet with CUDA hidden (``CPU_ENV``) on ``--device cpu``: one attempt."""
    outcome = watchdog.run(
        environment.command(
            "snippet-cpu",
            ["kernel", SNIPPET_STEP, "--device", "cpu", "--result", "{result}", "--snippet",
             snippet],
            timeout=settings.step_timeout,
            env=CPU_ENV,
            unset_env=JIT_UNSET,
        )
    )  # fmt: skip
    return decide_cpu_part(Attempt(AttemptMode.CPU, outcome))


def _explain(report: StepReport, device: DeviceReport) -> StepReport:
    failure = classify_cuda_error(report.detail)
    parts = [f"{failure_meaning(failure)}" if failure else ""]
    if device.can_run:
        parts.append(f"can-run for {device.cc}: {device.can_run}")
    elif device.arch_check is not None:
        parts.append(device.arch_check.one_line())
    explanation = "; ".join(p for p in parts if p)
    return StepReport(
        report.device,
        report.step,
        report.verdict,
        report.attempts,
        detail=report.detail,
        explanation=explanation or None,
    )


def _device_report(
    row: Mapping[str, Any],
    probe: Mapping[str, Any],
    driver: DriverVersion | None,
    can_run: CanRun | None,
) -> DeviceReport:
    cc_text = str(row.get("cc", ""))
    cc = parse_or_none(ComputeCapability.parse, cc_text)
    torch_cuda = parse_or_none(CudaVersion.parse, probe.get("torch_cuda"))
    arch_check = check_arch_list(probe.get("arch_list") or [], cc, torch_cuda) if cc else None
    verdict = problem = None
    if cc is not None and can_run is not None:
        try:
            verdict = can_run(cc, driver)
        except Exception as exc:  # can-run is advice here; its failure must not stop the test
            problem = f"can-run failed: {type(exc).__name__}: {exc}"
    memory = row.get("total_memory")
    return DeviceReport(
        index=int(row.get("index", 0)),
        name=str(row.get("name", "?")),
        cc=cc_text,
        total_memory=int(memory) if isinstance(memory, int) else None,
        arch_check=arch_check,
        can_run=verdict,
        can_run_problem=problem,
    )


def _no_device_message(probe: Mapping[str, Any], wanted: tuple[int, ...] | None) -> str:
    if probe.get("devices") and wanted is not None:
        found = ", ".join(str(d.get("index")) for d in probe["devices"])
        return f"no CUDA device with index {wanted} (the driver shows {found})"
    reason = probe.get("cuda_error")
    first = str(reason).splitlines()[0] if reason else "torch.cuda.is_available() is False"
    return f"no CUDA device: {first}"


def _stage(name: str, outcome: ChildOutcome) -> StageReport:
    ok = outcome.status is ChildStatus.EXITED and outcome.returncode == 0
    return StageReport(
        name=name,
        ok=ok,
        seconds=outcome.seconds,
        detail=outcome.problem or "",
        log_tail=outcome.stderr_tail or tuple(outcome.stdout_tail.splitlines()[-6:]),
    )


def _stages(setup: SetupOutcome) -> tuple[StageReport, ...]:
    return tuple(_stage(name, outcome) for name, outcome in setup.stages)


# --------------------------------------------------------------------------------------------
# can-run, through one function


def can_run_for(wheels: Sequence[Path] = (), installed_python: str | None = None) -> CanRun:
    """``archwheel can-run``'s verdict for the inputs under test, as a ``CanRun`` function.

    The only place smoke calls the compatibility verdicts (``archwheel.verdicts.compat``). The
    inputs are scanned once, on first use, and judged per device.
    """
    scanned: list[tuple[str, InputInventory, WheelMetadata | None]] | None = None

    def verdict(cc: ComputeCapability, driver: DriverVersion | None) -> str | None:
        nonlocal scanned
        if scanned is None:
            scanned = _scan_inputs(wheels, installed_python)
        facts = load_facts()
        parts: list[str] = []
        for label, inventory, meta in scanned:
            judged = judge_input(
                inventory,
                [Gpu(cc)],
                driver=driver,
                runtime=meta.cuda_runtime if meta else None,
                runtime_source=meta.cuda_source if meta else None,
                name=meta.name if meta else None,
                version=meta.version if meta else None,
                facts=facts,
            )
            on_gpu = judged.per_gpu[0]
            parts.append(f"{label}: {on_gpu.verdict.value} ({on_gpu.headline()})")
        return "; ".join(parts) or None

    return verdict


def _scan_inputs(
    wheels: Sequence[Path], installed_python: str | None
) -> list[tuple[str, InputInventory, WheelMetadata | None]]:
    found: list[tuple[str, InputInventory, WheelMetadata | None]] = []
    for wheel in wheels:
        meta = read_wheel_metadata(wheel) if wheel.suffix == ".whl" else None
        found.append((wheel.name, scan_path(wheel), meta))
    if installed_python is not None and not wheels:
        found.append(("installed torch", scan_installed("torch", installed_python), None))
    return found
