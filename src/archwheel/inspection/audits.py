"""The audit: scan each input (a wheel, a file, a directory, an installed distribution) and
judge it against a requested arch list (``archwheel audit``, ``archwheel.audit``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from archwheel.binary.model import InputInventory, Problem
from archwheel.binary.scan.inputs import ProgressCallback, scan_installed, scan_path
from archwheel.binary.wheelmeta import read_wheel_metadata
from archwheel.errors import ArchwheelError
from archwheel.facts.arch import ArchList
from archwheel.verdicts.audit import AuditReport, audit
from archwheel.verdicts.wheelname import HINT as WHEEL_NAME_HINT
from archwheel.verdicts.wheelname import name_version_disagreement


def audit_inputs(
    paths: Sequence[Path | str] = (),
    *,
    installed: Sequence[str] = (),
    interpreter: str | None = None,
    expect: ArchList | None = None,
    workers: int | None = None,
    deep: bool = False,
    all_members: bool = False,
    on_progress: ProgressCallback | None = None,
) -> list[AuditReport]:
    """One report per input, paths first, then installed distributions (in ``interpreter``'s
    environment, default this one), each judged against ``expect`` (None: inventory only).

    Every input is scanned before any is judged; an input that cannot be read at all is an
    ``InputError`` (a missing file, a FIFO, not a supported kind), one read in part a report
    that says so (``complete`` false)."""
    inventories: list[InputInventory] = []
    for path in paths:
        inventory = scan_path(
            path, on_progress=on_progress, workers=workers, all_members=all_members, deep=deep
        )
        inventories.append(_named_as_its_file(inventory, Path(path)))
    for dist in installed:
        inventories.append(scan_installed(dist, interpreter, on_progress=on_progress, deep=deep))
    return [audit(inventory, expect) for inventory in inventories]


def _named_as_its_file(inventory: InputInventory, path: Path) -> InputInventory:
    """``inventory``, with an error problem when the wheel's METADATA names another project or
    version than its file name (pip could not install it from an index: ``publish`` refuses
    it, ``manifest`` too). A wheel without readable metadata is the scan's business."""
    if inventory.input_kind != "wheel":
        return inventory
    try:
        disagreement = name_version_disagreement(read_wheel_metadata(path))
    except ArchwheelError:
        return inventory
    if disagreement is None:
        return inventory
    problem = Problem(inventory.source, f"{disagreement} ({WHEEL_NAME_HINT})")
    return replace(inventory, problems=(*inventory.problems, problem))
