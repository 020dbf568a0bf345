"""What runs that were killed left on this machine, found by owner (``effects.owner``).

Containers carry an ``archwheel.owner`` label; temporary folders an ``<folder>.owner`` record.
A leftover is one whose owner is dead: a process of this host that no longer runs (pid and
start time), or one of this host's earlier boots. A live run's, another host's, and anything
without a record are never listed, so ``archwheel clean`` can only remove what archwheel made.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from archwheel.effects.engine import ContainerEngine
from archwheel.effects.owner import OWNER_SUFFIX, dead_folders

Kind = Literal["container", "folder"]


@dataclass(frozen=True)
class Leftover:
    """One thing a dead run left: a container (by name) or a temporary folder (by path)."""

    kind: Kind
    name: str
    owner: str  # "pid N on HOST", or "" when the record names none
    removed: bool = False

    def to_json_dict(self) -> dict[str, object]:
        """The leftover as one entry of ``clean``'s JSON document."""
        return {"kind": self.kind, "name": self.name, "owner": self.owner, "removed": self.removed}


def find_leftovers(
    engine: ContainerEngine | None, temp_roots: Sequence[Path | None] = (None,)
) -> list[Leftover]:
    """The dead runs' containers (none when ``engine`` is None) and temporary folders under
    each of ``temp_roots`` (None: the system's temporary folder)."""
    found: list[Leftover] = []
    if engine is not None:
        for container in engine.labelled_containers():
            if container.state == "dead":
                owner = container.owner.describe() if container.owner else ""
                found.append(Leftover("container", container.name, owner))
    seen: set[Path] = set()
    for root in temp_roots:
        for record in dead_folders(root):
            if record.folder in seen:
                continue
            seen.add(record.folder)
            owner = record.owner.describe() if record.owner else ""
            found.append(Leftover("folder", str(record.folder), owner))
    return found


def remove_leftovers(
    engine: ContainerEngine | None, leftovers: Sequence[Leftover]
) -> list[Leftover]:
    """Remove each leftover; returns them with ``removed`` set (False where removal failed)."""
    gone: set[str] = set()
    containers = [item for item in leftovers if item.kind == "container"]
    if engine is not None and containers:
        for item in containers:
            engine.remove_container(item.name)
        still = {c.name for c in engine.labelled_containers()}
        gone.update(item.name for item in containers if item.name not in still)
    for item in leftovers:
        if item.kind == "folder":
            folder = Path(item.name)
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                folder.with_name(folder.name + OWNER_SUFFIX).unlink(missing_ok=True)
                gone.add(item.name)
    return [Leftover(i.kind, i.name, i.owner, removed=i.name in gone) for i in leftovers]
