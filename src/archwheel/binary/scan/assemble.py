"""Place what one binary's parsers found into its libraries: containers, entries, problems.

``assemble`` takes the parsers' outcomes (the layout of the file or archive, every container
scan, every raw cubin) and decides, in offset order, which containers are real (none inside an
accepted one's payload, none of random bytes outside a fatbin section), which section and unit
each one sits in, what runs past its section, which bytes of a fatbin section no container
explains, which raw cubins are counted, and which notes each library gets (at most
``bounds.MAX_PROBLEMS_PER_LIBRARY``). The compiled scan assembles the same way
(``_speedups.c``, "Assembly").
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter

from archwheel.binary.elf import FormatError, Section, debug_bytes
from archwheel.binary.fatbin import KNOWN_FLAGS, entry_from_raw
from archwheel.binary.layout import (
    FATBIN_SECTIONS,
    NO_SECTION,
    RAW_FATBIN_SECTION,
    FileLayout,
    Note,
    Unit,
)
from archwheel.binary.model import (
    Compression,
    FatbinContainer,
    FatbinEntry,
    LibraryInventory,
    Origin,
    Severity,
)
from archwheel.binary.rawcubin import RawCubin
from archwheel.binary.scan import bounds
from archwheel.binary.scan.containers import ContainerScan
from archwheel.binary.stream import ParserOutcome
from archwheel.facts.arch import CodeKind, Target, Variant
from archwheel.facts.versions import ComputeCapability

# Gaps inside a fatbin section larger than this are bytes no valid container explains.
ALIGNMENT_SLACK = 16


def assemble(
    label: str,
    kind: str,
    size: int,
    outcomes: dict[object, ParserOutcome],
    *,
    libraries: list[LibraryInventory],
    binary_notes: list[tuple[str | None, Note]],
    header_errors: list[tuple[int, str]],
) -> None:
    """Append the libraries of the binary ``label`` to ``libraries``, and the notes met to
    ``binary_notes`` (``(unit name or None, note)``), from its parsers' ``outcomes``;
    ``header_errors``: container magics whose header did not parse, (offset, message)."""
    layout_outcome = outcomes.pop("layout", None)
    layout: FileLayout
    if layout_outcome is None or layout_outcome.error is not None or layout_outcome.value is None:
        why = layout_outcome.error if layout_outcome else "its structure could not be read"
        binary_notes.append((None, Note(Severity.ERROR, f"layout unreadable: {why}")))
        layout = FileLayout(kind, (Unit("", 0, size, "unknown"),))
    else:
        layout = layout_outcome.value
    binary_notes.extend((None, n) for n in layout.problems)

    scans: list[ContainerScan] = []
    raw_cubins: list[RawCubin] = []
    for token, outcome in outcomes.items():
        if isinstance(token, tuple):
            if isinstance(outcome.value, RawCubin):
                raw_cubins.append(outcome.value)
            continue  # None: no cubin there; a read error: the bytes ended (not a cubin)
        if not isinstance(token, int):
            continue
        if isinstance(outcome.value, ContainerScan):
            scans.append(outcome.value)
        elif isinstance(outcome.error, FormatError):
            header_errors.append((token, str(outcome.error)))
        elif outcome.error is not None:
            message = f"internal error reading the container at {token:#x}: {outcome.error!r}"
            binary_notes.append((None, Note(Severity.ERROR, message)))
    scans.sort(key=lambda s: s.offset)

    per_unit: dict[str, list[FatbinEntry]] = {u.name: [] for u in layout.units}
    per_unit_containers: dict[str, list[FatbinContainer]] = {u.name: [] for u in layout.units}
    covered: dict[tuple[str, int], list[tuple[int, int]]] = {}
    unit_notes: dict[str, list[Note]] = {u.name: list(u.problems) for u in layout.units}
    accepted_end = -1
    accepted_spans: list[tuple[int, int]] = []
    unit: Unit | None = None
    section: Section | None = None
    for scan in scans:
        if scan.offset < accepted_end:
            continue  # inside an accepted container's payload: data, not a container
        # Containers follow on in one section: the last lookup answers most of them.
        if section is None or not section.offset <= scan.offset < section.end:
            unit = layout.unit_at(scan.offset)
            if unit is None:
                continue
            section = unit.section_at(scan.offset)
        elif unit is None:
            continue
        name = section.name if section else NO_SECTION
        meant = name in FATBIN_SECTIONS or name == RAW_FATBIN_SECTION
        if scan.error and not scan.headers and not meant:
            continue  # random bytes that happened to hold the magic
        notes = unit_notes[unit.name]
        limit = section.end if section else unit.end
        if scan.end > limit:
            notes.append(
                Note(
                    Severity.ERROR,
                    f"container at {scan.offset - unit.start:#x} in {name} declares "
                    f"{scan.end - scan.offset - 16} bytes of entries but only "
                    f"{max(0, limit - scan.offset - 16)} remain in the section",
                )
            )
        if scan.error and scan.error_at < limit:
            notes.append(Note(Severity.ERROR, f"in {name}: {_relative(scan.error, unit)}"))
        if scan.payload_errors:
            notes.extend(
                Note(Severity.ERROR, f"in {name}: {_relative(e, unit)}")
                for e in scan.payload_errors
            )
        shift = unit.start
        kept = tuple(
            [
                entry_from_raw(h, name, shift)
                for h in scan.headers
                if h[0] + h[1][2] + h[1][3] <= limit  # the entry's end
            ]
        )
        per_unit[unit.name] += kept
        per_unit_containers[unit.name].append(
            FatbinContainer(name, scan.offset - unit.start, scan.end - scan.offset, kept)
        )
        accepted_end = min(scan.end, limit)
        accepted_spans.append((scan.offset, accepted_end))
        if section is not None:
            covered.setdefault((unit.name, section.offset), []).append((scan.offset, accepted_end))

    # Whether an offset lies inside some container: the furthest end of those starting before.
    scan_starts = [s.offset for s in scans] if header_errors else []
    furthest = list(itertools.accumulate((s.end for s in scans), max)) if header_errors else []
    for offset, message in sorted(header_errors):
        i = bisect.bisect_right(scan_starts, offset) - 1
        if offset < accepted_end and i >= 0 and offset < furthest[i]:
            continue
        unit = layout.unit_at(offset)
        section = unit.section_at(offset) if unit else None
        if unit is not None and section is not None and section.name in FATBIN_SECTIONS:
            notes = unit_notes[unit.name]
            notes.append(Note(Severity.ERROR, f"in {section.name}: {_relative(message, unit)}"))

    _place_raw_cubins(raw_cubins, accepted_spans, layout, per_unit, unit_notes)

    for unit in layout.units:
        notes = unit_notes[unit.name]
        for section in unit.sections:
            if section.name not in FATBIN_SECTIONS and section.name != RAW_FATBIN_SECTION:
                continue
            gap = _uncovered(section.offset, section.end, covered.get((unit.name, section.offset)))
            if gap > ALIGNMENT_SLACK:
                notes.append(
                    Note(
                        Severity.ERROR,
                        f"{gap} bytes of {section.name} are not inside any valid fatbin "
                        "container (damaged container header?)",
                    )
                )
        entries = per_unit[unit.name]
        if unit.file_kind == "cubin" and unit.cubin_sm:
            entries.append(_cubin_entry(unit))
            notes.append(
                Note(
                    Severity.WARNING,
                    "standalone cubin: its ELF header does not record an 'a'/'f' suffix, "
                    f"reported as sm_{unit.cubin_sm}",
                )
            )
        unknown = Counter(e.flags & ~KNOWN_FLAGS for e in entries if e.flags & ~KNOWN_FLAGS)
        for bits, count in sorted(unknown.items()):
            notes.append(
                Note(
                    Severity.ERROR,
                    f"unknown fatbin flag bits {bits:#x} on {count} entries: reported as read, "
                    "but their meaning is unknown to this archwheel version",
                )
            )
        path = label if not unit.name else f"{label}({unit.name})"
        libraries.append(
            LibraryInventory(
                path=path,
                file_kind=unit.file_kind,
                size=unit.end - unit.start,
                entries=tuple(sorted(entries, key=lambda e: e.offset)),
                containers=tuple(per_unit_containers[unit.name]),
                debug_bytes=debug_bytes(unit.sections),
            )
        )
        binary_notes.extend((unit.name or None, n) for n in _limit(notes))


def _place_raw_cubins(
    found: list[RawCubin],
    spans: list[tuple[int, int]],
    layout: FileLayout,
    per_unit: dict[str, list[FatbinEntry]],
    unit_notes: dict[str, list[Note]],
) -> None:
    """Raw cubins become entries of their unit, unless they are not raw at all.

    Skipped: an ELF header at a unit's start (the file or archive member itself), one inside a
    fatbin container (an uncompressed entry's payload: already counted as that entry), one
    inside a raw cubin already taken. A damaged EM_CUDA header, or a cubin that runs past its
    section, is an error of the unit and is not counted.
    """
    if not found:
        return
    spans = sorted(spans)
    starts = [a for a, _ in spans]
    furthest = list(itertools.accumulate((b for _, b in spans), max))
    taken_end = -1
    from archwheel.facts.catalog import load_facts  # raw cubins only: most binaries have none

    suffixed = load_facts().suffixed_capabilities
    unsure: dict[str, list[str]] = {}  # unit -> archs whose 'a'/'f' suffix is unknown
    for cubin in sorted(found, key=lambda c: c.offset):
        unit = layout.unit_at(cubin.offset)
        if unit is None or cubin.offset == unit.start or cubin.offset < taken_end:
            continue
        i = bisect.bisect_right(starts, cubin.offset) - 1
        if i >= 0 and cubin.offset < furthest[i]:
            continue
        section = unit.section_at(cubin.offset)
        name = section.name if section else NO_SECTION
        where = f"raw cubin at {cubin.offset - unit.start:#x} in {name}"
        notes = unit_notes[unit.name]
        if cubin.error:
            notes.append(Note(Severity.ERROR, f"{where}: damaged ELF cubin ({cubin.error})"))
            continue
        limit = section.end if section else unit.end
        if cubin.offset + cubin.size > limit:
            notes.append(
                Note(
                    Severity.ERROR,
                    f"{where} spans {cubin.size} bytes but only "
                    f"{limit - cubin.offset} remain in the section: truncated, not counted",
                )
            )
            continue
        taken_end = cubin.offset + cubin.size
        cc = ComputeCapability.from_number(cubin.sm)
        if not cubin.suffix_known and cc in suffixed:
            unsure.setdefault(unit.name, []).append(f"sm_{cubin.sm}")
        per_unit[unit.name].append(
            FatbinEntry(
                section=name,
                offset=cubin.offset - unit.start,
                kind=CodeKind.SASS,
                target=Target(cc, Variant(cubin.suffix)),
                compression=Compression.NONE,
                stored_bytes=cubin.size,
                uncompressed_bytes=cubin.size,
                origin=Origin.RAW_CUBIN,
            )
        )
    for name, archs in unsure.items():
        shown = ", ".join(sorted(set(archs), key=lambda a: int(a[3:])))
        unit_notes[name].append(
            Note(
                Severity.WARNING,
                f"{len(archs)} raw cubins ({shown}) record no 'a'/'f' suffix (neither e_flags "
                "nor a ptxas note says it): reported plain",
            )
        )


def _relative(message: str, unit: Unit) -> str:
    return message if not unit.start else f"{message} (offsets in the archive)"


def _cubin_entry(unit: Unit) -> FatbinEntry:
    assert unit.cubin_sm is not None
    size = unit.end - unit.start
    return FatbinEntry(
        section="(cubin)",
        offset=0,
        kind=CodeKind.SASS,
        target=Target(ComputeCapability.from_number(unit.cubin_sm), Variant.PLAIN),
        compression=Compression.NONE,
        stored_bytes=size,
        uncompressed_bytes=size,
        origin=Origin.CUBIN_FILE,
    )


def _uncovered(start: int, end: int, spans: list[tuple[int, int]] | None) -> int:
    covered = 0
    cursor = start
    for span_start, span_end in sorted(spans or []):
        lo, hi = max(span_start, cursor), min(span_end, end)
        if hi > lo:
            covered += hi - lo
            cursor = hi
    return (end - start) - covered


def _limit(notes: list[Note]) -> list[Note]:
    unique = list(dict.fromkeys(notes))
    if len(unique) <= bounds.MAX_PROBLEMS_PER_LIBRARY:
        return unique
    rest = len(unique) - bounds.MAX_PROBLEMS_PER_LIBRARY
    severity = (
        Severity.ERROR if any(n.severity is Severity.ERROR for n in unique) else (Severity.WARNING)
    )
    return [
        *unique[: bounds.MAX_PROBLEMS_PER_LIBRARY],
        Note(severity, f"... and {rest} more problems"),
    ]
