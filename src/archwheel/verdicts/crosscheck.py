"""Cross-check archwheel's inventory against cuobjdump's (``archwheel audit --cross-check``).

The unit compared is the number of images per (library, section, kind, arch). Both sides are
first brought to what cuobjdump can see:

- a family-specific cubin is listed by cuobjdump without its ``f`` (``sm_103f`` as ``sm_103``),
  so SASS archs are compared with the ``f`` stripped, and each row names archwheel's archs, which
  restore it; PTX keeps its suffix on both sides (cuobjdump prints ``sm_120f.ptx``);
- cuobjdump reads only ``.nv_fatbin`` and ``__nv_relfatbin`` (and files that are themselves a
  fatbin or cubin) and lists no LTO-IR: such images are reported as *invisible to cuobjdump*,
  never as disagreements;
- without ``-all`` cuobjdump skips ``__nv_relfatbin``: the oracle always lists with ``-all`` and
  uses the plain listing only to attribute images to sections.

An empty list of disagreements (and no library cuobjdump failed on) means the two agree.

This module is the pure comparison; running cuobjdump over an input is ``archwheel.crosscheck``.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from archwheel.binary.cuobjdump import (
    CUBIN_SECTION,
    EXECUTABLE_FATBIN,
    RAW_FATBIN_SECTION,
    RELOCATABLE_FATBIN,
    ImageKey,
)
from archwheel.binary.model import FatbinEntry
from archwheel.exit_codes import EXIT_OK, EXIT_TOOL, EXIT_VERDICT_FAILED
from archwheel.facts.arch import CodeKind, Target, Variant

CROSSCHECK_SCHEMA_VERSION = 1

VISIBLE_SECTIONS = frozenset(
    {EXECUTABLE_FATBIN, RELOCATABLE_FATBIN, RAW_FATBIN_SECTION, CUBIN_SECTION}
)
"""Where cuobjdump looks: the two fatbin sections, and files that are a fatbin or a cubin."""

_ARCHIVE_MEMBER = re.compile(r"^(?P<file>.+)\((?P<member>[^()/]+)\)$")
_KIND_ORDER = {CodeKind.SASS: 0, CodeKind.PTX: 1, CodeKind.LTOIR: 2}


# -- results --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CountRow:
    """Image counts of one (library, section, kind, arch) on both sides.

    ``arch`` is the arch as cuobjdump can name it (a SASS ``f`` stripped); ``archwheel_archs``
    are archwheel's own names for the images counted, which restore the ``f``.
    """

    library: str
    section: str
    kind: CodeKind
    arch: str
    archwheel: int
    cuobjdump: int
    archwheel_archs: tuple[str, ...] = ()

    @property
    def agrees(self) -> bool:
        """archwheel and cuobjdump count the same number of images here."""
        return self.archwheel == self.cuobjdump

    def one_line(self) -> str:
        """The row for the report: library, section, arch and both counts (with the archs archwheel
        restored, where they differ)."""
        restored = ""
        if self.archwheel_archs and self.archwheel_archs != (self.arch,):
            restored = f" (archwheel: {', '.join(self.archwheel_archs)})"
        return (
            f"{self.library} [{self.section}] {self.arch}{restored}: archwheel {self.archwheel}, "
            f"cuobjdump {self.cuobjdump}"
        )


@dataclass(frozen=True)
class InvisibleRow:
    """Images archwheel found where cuobjdump cannot look (not a disagreement)."""

    library: str
    section: str
    kind: CodeKind
    arch: str
    count: int
    reason: str

    def one_line(self) -> str:
        """The row for the report: where the images are, how many, and why cuobjdump cannot see
        them."""
        return f"{self.library} [{self.section}] {self.arch} x{self.count}: {self.reason}"


@dataclass(frozen=True)
class LibraryFailure:
    """A file cuobjdump could not be run on or could not read: it was not cross-checked."""

    library: str
    message: str

    def one_line(self) -> str:
        """The library and why cuobjdump could not read it."""
        return f"{self.library}: {self.message}"


@dataclass(frozen=True)
class CrossCheckReport:
    """archwheel's scan of one input compared, image count by image count, with what cuobjdump
    lists; rows cuobjdump cannot see and files it could not read are kept apart."""

    source: str
    tool: str  # the cuobjdump used and its version
    files_checked: int
    rows: tuple[CountRow, ...]
    invisible: tuple[InvisibleRow, ...] = ()
    failures: tuple[LibraryFailure, ...] = ()

    @property
    def disagreements(self) -> tuple[CountRow, ...]:
        """The rows where the two counts differ: what the cross-check exists to find."""
        return tuple(r for r in self.rows if not r.agrees)

    @property
    def ok(self) -> bool:
        """Everything cuobjdump can see agrees, and it could read every file."""
        return not self.disagreements and not self.failures

    @property
    def exit_code(self) -> int:
        """0 when ``ok``; 1 with a disagreement; 4 when cuobjdump failed on a file (only)."""
        if self.disagreements:
            return EXIT_VERDICT_FAILED
        return EXIT_TOOL if self.failures else EXIT_OK

    def lines(self, *, quiet: bool = False) -> list[str]:
        """The human report: a summary line (unless quiet), then one line per finding."""
        images = sum(r.cuobjdump for r in self.rows)
        hidden = sum(r.count for r in self.invisible)
        out: list[str] = []
        if self.disagreements:
            out.append(
                f"cross-check of {self.source}: {len(self.disagreements)} disagreements "
                f"with {self.tool}"
            )
        elif not quiet:
            out.append(
                f"cross-check of {self.source}: {self.tool} agrees on {images} images in "
                f"{self.files_checked} files"
                + (f"; {hidden} images are invisible to it" if hidden else "")
            )
        out.extend(f"  disagrees: {r.one_line()}" for r in self.disagreements)
        out.extend(f"  not checked: {f.one_line()}" for f in self.failures)
        if not quiet:
            out.extend(f"  {r.one_line()}" for r in self.invisible)
        return out

    def to_json_dict(self) -> dict[str, Any]:
        """The cross-check JSON document: the tool used, the disagreements first, then every row."""

        def row(r: CountRow) -> dict[str, Any]:
            return {
                **_place(r), "archwheel": r.archwheel, "cuobjdump": r.cuobjdump,
                "archwheel_archs": list(r.archwheel_archs),
            }  # fmt: skip

        def invisible(r: InvisibleRow) -> dict[str, Any]:
            return {**_place(r), "count": r.count, "reason": r.reason}

        return {
            "schema_version": CROSSCHECK_SCHEMA_VERSION,
            "source": self.source,
            "tool": self.tool,
            "ok": self.ok,
            "files_checked": self.files_checked,
            "disagreements": [row(r) for r in self.disagreements],
            "invisible": [invisible(r) for r in self.invisible],
            "failures": [{"library": f.library, "message": f.message} for f in self.failures],
            "rows": [row(r) for r in self.rows],
        }


def _place(r: CountRow | InvisibleRow) -> dict[str, Any]:
    """Where a row's images are: library, section, kind and arch."""
    return {"library": r.library, "section": r.section, "kind": r.kind.value, "arch": r.arch}


