"""The gates at the end of every build: does the wheel hold what was asked for, and does it load?

The audit gate audits the finished wheel against the requested arch list as ``archwheel audit
--expect`` does (``inspection.audit_inputs``). A wheel in which any library with device code
lacks a requested SASS arch or requested PTX fails the gate; the build then moves it to
``rejected/`` with the JSON audit report instead of handing it out.

The load gate runs for builds against a pinned torch (``[build] requirements`` with
``torch==X.Y.Z``): ``can-load`` of the wheel against the very torch wheel it was compiled with
(``build/torch_pin``, in the cache), as ``archwheel can-load --with`` does
(``inspection.can_load``). A wheel some library of which would not load there (a library found
nowhere, an undefined symbol, a symbol version beyond the platform tag) fails the build and
nothing reaches the output folder; the verdict is recorded in the provenance.

The range gate runs after it for a recipe that names other torch releases its wheel should
serve (``[torch] loads_with``): can-load against each (``inspection.torch_range``: read from the
indexes pip is configured with, by range requests, the loader's view of each torch kept), and
the ``Requires-Dist`` the wheel may state (``verdicts.torch_releases.range_claim``): the
releases that passed, never one that failed or was not checked. A release that does not load
narrows the claim, it does not fail the build; a check that cannot be made at all (no index
answers) leaves the exact pin, with a warning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from archwheel.binary.demangle import demangle
from archwheel.effects.pipconfig import PipSettings
from archwheel.errors import ArchwheelError
from archwheel.facts.arch import ArchList
from archwheel.facts.pytorch_additions import load_additions
from archwheel.inspection.audits import audit_inputs
from archwheel.inspection.loading import can_load
from archwheel.inspection.torch_range import can_load_range
from archwheel.verdicts.audit import audit_document
from archwheel.verdicts.build_files import explained_extras
from archwheel.verdicts.load import LibraryLoad, LoadReport, LoadVerdict, mangled_names
from archwheel.verdicts.torch_releases import RangeClaim, range_claim


@dataclass(frozen=True)
class GateVerdict:
    """The audit gate's result: pass or fail, its one-line summary and the JSON audit document.

    ``audit_gate`` makes it; the runner rejects a wheel whose verdict is not ``ok``.
    """

    ok: bool
    summary: str  # one line for the terminal and provenance
    report: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    # per library with device code beyond the request: (its path, the image names)
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # the shared objects of the wheel that hold no device code (a module that fell back to CPU
    # is one of them)
    without_device_code: tuple[str, ...] = ()


AuditGate = Callable[[Path, ArchList], GateVerdict]


def audit_gate(wheel: Path, arch_list: ArchList) -> GateVerdict:
    """Audit ``wheel`` against ``arch_list`` with archwheel's own audit engine.

    The gate passes only when the scan was complete and nothing requested is missing; what a
    library carries beyond the request is reported, not refused (PyTorch adds sm_90a kernels
    to a 9.0 build on purpose).
    """
    (report,) = audit_inputs([wheel], expect=arch_list)
    document = audit_document([report])
    plain = tuple(
        sorted(
            str(lib.path)
            for lib in report.inventory.libraries
            if lib.file_kind == "shared-object" and not lib.has_device_code
        )
    )
    if not report.complete:
        problems = "; ".join(p.one_line() for p in report.inventory.problems[:3])
        return GateVerdict(
            False, f"the audit could not read the wheel completely: {problems}", document
        )
    if report.no_device_code:
        return GateVerdict(
            False, "no library in the wheel carries device code", document,
            without_device_code=plain,
        )  # fmt: skip
    missing = [f"{v.library.path} lacks {', '.join(v.missing)}" for v in report.failing]
    if missing:
        return GateVerdict(False, "; ".join(missing), document)
    extra = sorted({name for v in report.libraries for name in v.extra})
    beyond = f"; beyond the request: {', '.join(extra)}" if extra else ""
    explained = explained_extras(extra, arch_list, load_additions())
    if explained:
        beyond += f" (PyTorch's own CMake adds {'; '.join(explained)})"
    names = [str(v.library.path) for v in report.libraries]
    listed = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    summary = (
        f"all {len(report.libraries)} libraries with device code ({listed}) hold "
        f"{arch_list}{beyond}"
    )
    per_library = tuple((str(v.library.path), v.extra) for v in report.libraries if v.extra)
    return GateVerdict(True, summary, document, per_library, plain)


# -- the load gate: does the wheel load next to the torch it was built against? ------------------


@dataclass(frozen=True)
class LoadGateVerdict:
    """``can-load`` of the finished wheel against the torch wheel of the build.

    ``ok`` is False only when some library does not load (verdict ``does-not-load``): a library
    that could not be checked completely (``unknown``) is recorded, not refused, because the
    audit gate already refuses a wheel it cannot read.
    """

    ok: bool
    verdict: str  # loads / does-not-load / unknown (verdicts.load.LoadVerdict)
    summary: str  # one line for the terminal, the error and provenance
    torch: str  # the torch wheel's file name
    libraries: tuple[Mapping[str, object], ...] = ()

    def to_json_dict(self) -> dict[str, object]:
        """The verdict as the provenance's ``load`` entry."""
        return {
            "ok": self.ok,
            "verdict": self.verdict,
            "summary": self.summary,
            "torch": self.torch,
            "libraries": [dict(lib) for lib in self.libraries],
        }


