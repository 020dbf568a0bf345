"""Who made a container or a temporary folder, and whether that run is still alive.

A run that is killed (SIGKILL, a CI job's timeout, an OOM kill, a machine that loses power)
cannot remove what it made. So everything archwheel makes that outlives a ``finally`` block
carries its maker: containers a ``archwheel.owner`` label, temporary folders a marker file
beside them (``<folder>.owner``). The next run, and ``archwheel clean``, remove what a dead run
made and leave everything else alone: a live run's, another machine's (a shared engine), and
whatever has no owner record (archwheel did not make it, or an older archwheel did).

An owner is ``HOST:BOOT:PID:START``: the host name, the kernel's boot id
(``/proc/sys/kernel/random/boot_id``), the process id and the process's start time in clock
ticks since boot (field 22 of ``/proc/PID/stat``). The pid alone is not enough (pids are
reused); pid and start time on the same boot name one process. A record from this host with
another boot id is dead (the machine restarted); one from another host is never judged.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

OWNER_LABEL = "archwheel.owner"
OWNER_SUFFIX = ".owner"
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")

Liveness = Literal["alive", "dead", "unknown"]


@dataclass(frozen=True)
class Owner:
    """One process on one boot of one host."""

    host: str
    boot: str
    pid: int
    start: int

    def token(self) -> str:
        """``HOST:BOOT:PID:START``, as container labels and owner records store it."""
        return f"{self.host}:{self.boot}:{self.pid}:{self.start}"

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        """The owner a token names; None for anything else (never an exception)."""
        parts = text.strip().rsplit(":", 3)
        if len(parts) != 4 or not all(parts[:2]):
            return None
        host, boot, pid, start = parts
        if not (pid.isascii() and pid.isdigit() and start.isascii() and start.isdigit()):
            return None
        return cls(host, boot, int(pid), int(start))

    def describe(self) -> str:
        """``pid N on HOST``, for the messages that name a leftover's maker."""
        return f"pid {self.pid} on {self.host}"


def _boot_id() -> str:
    try:
        return _BOOT_ID.read_text().strip() or "unknown-boot"
    except OSError:
        return "unknown-boot"


def _start_time(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot; None when there is no such process."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces and ')'.
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])  # field 22 overall
    except (IndexError, ValueError):
        return None


def current_owner() -> Owner:
    """This process."""
    import socket  # a lock's owner only: most commands take none

    pid = os.getpid()
    return Owner(socket.gethostname(), _boot_id(), pid, _start_time(pid) or 0)


def liveness(owner: Owner, *, here: Owner | None = None) -> Liveness:
    """``alive``, ``dead`` or ``unknown`` (another host: not ours to judge)."""
    here = here or current_owner()
    if owner.host != here.host:
        return "unknown"
    if owner.boot != here.boot:
        return "dead" if here.boot != "unknown-boot" else "unknown"
    start = _start_time(owner.pid)
    if start is None:
        return "dead"
    return "alive" if start == owner.start else "dead"


def mark_folder(folder: Path, owner: Owner | None = None) -> Path:
    """Write ``folder``'s owner record beside it; returns the record's path."""
    record = folder.with_name(folder.name + OWNER_SUFFIX)
    record.write_text((owner or current_owner()).token() + "\n")
    return record


def unmark_folder(folder: Path) -> None:
    """Remove ``folder``'s owner record (once the folder itself is gone); none is no error."""
    folder.with_name(folder.name + OWNER_SUFFIX).unlink(missing_ok=True)


@dataclass(frozen=True)
class FolderRecord:
    """A folder with an owner record, and what that owner is now."""

    folder: Path
    record: Path
    owner: Owner | None
    state: Liveness


def owned_folders(parent: Path, prefix: str) -> list[FolderRecord]:
    """The folders ``parent/PREFIX*`` that have an owner record, with their owners' state.

    A record whose folder is gone is listed too (``folder`` does not exist): a run killed
    between removing its folder and its record leaves one."""
    found: list[FolderRecord] = []
    here = current_owner()
    try:
        names = sorted(p.name for p in parent.iterdir())
    except OSError:
        return found
    for name in names:
        if not (name.startswith(prefix) and name.endswith(OWNER_SUFFIX)):
            continue
        record = parent / name
        try:
            if not record.is_file() or record.is_symlink() or record.stat().st_size > 4096:
                continue
            owner = Owner.parse(record.read_text(errors="replace"))
        except OSError:
            continue
        state: Liveness = "unknown" if owner is None else liveness(owner, here=here)
        folder = parent / name[: -len(OWNER_SUFFIX)]
        found.append(FolderRecord(folder, record, owner, state))
    return found


def owned_tempdir(prefix: str, parent: Path | None = None) -> Path:
    """``tempfile.mkdtemp`` with this process's owner record beside the folder."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        mark_folder(folder)
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def remove_owned(folder: Path) -> None:
    """Remove a folder made by ``owned_tempdir`` and then its owner record."""
    shutil.rmtree(folder, ignore_errors=True)
    if not folder.exists():
        unmark_folder(folder)


TEMP_PREFIXES = ("archwheel-work-", "archwheel-stage-", "archwheel-cache-", "archwheel-smoke-")
"""The temporary folders archwheel makes (``owned_tempdir``), as ``archwheel clean`` finds them."""


def dead_folders(parent: Path | None = None) -> list[FolderRecord]:
    """The temporary folders under ``parent`` (default: the temp folder) whose maker died."""
    where = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    return [
        record
        for prefix in TEMP_PREFIXES
        for record in owned_folders(where, prefix)
        if record.state == "dead"
    ]


def remove_dead_folders(parent: Path | None = None) -> list[FolderRecord]:
    """Remove ``dead_folders(parent)``; returns what was removed."""
    removed = []
    for record in dead_folders(parent):
        shutil.rmtree(record.folder, ignore_errors=True)
        if not record.folder.exists():
            record.record.unlink(missing_ok=True)
            removed.append(record)
    return removed


# -- partial files ------------------------------------------------------------------------------
# ``effects.files.atomic_writer`` writes beside its target as ``.NAME.PID-START.XXXXXXXX.part``
# and renames it into place: a run killed in between leaves the part. Its pid and start time
# name its writer on this boot (a part file is never shared between machines: it lies beside
# the file being written), so the next run that writes into the folder removes the dead ones.
_PART = re.compile(r"^\..*\.(\d{1,10})-(\d{1,20})\.[^./]+\.part\Z", re.DOTALL)


def part_token() -> str:
    """``PID-START`` of this process, for the names of its partial files."""
    pid = os.getpid()
    return f"{pid}-{_start_time(pid) or 0}"


def dead_parts(folder: Path) -> list[Path]:
    """The partial files in ``folder`` whose writer no longer runs (files without a token in
    their name, and anything else, are left alone)."""
    found: list[Path] = []
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return found
    for path in entries:
        m = _PART.match(path.name)
        if m is None or path.is_symlink() or not path.is_file():
            continue
        if _start_time(int(m.group(1))) != int(m.group(2)):
            found.append(path)
    return found


def remove_dead_parts(folder: Path) -> list[Path]:
    """Remove ``dead_parts(folder)``; returns what was removed."""
    removed = []
    for path in dead_parts(folder):
        try:
            path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed
