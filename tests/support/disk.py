"""Disk accounting for the test run: how much of the disk the suite holds, and which tests took it.

CI machines have a few tens of GB free and the suite handles real torch wheels (a venv with
torch 2.14.1 and its nvidia-* wheels is 5.4 GB), so a run that keeps too much fails late with
"No space left on device" in whichever test comes next. This plugin measures the free space of
the filesystems the suite writes to (the cache, the temporary folder, Docker's data root) after
every test, and prints at the end the peak the run held above its start and the tests that took
the most. ``$ARCHWHEEL_DISK_LOG``, when set, also gets one line per test (for a timeline).

Free space is the filesystem's, so other processes on the machine count too; the figures are a
guide for finding the tests that hold disk, not an exact account.

``ARCHWHEEL_TEST_PRUNE=1`` (set by ``.ci/run``, where no later run reuses the cache): when the
run leaves ``tests/integration/docker/``, what only those tests use is removed (the torch
images of the extension builds, 6-7 GB each, and the cached torch 2.13.0 and 2.12.1 venvs), and
``prune_after_module`` folders go when their module ends. A developer's machine keeps them for
the next run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.paths import CACHE

GB = 1024**3
PRUNE = os.environ.get("ARCHWHEEL_TEST_PRUNE") == "1"
DOCKER_TESTS = "tests/integration/docker/"
# Used only by tests under DOCKER_TESTS (tests/support/venvs.py names the venvs).
DOCKER_ONLY_VENVS = (CACHE / "venvs" / "torch-2.13.0", CACHE / "venvs" / "torch-2.12.1")


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


# The run's account: pytest_runtest_logfinish gets no config to find it in a stash.
_ACCOUNT: list[DiskAccount] = []


def pytest_configure() -> None:
    import tempfile

    roots = (CACHE, Path(tempfile.gettempdir()), Path("/var/lib/docker"))
    log = os.environ.get("ARCHWHEEL_DISK_LOG")
    account = DiskAccount(roots, log=Path(log) if log else None)
    account.begin()
    _ACCOUNT[:] = [account]


def pytest_runtest_logfinish(nodeid: str) -> None:
    for account in _ACCOUNT:
        account.after(nodeid)


def prune_after_module(path: Path) -> None:
    """Remove ``path`` (a cached venv) now if pruning, else keep it for the next run."""
    if PRUNE:
        shutil.rmtree(path, ignore_errors=True)


def _prune_docker_only() -> None:
    for venv in DOCKER_ONLY_VENVS:
        shutil.rmtree(venv, ignore_errors=True)
    if shutil.which("docker") is None:
        return
    listed = subprocess.run(
        ["docker", "images", "--filter", "label=org.archwheel.torch", "--format", "{{.ID}}"],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    ids = sorted(set(listed.stdout.split()))
    if ids:
        subprocess.run(["docker", "rmi", "--force", *ids], capture_output=True, check=False,
                       timeout=600)  # fmt: skip


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if not PRUNE:
        return
    here = item.nodeid.startswith(DOCKER_TESTS)
    if here and (nextitem is None or not nextitem.nodeid.startswith(DOCKER_TESTS)):
        _prune_docker_only()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for account in _ACCOUNT:
        for line in account.summary():
            terminalreporter.write_line(line)
