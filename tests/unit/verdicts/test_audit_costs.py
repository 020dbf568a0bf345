"""What each image arch costs across an input (``AuditReport.costs``): counted by the identity
of the entries' kind and target objects, then merged by value, it must give what counting by
value gives, also where equal targets are distinct objects."""

from __future__ import annotations

import copy
import dataclasses
from collections import defaultdict
from pathlib import Path

from archwheel.binary.model import InputInventory, LibraryInventory
from archwheel.binary.scan.inputs import scan_path
from archwheel.facts.arch import CodeKind, Target
from archwheel.verdicts.audit import ArchCost, audit
from tests.support.builders import Entry, container, elf64, write_zip


def _by_value(inventory: InputInventory) -> list[tuple[object, ...]]:
    """The same table, counted by value (the plain way)."""
    libs: dict[tuple[CodeKind, Target], set[str]] = defaultdict(set)
    totals: dict[tuple[CodeKind, Target], list[int]] = defaultdict(lambda: [0, 0, 0])
    for lib in inventory.libraries:
        for e in lib.entries:
            key = (e.kind, e.target)
            libs[key].add(lib.path)
            totals[key][0] += 1
            totals[key][1] += e.stored_bytes
            totals[key][2] += e.uncompressed_bytes
    return sorted((k[0].value, str(k[1]), len(libs[k]), *totals[k]) for k in libs)


def _table(rows: list[ArchCost]) -> list[tuple[object, ...]]:
    return sorted(
        (r.kind.value, str(r.target), r.libraries, r.entries, r.stored_bytes, r.uncompressed_bytes)
        for r in rows
    )


def _inventory(tmp_path: Path) -> InputInventory:
    def lib(*sms: int) -> bytes:
        return elf64([(".nv_fatbin", container(*(Entry(sm=sm) for sm in sms)))])

    members = [
        ("pkg/liba.so", lib(80, 90, 90)),
        ("pkg/libb.so", lib(90, 100)),
        ("pkg/libc.so", lib(80)),
    ]
    return scan_path(write_zip(tmp_path / "x-1.0-py3-none-any.whl", members))


def test_costs_count_as_by_value(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path)
    rows = audit(inventory, None).costs()
    assert _table(rows) == _by_value(inventory)
    assert {r.entries for r in rows} != {1}  # some arch is in several entries


def test_equal_targets_as_distinct_objects_are_one_arch(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path)
    # Each library's entries with targets of their own (equal values, other objects), and one
    # library twice over: an arch's libraries must still be counted once each.
    libraries: list[LibraryInventory] = [copy.deepcopy(lib) for lib in inventory.libraries]
    libraries.append(dataclasses.replace(copy.deepcopy(libraries[0]), path="pkg/libd.so"))
    mixed = dataclasses.replace(inventory, libraries=(*inventory.libraries, *libraries))
    ids = {id(e.target) for lib in mixed.libraries for e in lib.entries}
    values = {e.target for lib in mixed.libraries for e in lib.entries}
    assert len(ids) > len(values)  # the case: equal targets, distinct objects
    assert _table(audit(mixed, None).costs()) == _by_value(mixed)
