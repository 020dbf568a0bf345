"""``archwheel matrix --recheck``: which published wheels must be rebuilt for the torch releases
that appeared since they were checked?

For every wheel of the index built against torch (a pin, or a range its build checked), the
releases it was checked against are known: the torch it was built with, those its index entry
serves, and those its provenance's ``torch_range`` checked. Every release the indexes pip is
configured with now hold for the wheel's Python and machine that is newer than all of those is
new; can-load judges the wheel against each (``inspection.torch_range``: read by ranges, each
torch's loader view kept), and each answer is one of:

- ``covered``: the wheel's ``Requires-Dist`` admits the release and the wheel loads with it;
- ``broken``: its ``Requires-Dist`` admits the release (a later patch of a claimed minor, say)
  and it does not load: pip would install it next to a torch it fails with. Rebuild it (its
  range check then shuts the release out) or withdraw it;
- ``claimable``: it loads, but its ``Requires-Dist`` does not admit the release: a rebuild
  (the recipe's ``loads_with`` naming it) would serve it with the same wheel;
- ``needs a build``: neither: that torch needs a wheel built against it;
- ``unknown``: the release could not be checked (the reason is said).

Nothing is written: the report lists the wheels to rebuild. Exit codes: 0 no wheel needs a
rebuild, 1 some wheel is ``broken`` or a release ``needs a build``/is ``claimable``, 3 a check
could not be made (and nothing needs a rebuild).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from archwheel.binary.wheelmeta import read_wheel_metadata
from archwheel.effects.deadline import NetBudget
from archwheel.effects.pipconfig import PipSettings
from archwheel.errors import ArchwheelError
from archwheel.exit_codes import EXIT_INCOMPLETE, EXIT_OK, EXIT_VERDICT_FAILED
from archwheel.inspection.torch_range import (
    TorchListing,
    can_load_range,
    list_torch_files,
    torch_releases_for,
)
from archwheel.matrix.index import (
    PROVENANCE_SUFFIX,
    WHEELS,
    IndexEntry,
    load_provenance,
    read_index,
    torch_requirement,
)
from archwheel.matrix.layout import published_tree
from archwheel.verdicts.load import LoadReport, LoadVerdict

Event = Callable[[str], None]


class Action(str, Enum):
    """What a new torch release means for a published wheel: covered, broken, claimable, needs a
    build, or unknown (the module doc says when each holds)."""

    COVERED = "covered"
    BROKEN = "broken"
    CLAIMABLE = "claimable"
    NEEDS_BUILD = "needs a build"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ReleaseCheck:
    """One new torch release against one published wheel."""

    version: str
    verdict: LoadVerdict
    admitted: bool  # the wheel's Requires-Dist admits it
    summary: str = ""

    @property
    def action(self) -> Action:
        """The release's action, from whether the wheel loads with it and whether its Requires-Dist
        admits it."""
        if self.verdict is LoadVerdict.UNKNOWN:
            return Action.UNKNOWN
        loads = self.verdict is LoadVerdict.LOADS
        if self.admitted:
            return Action.COVERED if loads else Action.BROKEN
        return Action.CLAIMABLE if loads else Action.NEEDS_BUILD

    def to_json_dict(self) -> dict[str, Any]:
        """The check as ``matrix --recheck --format json`` lists it under its wheel."""
        return {
            "version": self.version,
            "verdict": self.verdict.value,
            "admitted": self.admitted,
            "action": self.action.value,
            "summary": self.summary,
        }


@dataclass(frozen=True)
class WheelRecheck:
    """One published wheel: what it was checked against, and each release newer than that."""

    file: str
    requirement: str  # its Requires-Dist on torch ("" when it has none)
    checked: tuple[str, ...]  # the releases known to have been checked (or built against)
    releases: tuple[ReleaseCheck, ...] = ()
    problem: str | None = None  # the new releases could not be listed or read

    @property
    def must_rebuild(self) -> bool:
        """True when a new release is broken, claimable or needs a build: the wheel is listed for a
        rebuild."""
        return any(r.action in _REBUILD for r in self.releases)

    @property
    def complete(self) -> bool:
        """True when every new release could be listed and checked; an incomplete wheel makes the
        recheck exit 3 if nothing must be rebuilt."""
        return self.problem is None and all(r.action is not Action.UNKNOWN for r in self.releases)

    def to_json_dict(self) -> dict[str, Any]:
        """The wheel's recheck as ``matrix --recheck --format json`` lists it."""
        return {
            "file": self.file,
            "requirement": self.requirement,
            "checked": list(self.checked),
            "must_rebuild": self.must_rebuild,
            "problem": self.problem,
            "releases": [r.to_json_dict() for r in self.releases],
        }


