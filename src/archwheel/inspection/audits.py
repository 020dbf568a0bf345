"""The audit: scan each input (a wheel, a file, a directory, an installed distribution) and
judge it against a requested arch list (``archwheel audit``, ``archwheel.audit``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from archwheel.binary.model import InputInventory, Problem
from archwheel.binary.scan.inputs import ProgressCallback, scan_installed, scan_path
from archwheel.binary.zipmember import MemberError
from archwheel.binary.zipread import WheelReader
from archwheel.effects.files import ZIP_MEMBER_ERRORS
from archwheel.errors import ArchwheelError
from archwheel.verdicts.wheelname import HINT as WHEEL_NAME_HINT
from archwheel.verdicts.wheelname import name_version_disagreement

if TYPE_CHECKING:
    from archwheel.facts.arch import ArchList
    from archwheel.verdicts.audit import AuditReport

# What the scan needs is imported above; the judging (verdicts, the facts, packaging)
# is imported while the scan's workers run (``_Meanwhile``): an audit of torch starts its
# workers about 40 ms sooner, and what it imports then costs no core that would sit idle.

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
    while_scanning: Callable[[], None] | None = None,
) -> list[AuditReport]:
    """One report per input, paths first, then installed distributions (in ``interpreter``'s
    environment, default this one), each judged against ``expect`` (None: inventory only).

    Every input is scanned before any is judged; an input that cannot be read at all is an
    ``InputError`` (a missing file, a FIFO, not a supported kind), one read in part a report
    that says so (``complete`` false). ``while_scanning``, the caller's work that needs no
    report (the command line imports its renderer there), is called once: while the first
    wheel's worker processes scan, else after the scans."""
    meanwhile = _Meanwhile(while_scanning)
    inventories: list[InputInventory] = []
    for path in paths:
        said: list[Said] = []

        def read_metadata(reader: WheelReader, said: list[Said] = said) -> None:
            said.append(_name_and_version_or_none(reader))
            meanwhile()

        inventory = scan_path(
            path,
            on_progress=on_progress,
            workers=workers,
            all_members=all_members,
            deep=deep,
            while_waiting=read_metadata,
        )
        if inventory.input_kind == "wheel":
            found = said[0] if said else _name_and_version_or_none(Path(path))
            inventory = _named_as_its_file(inventory, Path(path), found)
        inventories.append(inventory)
    for dist in installed:
        inventories.append(scan_installed(dist, interpreter, on_progress=on_progress, deep=deep))
    meanwhile()
    from archwheel.verdicts.audit import audit

    return [audit(inventory, expect) for inventory in inventories]


class _Meanwhile:
    """What the audit does while a scan's workers run, once: import the judging and load the
    facts it reads, then the caller's own ``while_scanning``."""

    def __init__(self, caller: Callable[[], None] | None) -> None:
        self._caller = caller
        self._done = False

    def __call__(self) -> None:
        if self._done:
            return
        self._done = True
        from archwheel.facts.catalog import load_facts

        importlib.import_module("archwheel.verdicts.audit")  # imported now, used after the scan
        load_facts()
        if self._caller is not None:
            self._caller()


def _named_as_its_file(inventory: InputInventory, path: Path, said: Said) -> InputInventory:
    """``inventory``, with an error problem when the wheel's METADATA (``said``: its name and
    version) names another project or version than its file name (pip could not install it
    from an index: ``publish`` refuses it, ``manifest`` too), or cannot be read (``said``: why,
    one line: not UTF-8, over ``MAX_METADATA_BYTES``, no ``Name``). A wheel without one
    METADATA is the scan's business."""
    if isinstance(said, str):
        problem = Problem(inventory.source, said)
        return replace(inventory, problems=(*inventory.problems, problem))
    disagreement = name_version_disagreement(path.name, *said) if said else None
    if disagreement is None:
        return inventory
    problem = Problem(inventory.source, f"{disagreement} ({WHEEL_NAME_HINT})")
    return replace(inventory, problems=(*inventory.problems, problem))


# What the wheel's METADATA says: (Name, Version); why it cannot be read (one line); or None
# (no single METADATA: the scan says so)
Said = tuple[str, str] | str | None


def _name_and_version_or_none(wheel: Path | WheelReader) -> Said:
    """``_name_and_version``, None where the archive cannot be read."""
    try:
        return _name_and_version(wheel if isinstance(wheel, WheelReader) else WheelReader(wheel))
    except _UNREAD:
        return None


def _name_and_version(reader: WheelReader) -> Said:
    """``Name`` and ``Version`` of the wheel's one ``.dist-info/METADATA`` (None: none, or
    several), or why it cannot be read: over ``MAX_METADATA_BYTES``, not UTF-8 (a UTF-16 one
    named so: pip reads METADATA as UTF-8), without a ``Name`` or a ``Version``. Read through
    the scan's own zip reader, whose directory the scan has read already (torch 2.14.1's 12261
    members: about 12 ms of compiled parse; ``zipfile`` and the full metadata took 234 ms).
    Read as pip reads it (``binary.coremetadata``)."""
    from archwheel.binary.coremetadata import parse_core_metadata
    from archwheel.binary.wheelmeta import MAX_METADATA_BYTES

    found = [
        m for m in reader.members if m.name.count("/") == 1 and m.name.endswith(METADATA_MEMBER)
    ]
    if len(found) != 1:
        return None
    unread = f"{found[0].name} not read"
    if found[0].size > MAX_METADATA_BYTES:
        return f"{unread}: {found[0].size} bytes, over the bound of {MAX_METADATA_BYTES}"
    data = b"".join(reader.chunks(found[0]))
    start = data[:64]
    if data[:2] in (b"\xff\xfe", b"\xfe\xff") or (
        len(start) >= 2
        and b"\x00" in start
        and not (start[0::2].strip(b"\x00") and start[1::2].strip(b"\x00"))
    ):
        return f"{unread}: UTF-16 text (a METADATA is UTF-8: pip cannot read this one)"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"{unread}: not UTF-8 text (byte {exc.start}; pip reads METADATA as UTF-8)"
    headers = parse_core_metadata(text)
    name, version = headers.get("Name"), headers.get("Version")
    if not (name and name.strip()) or not (version and version.strip()):
        missing = " and ".join(
            k for k, v in (("Name", name), ("Version", version)) if not v or not v.strip()
        )
        return f"{found[0].name} has no {missing}: pip cannot install this wheel"
    return (name.strip(), version.strip())