def _place_order(r: CountRow | InvisibleRow) -> tuple[str, str, int, tuple[int, str]]:
    """Rows by library, section, kind (SASS, PTX, LTO-IR), then arch number."""
    return (r.library, r.section, _KIND_ORDER[r.kind], _arch_order(r.arch))


# -- the comparison (pure) ------------------------------------------------------------------------


def visible_arch(kind: CodeKind, target: Target) -> str:
    """The arch as cuobjdump names it: a family-specific cubin loses its ``f``."""
    if kind is CodeKind.SASS and target.variant is Variant.FAMILY_SPECIFIC:
        return Target(target.cc).name(kind)
    return target.name(kind)


def invisible_reason(entry: FatbinEntry) -> str | None:
    """Why cuobjdump cannot list ``entry``, or None when it can."""
    if entry.kind is CodeKind.LTOIR:
        return "invisible to cuobjdump: it does not list LTO-IR images"
    if entry.section not in VISIBLE_SECTIONS:
        return (
            f"invisible to cuobjdump: it reads only {EXECUTABLE_FATBIN} and "
            f"{RELOCATABLE_FATBIN}, not {entry.section}"
        )
    return None


def compare_library(
    library: str,
    entries: Iterable[FatbinEntry],
    seen: Mapping[ImageKey, int],
) -> tuple[list[CountRow], list[InvisibleRow]]:
    """Compare archwheel's entries of one library with cuobjdump's counts for it."""
    ours: Counter[ImageKey] = Counter()
    names: dict[ImageKey, set[str]] = defaultdict(set)
    hidden: Counter[tuple[str, CodeKind, str, str]] = Counter()
    for e in entries:
        reason = invisible_reason(e)
        if reason is not None:
            hidden[(e.section, e.kind, e.arch, reason)] += 1
            continue
        key = (e.section, e.kind, visible_arch(e.kind, e.target))
        ours[key] += 1
        names[key].add(e.arch)
    rows = [
        CountRow(
            library=library,
            section=key[0],
            kind=key[1],
            arch=key[2],
            archwheel=ours.get(key, 0),
            cuobjdump=seen.get(key, 0),
            archwheel_archs=tuple(sorted(names.get(key, ()))),
        )
        for key in set(ours) | {k for k, n in seen.items() if n}
    ]
    invisible = [
        InvisibleRow(library, section, kind, arch, count, reason)
        for (section, kind, arch, reason), count in hidden.items()
    ]
    rows.sort(key=_place_order)
    invisible.sort(key=_place_order)
    return rows, invisible


def _arch_order(arch: str) -> tuple[int, str]:
    match = re.search(r"_([0-9]+)([af]?)$", arch)
    return (int(match.group(1)), match.group(2)) if match else (0, arch)


def split_library_path(path: str) -> tuple[str, str | None]:
    """``torch/lib/libx.a(k.o)`` -> (``torch/lib/libx.a``, ``k.o``); others -> (path, None)."""
    match = _ARCHIVE_MEMBER.match(path)
    if match:
        return match.group("file"), match.group("member")
    return path, None


def worst_exit_code(codes: Iterable[int]) -> int:
    """The exit code of several cross-checks: 1 with any disagreement, else 4 with any failure."""
    found = set(codes)
    if EXIT_VERDICT_FAILED in found:
        return EXIT_VERDICT_FAILED
    return EXIT_TOOL if EXIT_TOOL in found else EXIT_OK