_REBUILD = frozenset({Action.BROKEN, Action.CLAIMABLE, Action.NEEDS_BUILD})


@dataclass(frozen=True)
class RecheckReport:
    """What ``matrix --recheck`` found: each published wheel built against torch and its new
    releases."""

    index: Path
    wheels: tuple[WheelRecheck, ...]

    @property
    def rebuild(self) -> tuple[WheelRecheck, ...]:
        """The wheels that must be rebuilt (or withdrawn), as the report lists them first."""
        return tuple(w for w in self.wheels if w.must_rebuild)

    @property
    def exit_code(self) -> int:
        """1 when a wheel must be rebuilt, else 3 when a check could not be made, else 0 (docs/exit-
        codes.md)."""
        if self.rebuild:
            return int(EXIT_VERDICT_FAILED)
        if not all(w.complete for w in self.wheels):
            return int(EXIT_INCOMPLETE)
        return int(EXIT_OK)

    def to_json_dict(self) -> dict[str, Any]:
        """The report as ``matrix --recheck --format json`` prints it (matrix-recheck schema)."""
        return {
            "schema_version": 1,
            "kind": "matrix-recheck",
            "index": str(self.index),
            "exit_code": self.exit_code,
            "rebuild": [w.file for w in self.rebuild],
            "wheels": [w.to_json_dict() for w in self.wheels],
        }


def recheck_index(
    index: Path,
    *,
    pip: PipSettings,
    cache: Path,
    on_event: Event | None = None,
    budget: NetBudget | None = None,
) -> RecheckReport:
    """Every published wheel built against torch, against the releases newer than those it
    was checked against (see the module doc). ``cache``: archwheel's cache folder (what was
    read of each torch wheel is kept there); ``budget``: the run's network time, every wheel's
    checks together (None: the default limits, ``effects.deadline``). An index with no published
    tree (no ``current``, or one whose tree is gone) is a ``UsageError``, not an index with
    nothing to rebuild."""
    say = on_event or (lambda _line: None)
    tree = published_tree(index)
    found: list[WheelRecheck] = []
    listing = _Listing(pip, say, budget or NetBudget())
    for entry in sorted(read_index(index), key=lambda e: e.file):
        if entry.torch is None and not entry.serves:
            continue  # not built against torch: no torch release concerns it
        say(f"{entry.file}")
        found.append(
            _recheck(
                entry, tree / WHEELS / entry.file, pip=pip, cache=cache, say=say, listing=listing
            )
        )
    return RecheckReport(index, tuple(found))


class _Listing:
    """The indexes' torch files, asked for once per recheck (torch's page lists thousands of
    files; every wheel of the index is judged against the same), and only when a wheel needs
    them. A failure is kept and raised again for every wheel, as each would have met it."""

    def __init__(self, pip: PipSettings, say: Event, budget: NetBudget) -> None:
        self._pip = pip
        self._say = say
        self.budget = budget
        self._found: TorchListing | ArchwheelError | None = None

    def get(self) -> TorchListing:
        if self._found is None:
            try:
                self._found = list_torch_files(self._pip, on_event=self._say, budget=self.budget)
            except ArchwheelError as exc:
                self._found = exc
        if isinstance(self._found, ArchwheelError):
            raise self._found
        return self._found


