"""Disk accounting for the test run: how much of the disk the suite holds, and which tests took it.

CI machines have a few tens of GB free and the suite handles real torch wheels (a venv with
torch 2.14.1 and its nvidia-* wheels is 5.4 GB), so a run that keeps too much fails late with
"No space left on device" in whichever test comes next. This plugin measures the free space of
the filesystems the suite writes to (the cache, the temporary folder, Docker's data root) after
every test, and prints at the end the peak the run held above its start and the tests that took
the most. ``$ARCHWHEEL_DISK_LOG``, when set, also gets one line per test (for a timeline).

Free space is the filesystem's, so other processes on the machine count too; the figures are a
guide for finding the tests that hold disk, not an exact account.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.paths import CACHE

GB = 1024**3


def _free(path: Path) -> tuple[int, int] | None:
    """(device id, free bytes) of the filesystem holding ``path`` or its nearest parent."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        st = os.statvfs(probe)
        return probe.stat().st_dev, st.f_bavail * st.f_frsize
    except OSError:
        return None


@dataclass
class DiskAccount:
    roots: tuple[Path, ...]
    start: dict[int, int] = field(default_factory=dict)
    last: dict[int, int] = field(default_factory=dict)
    low: dict[int, int] = field(default_factory=dict)
    takers: list[tuple[int, str]] = field(default_factory=list)
    log: Path | None = None

    def sample(self) -> dict[int, int]:
        seen: dict[int, int] = {}
        for root in self.roots:
            got = _free(root)
            if got is not None:
                seen[got[0]] = got[1]
        return seen

    def begin(self) -> None:
        self.start = self.sample()
        self.last = dict(self.start)
        self.low = dict(self.start)

    def after(self, nodeid: str) -> None:
        now = self.sample()
        taken = sum(self.last.get(dev, free) - free for dev, free in now.items())
        for dev, free in now.items():
            self.low[dev] = min(self.low.get(dev, free), free)
        self.last = now
        if taken > 0:
            self.takers.append((taken, nodeid))
        if self.log is not None:
            held = sum(self.start.get(dev, free) - free for dev, free in now.items())
            with self.log.open("a", encoding="utf-8") as out:
                name = nodeid.encode("unicode_escape").decode()
                out.write(f"{held / GB:8.2f} GB held {taken / GB:+7.2f} GB {name}\n")

    def summary(self) -> list[str]:
        peak = sum(self.start[dev] - low for dev, low in self.low.items() if dev in self.start)
        end = sum(self.start[dev] - free for dev, free in self.last.items() if dev in self.start)
        lowest = min(self.low.values(), default=0)
        lines = [
            f"disk: the run held at most {peak / GB:.1f} GB above its start "
            f"({end / GB:.1f} GB at the end); lowest free space {lowest / GB:.1f} GB",
        ]
        for taken, nodeid in sorted(self.takers, reverse=True)[:10]:
            if taken >= GB // 20:
                lines.append(f"  {taken / GB:6.2f} GB  {nodeid.encode('unicode_escape').decode()}")
        return lines


_ACCOUNT_KEY = pytest.StashKey[DiskAccount]()


def pytest_configure(config: pytest.Config) -> None:
    import tempfile

    roots = (CACHE, Path(tempfile.gettempdir()), Path("/var/lib/docker"))
    log = os.environ.get("ARCHWHEEL_DISK_LOG")
    account = DiskAccount(roots, log=Path(log) if log else None)
    account.begin()
    config.stash[_ACCOUNT_KEY] = account


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    del location
    account = _CURRENT.get("account")
    if account is not None:
        account.after(nodeid)


_CURRENT: dict[str, DiskAccount] = {}


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _CURRENT["account"] = session.config.stash[_ACCOUNT_KEY]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    account = terminalreporter.config.stash.get(_ACCOUNT_KEY, None)
    if account is None:
        return
    for line in account.summary():
        terminalreporter.write_line(line)
