"""Which torch wheels a can-load across torch releases reads: a request, and the choice.

``can-load EXT.whl --torch ">=2.11"`` (a PEP 440 specifier set) or ``--torch 2.13.0,2.14.1``
(exact versions, local labels allowed: ``2.13.0+cpu``) names torch releases; of the files a
package index lists for ``torch``, one wheel per release is chosen for the extension's Python
tag and machine. Pure: the files come from ``effects.simple_index``.

The rules, so that the answer is the torch pip would install next to the extension:

- a release is a version of a file named ``torch-VERSION-TAGS.whl`` that the request admits;
  a specifier set admits public releases only (no ``+cpu``/``+cu130`` local label: on the
  package index those are other builds) and no pre-release unless it names one; an explicit
  list admits exactly its versions;
- of a release, the wheel whose tags say the extension's interpreter (``cp311``: its own
  CPython ABI) and machine (``x86_64``, ``aarch64``) on Linux; of several, the one with the
  newest manylinux glibc (pip's preference) and then the name, so the choice is stable;
- an extension that names no CPython (``abi3``, ``py3-none``) needs the Python to be given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from archwheel.errors import UsageError

MAX_RELEASES = 64  # a range that admits more is refused: narrow it


@dataclass(frozen=True)
class TorchRequest:
    """What ``--torch`` asked for: exact versions, or a specifier set."""

    text: str
    exact: tuple[Version, ...] = ()
    specifier: SpecifierSet | None = None

    def admits(self, version: Version) -> bool:
        """Whether ``version`` is one of those asked for (local versions only when named
        exactly)."""
        if self.specifier is None:
            return version in self.exact
        if version.local is not None:
            return False
        return self.specifier.contains(version, prereleases=bool(self.specifier.prereleases))


@dataclass(frozen=True)
class TorchFile:
    """A torch wheel on an index, chosen for one release."""

    version: Version
    filename: str
    url: str
    sha256: str | None
    size: int | None


def parse_torch_request(text: str) -> TorchRequest:
    """``--torch`` parsed: ``2.13.0,2.14.1`` (exact) or ``>=2.11,<2.16`` (a specifier set)."""
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or not all(items):
        raise UsageError(
            f"--torch {text!r}: an empty item",
            hint='give versions (2.13.0,2.14.1) or a range (">=2.11")',
        )
    exact: list[Version] = []
    for item in items:
        try:
            exact.append(Version(item))
        except InvalidVersion:
            break
    else:
        return TorchRequest(text, exact=tuple(dict.fromkeys(exact)))
    try:
        return TorchRequest(text, specifier=SpecifierSet(text))
    except InvalidSpecifier:
        raise UsageError(
            f"--torch {text!r} is neither a list of versions nor a version range",
            hint='e.g. --torch 2.13.0,2.14.1 or --torch ">=2.11,<2.16"',
        ) from None


_MANYLINUX = re.compile(r"manylinux_(\d+)_(\d+)_")
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def _glibc(platform: str) -> tuple[int, int]:
    match = _MANYLINUX.match(platform)
    if match:
        return int(match.group(1)), int(match.group(2))
    for prefix, version in _LEGACY.items():
        if platform.startswith(prefix + "_"):
            return version
    return (0, 0)


def _machine(platform: str) -> str | None:
    for machine in ("x86_64", "aarch64"):
        if platform.endswith("_" + machine) and (platform.startswith(("linux_", "manylinux"))):
            return machine
    return None


_VERSIONED = re.compile(r"(?:cp|py)(\d)(\d*)$")


def serving_python(tags: Iterable[str], host: str) -> tuple[str, str] | None:
    """The Python (``3.11``) whose torch builds an abi3 or ``py3-none`` wheel is judged with,
    and why: ``host`` (this machine's ``3.11``) where its tags serve it, else the lowest they
    serve. None for a wheel whose tags name a CPython ABI of their own (or serve no Python 3)."""
    lowest: tuple[int, int] | None = None
    shown: set[str] = set()
    for text in tags:
        try:
            interpreter, abi, _platform = text.split("-")
        except ValueError:
            continue
        match = _VERSIONED.match(interpreter)
        if match is None or abi not in ("abi3", "none") or match.group(1) != "3":
            if abi not in ("abi3", "none"):
                return None
            continue
        version = (3, int(match.group(2) or 0))
        lowest = version if lowest is None else min(lowest, version)
        shown.add(f"{interpreter}-{abi}")
    if lowest is None:
        return None
    tag = ", ".join(sorted(shown))
    major, _, minor = host.partition(".")
    if major == "3" and minor.isdigit() and (3, int(minor)) >= lowest:
        return host, f"its tag {tag} serves this host's Python {host}"
    return (
        f"3.{lowest[1]}",
        f"its tag {tag} does not serve this host's Python {host}: the lowest it serves",
    )


def extension_target(
    tags: Iterable[str], python: str | None, host_machine: str | None = None
) -> tuple[str, str]:
    """The CPython tag (``cp311``) and machine of an extension wheel's tags; ``python``
    (``3.11``) where its tags name none, ``host_machine`` where they name none (``any``)."""
    tags = list(tags)
    interpreters: set[str] = set()
    machines: set[str] = set()
    for text in tags:
        try:
            interpreter, abi, platform = text.split("-")
        except ValueError:
            continue
        if interpreter.startswith("cp") and abi == interpreter:
            interpreters.add(interpreter)
        machine = _machine(platform)
        if machine:
            machines.add(machine)
    if python is not None:
        major, _, minor = python.partition(".")
        if not (major.isdigit() and minor.isdigit()):
            raise UsageError(f"--python-version {python!r}: expected X.Y, e.g. 3.11")
        interpreters = {f"cp{major}{minor}"}
    if len(interpreters) != 1:
        raise UsageError(
            "the wheel names "
            + (
                f"several CPythons ({', '.join(sorted(interpreters))})"
                if interpreters
                else "no CPython of its own (abi3 or pure)"
            )
            + ": which torch build it meets depends on the Python",
            hint="give --python-version X.Y (the Python whose torch builds to read)",
        )
    if not machines and host_machine is not None and all(t.endswith("-any") for t in tags):
        machines = {host_machine}
    if len(machines) != 1:
        raise UsageError(
            "the wheel is not for one Linux machine (x86_64 or aarch64): "
            + (", ".join(sorted(tags)) or "no tags"),
            hint="torch wheels are chosen by machine; can-load --torch reads Linux wheels",
        )
    return interpreters.pop(), machines.pop()


def choose_torch_files(
    files: Iterable[tuple[str, str, str | None, int | None]],
    request: TorchRequest,
    interpreter: str,
    machine: str,
) -> tuple[TorchFile, ...]:
    """One wheel per admitted release (oldest first), from ``(filename, url, sha256, size)``."""
    best: dict[Version, tuple[tuple[int, int], str, TorchFile]] = {}
    for filename, url, sha256, size in files:
        try:
            name, version, _build, tags = parse_wheel_filename(filename)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if name != "torch" or not request.admits(version):
            continue
        fits = [t for t in tags if _fits(t, interpreter, machine)]
        if not fits:
            continue
        glibc = max(_glibc(t.platform) for t in fits)
        key = (glibc, filename)
        chosen = TorchFile(version, filename, url, sha256, size)
        if version not in best or _better(key, best[version][:2]):
            best[version] = (glibc, filename, chosen)
    if len(best) > MAX_RELEASES:
        raise UsageError(
            f"--torch {request.text!r} admits {len(best)} torch releases, more than {MAX_RELEASES}",
            hint="narrow the range",
        )
    return tuple(best[v][2] for v in sorted(best))


def _better(key: tuple[tuple[int, int], str], than: tuple[tuple[int, int], str]) -> bool:
    return key[0] > than[0] or (key[0] == than[0] and key[1] < than[1])


def _fits(tag: Tag, interpreter: str, machine: str) -> bool:
    return (
        tag.interpreter == interpreter
        and tag.abi == interpreter
        and _machine(tag.platform) == machine
    )


def missing_releases(request: TorchRequest, chosen: tuple[TorchFile, ...]) -> tuple[str, ...]:
    """The exact versions asked for that no wheel was found for."""
    found = {c.version for c in chosen}
    return tuple(str(v) for v in request.exact if v not in found)


def available_releases(
    files: Iterable[tuple[str, str, str | None, int | None]], interpreter: str, machine: str
) -> tuple[str, ...]:
    """Every public final release with a wheel for ``interpreter`` on ``machine`` (oldest
    first): what pip could install next to the extension from these files."""
    found: set[Version] = set()
    for filename, _url, _sha256, _size in files:
        try:
            name, version, _build, tags = parse_wheel_filename(filename)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if name != "torch" or version.local is not None or version.is_prerelease:
            continue
        if version.is_devrelease or version in found:
            continue
        if any(_fits(t, interpreter, machine) for t in tags):
            found.add(version)
    return tuple(str(v) for v in sorted(found))


# -- a build's claim: the torches its wheel states in Requires-Dist -------------------------------


@dataclass(frozen=True)
class RangeClaim:
    """What a wheel built against ``built`` may state after can-load ran against other
    releases: ``requirement`` admits the releases that passed and no release on the index that
    did not pass or was not checked (each shut out with ``!=``)."""

    built: str
    requirement: str  # torch==2.14.1, or torch>=2.12.1,<2.15 (with != exclusions)
    passed: tuple[str, ...]  # the releases that loaded it (the build's own torch included)
    failed: tuple[str, ...] = ()  # checked, and did not load (or could not be checked)
    unchecked: tuple[str, ...] = ()  # on the index inside the range, not checked: shut out

    @property
    def is_range(self) -> bool:
        """The claim admits more than the build's own release."""
        return not self.requirement.startswith("torch==")

    def to_json_dict(self) -> dict[str, object]:
        """The claim as the can-load document writes it."""
        return {
            "requirement": self.requirement,
            "built_against": self.built,
            "passed": list(self.passed),
            "failed": list(self.failed),
            "unchecked_excluded": list(self.unchecked),
        }


def range_claim(
    built: str, passed: Iterable[str], failed: Iterable[str], available: Iterable[str]
) -> RangeClaim:
    """The ``Requires-Dist`` of a wheel built against torch ``built`` that loads with the
    releases ``passed`` and not with ``failed`` (``available``: the releases on the index).

    Only what a check backed is claimed: ``>=`` the oldest release that passed, ``<`` the minor
    after the newest (a later patch release of a checked minor is admitted: ``matrix
    --recheck`` checks those when they appear), and ``!=`` every release in between that did
    not pass: failed, or on the index and never checked. Nothing but the build's own torch
    passed: the exact pin alone."""
    own = Version(built).public
    good = {Version(v) for v in passed} | {Version(own)}
    bad = {Version(v) for v in failed} - good
    ordered = tuple(str(v) for v in sorted(good))
    if len(good) == 1:
        return RangeClaim(own, f"torch=={own}", ordered, tuple(str(v) for v in sorted(bad)))
    low, high = min(good), max(good)
    upper = Version(f"{high.major}.{high.minor + 1}")
    inside = {Version(v) for v in available} | bad
    shut = sorted(v for v in inside if low <= v < upper and v not in good)
    unchecked = tuple(str(v) for v in shut if v not in bad)
    parts = [f">={low}", *(f"!={v}" for v in shut), f"<{upper}"]
    return RangeClaim(
        own, "torch" + ",".join(parts), ordered, tuple(str(v) for v in sorted(bad)), unchecked
    )