def _recheck(
    entry: IndexEntry, wheel: Path, *, pip: PipSettings, cache: Path, say: Event, listing: _Listing
) -> WheelRecheck:
    checked = _checked(entry, wheel)
    try:
        requirement = torch_requirement(read_wheel_metadata(wheel).requires)
    except (ArchwheelError, OSError) as exc:
        return WheelRecheck(entry.file, "", checked, problem=_why(exc))
    newest = max((Version(v) for v in checked), default=None)
    try:
        available = torch_releases_for(wheel, pip=pip, on_event=say, listing=listing.get())
    except ArchwheelError as exc:
        return WheelRecheck(entry.file, requirement, checked, problem=exc.one_line())
    new = [v for v in available if newest is None or Version(v) > newest]
    if not new:
        return WheelRecheck(entry.file, requirement, checked)
    try:
        report = can_load_range(
            wheel, ",".join(new), pip=pip, cache=cache, host_libraries=False, on_event=say,
            listing=listing.get(), budget=listing.budget,
        )  # fmt: skip
    except ArchwheelError as exc:
        return WheelRecheck(entry.file, requirement, checked, problem=exc.one_line())
    admits = _admits(requirement)
    releases = [
        ReleaseCheck(
            c.version,
            c.verdict,
            admits(c.version),
            c.error or (_summary(c.report) if c.report is not None else ""),
        )
        for c in report.checks
    ]
    releases += [
        ReleaseCheck(v, LoadVerdict.UNKNOWN, admits(v), "not on the indexes any more")
        for v in report.not_found
    ]
    return WheelRecheck(entry.file, requirement, checked, tuple(releases))


def _summary(report: LoadReport) -> str:
    """One line: the libraries that do not load and why (the first cause of each)."""
    failing = [lib for lib in report.libraries if lib.verdict is LoadVerdict.FAILS]
    if not failing:
        return f"{report.verdict.value}: {len(report.libraries)} libraries"
    return "; ".join(
        f"{lib.path}: "
        + (lib.causes[0] if lib.causes else "does not load")
        + (f" ({lib.missing_symbol_count} symbols missing)" if lib.missing_symbol_count else "")
        + (f" (needs {', '.join(lib.missing_libraries)})" if lib.missing_libraries else "")
        for lib in failing
    )


def _checked(entry: IndexEntry, wheel: Path) -> tuple[str, ...]:
    """The releases the wheel is known to have been checked against or built with."""
    versions = {*entry.serves, *([entry.torch] if entry.torch else [])}
    provenance = wheel.with_name(wheel.name + PROVENANCE_SUFFIX)
    if entry.provenance and provenance.is_file():
        try:
            document = load_provenance(provenance)
        except (ArchwheelError, OSError, ValueError):
            document = {}
        section = document.get("torch_range")
        if isinstance(section, dict):
            for check in section.get("checks") or []:
                if isinstance(check, dict) and isinstance(check.get("version"), str):
                    versions.add(check["version"])
    good: set[Version] = set()
    for text in versions:
        try:
            good.add(Version(Version(text).public))
        except InvalidVersion:
            continue
    return tuple(str(v) for v in sorted(good))


def _admits(requirement: str) -> Callable[[str], bool]:
    try:
        spec = SpecifierSet(requirement)
    except InvalidSpecifier:
        return lambda _v: False
    if not requirement:
        return lambda _v: True  # no requirement on torch: pip installs it next to any
    return lambda v: spec.contains(v, prereleases=True)


def _why(exc: BaseException) -> str:
    return exc.one_line() if isinstance(exc, ArchwheelError) else " ".join(str(exc).split())


def rebuild_lines(report: RecheckReport) -> Sequence[str]:
    """One line per wheel to rebuild, naming the releases and why."""
    lines: list[str] = []
    for wheel in report.rebuild:
        parts = [
            f"torch {r.version}: {r.action.value}" for r in wheel.releases if r.action in _REBUILD
        ]
        lines.append(f"{wheel.file}: " + "; ".join(parts))
    return lines
