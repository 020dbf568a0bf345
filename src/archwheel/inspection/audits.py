"""The audit: scan each input (a wheel, a file, a directory, an installed distribution) and
judge it against a requested arch list (``archwheel audit``, ``archwheel.audit``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from email.parser import HeaderParser
from pathlib import Path

from archwheel.binary.model import InputInventory, Problem
from archwheel.binary.scan.inputs import ProgressCallback, scan_installed, scan_path
from archwheel.binary.wheelmeta import MAX_METADATA_BYTES
from archwheel.binary.zipread import MemberError, WheelReader
from archwheel.effects.files import ZIP_MEMBER_ERRORS
from archwheel.errors import ArchwheelError
from archwheel.facts.arch import ArchList
from archwheel.verdicts.audit import AuditReport, audit
from archwheel.verdicts.wheelname import HINT as WHEEL_NAME_HINT
from archwheel.verdicts.wheelname import name_version_disagreement

METADATA_MEMBER = ".dist-info/METADATA"
# What reading the METADATA may meet: left to the scan, which reports the archive itself.
_UNREAD: tuple[type[Exception], ...] = (ArchwheelError, MemberError, *ZIP_MEMBER_ERRORS)


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
        said = _name_and_version(path)
    except _UNREAD:
        return inventory
    disagreement = name_version_disagreement(path.name, *said) if said else None
    if disagreement is None:
        return inventory
    problem = Problem(inventory.source, f"{disagreement} ({WHEEL_NAME_HINT})")
    return replace(inventory, problems=(*inventory.problems, problem))


def _name_and_version(path: Path) -> tuple[str, str] | None:
    """``Name`` and ``Version`` of the wheel's one ``.dist-info/METADATA`` (None: none, or
    several). Read through the scan's own zip reader: its compiled directory parse costs about
    35 ms on torch 2.14.1's 12261 members, where ``zipfile`` and the full metadata took 234 ms."""
    reader = WheelReader(path)
    found = [
        m for m in reader.members if m.name.count("/") == 1 and m.name.endswith(METADATA_MEMBER)
    ]
    if len(found) != 1 or found[0].size > MAX_METADATA_BYTES:
        return None
    data = b"".join(reader.chunks(found[0]))
    headers = HeaderParser().parsestr(data.decode("utf-8", "replace"), headersonly=True)
    name, version = headers.get("Name"), headers.get("Version")
    return (name.strip(), version.strip()) if name and version else None