LoadGate = Callable[[Path, Path], LoadGateVerdict]
LISTED_SYMBOLS = 3  # missing symbols named in the one-line summary per library


def load_gate(wheel: Path, torch_wheel: Path) -> LoadGateVerdict:
    """Judge ``wheel`` next to ``torch_wheel`` as ``archwheel can-load WHEEL --with TORCH`` does,
    without this host's system libraries (the manylinux policy of the wheel's tag stands for
    them, so the verdict does not depend on the machine that builds)."""
    return load_verdict(can_load(wheel, [torch_wheel], host_libraries=False))


def load_verdict(report: LoadReport) -> LoadGateVerdict:
    """A can-load report as the gate records it: per library, and one line."""
    names = demangle(mangled_names(report))
    libraries: list[Mapping[str, object]] = []
    failing: list[str] = []
    for lib in report.libraries:
        symbols = [names.get(s.name, s.name) for s in lib.missing_symbols]
        libraries.append(
            MappingProxyType(
                {
                    "path": lib.path,
                    "verdict": lib.verdict.value,
                    "missing_libraries": list(lib.missing_libraries),
                    "missing_symbols": symbols,
                    "missing_symbol_count": lib.missing_symbol_count,
                    "causes": list(lib.causes),
                    "problems": list(lib.problems),
                }
            )
        )
        if lib.verdict is LoadVerdict.FAILS:
            failing.append(_failure_line(lib, symbols))
    verdict = report.verdict
    torch = report.torch.filename
    if verdict is LoadVerdict.FAILS:
        summary = f"does not load next to {torch}: " + "; ".join(failing)
    elif verdict is LoadVerdict.UNKNOWN:
        problems = [*report.problems, *(p for lib in report.libraries for p in lib.problems)]
        summary = f"could not be checked completely next to {torch}: " + "; ".join(problems[:3])
    else:
        summary = f"all {len(report.libraries)} libraries load next to {torch}"
    return LoadGateVerdict(
        verdict is not LoadVerdict.FAILS, verdict.value, summary, torch, tuple(libraries)
    )


def _failure_line(lib: LibraryLoad, symbols: list[str]) -> str:
    parts: list[str] = []
    if lib.missing_libraries:
        parts.append("needs " + ", ".join(lib.missing_libraries) + " (found nowhere)")
    if symbols:
        shown = ", ".join(s.split("(")[0] for s in symbols[:LISTED_SYMBOLS])
        more = lib.missing_symbol_count - min(len(symbols), LISTED_SYMBOLS)
        parts.append(f"undefined {shown}" + (f" and {more} more" if more > 0 else ""))
    if lib.missing_versions:
        parts.append(", ".join(f"{v} from {f}" for f, v in lib.missing_versions[:3]) + " not found")
    if lib.too_new:
        parts.append(
            f"needs {', '.join(sorted({v for v, _ in lib.too_new}))} beyond {lib.too_new[0][1]}"
        )
    cause = f" ({lib.causes[0]})" if lib.causes else ""
    return f"{lib.path} {', '.join(parts)}{cause}"


# -- the range gate: which other torch releases does the wheel load with? -------------------------


@dataclass(frozen=True)
class RangeGateVerdict:
    """can-load of the finished wheel against each release of ``[torch] loads_with``, and the
    ``Requires-Dist`` that states exactly those that passed."""

    claim: RangeClaim
    checks: tuple[Mapping[str, object], ...] = ()  # per release: its verdict and why
    problem: str | None = None  # the checks could not be made at all (the pin is kept)
    bytes_fetched: int = 0

    def to_json_dict(self) -> dict[str, object]:
        """The claim with each release's check, as the provenance's ``torch_range`` entry."""
        return {
            **self.claim.to_json_dict(),
            "checks": [dict(c) for c in self.checks],
            "problem": self.problem,
            "bytes_fetched": self.bytes_fetched,
        }


RangeGate = Callable[[Path, "RangeRequest"], RangeGateVerdict]


@dataclass(frozen=True)
class RangeRequest:
    """What the range gate checks: the torch built against, the releases claimed, where the
    torch wheels are found and where what was read of them is kept."""

    built: str  # the build's torch version (2.14.1)
    loads_with: tuple[str, ...]
    python: str  # the build's Python (3.11), for a wheel whose tags name no CPython
    pip: PipSettings
    cache: Path
    on_event: Callable[[str], None] | None = None


def range_gate(wheel: Path, request: RangeRequest) -> RangeGateVerdict:
    """can-load of ``wheel`` against every release of ``request.loads_with`` other than the
    torch it was built against (which the load gate checked), and the claim they back."""
    own = Version(request.built).public
    others = [v for v in request.loads_with if Version(v) != Version(own)]
    if not others:
        return RangeGateVerdict(range_claim(own, (), (), ()))
    try:
        report = can_load_range(
            wheel, ",".join(others), pip=request.pip, cache=request.cache,
            python=None if _names_cpython(wheel.name) else request.python.rstrip("t"),
            host_libraries=False, on_event=request.on_event,
        )  # fmt: skip
    except ArchwheelError as exc:
        return RangeGateVerdict(range_claim(own, (), others, ()), problem=exc.one_line())
    checks: list[Mapping[str, object]] = []
    passed: list[str] = []
    for check in report.checks:
        record: dict[str, object] = {
            "version": check.version,
            "filename": check.filename,
            "verdict": check.verdict.value,
            "bytes_fetched": check.fetched,
            "cached": check.cached,
        }
        if check.report is None:
            record["summary"] = f"could not be checked: {check.error}"
        else:
            gate = load_verdict(check.report)
            record["summary"] = gate.summary
            record["libraries"] = [dict(lib) for lib in gate.libraries]
        checks.append(MappingProxyType(record))
        if check.verdict is LoadVerdict.LOADS:
            passed.append(check.version)
    for version in report.not_found:
        checks.append(
            MappingProxyType(
                {"version": version, "verdict": "unknown", "summary": "not on the indexes"}
            )
        )
    failed = [v for v in others if v not in passed]
    claim = range_claim(own, passed, failed, report.available)
    return RangeGateVerdict(claim, tuple(checks), bytes_fetched=report.fetched)


def _names_cpython(filename: str) -> bool:
    """Whether a wheel's tags name its own CPython ABI (cp311-cp311), not abi3 or none."""
    try:
        tags = parse_wheel_filename(filename)[3]
    except (InvalidWheelFilename, InvalidVersion):
        return False
    return any(t.interpreter.startswith("cp") and t.abi == t.interpreter for t in tags)
