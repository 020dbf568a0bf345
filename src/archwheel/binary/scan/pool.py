"""Scan a wheel's big members in parallel, in worker processes.

The inflater holds the GIL, so threads would not help: big members are scanned by worker
processes, a fork of this process where that is safe (single-threaded POSIX), else a fresh
``python -m archwheel.binary.scan.worker`` started through ``archwheel.effects.process`` (never
multiprocessing, whose spawn re-imports the caller's main module). The main process scans the
small members and takes big ones too whenever every worker is busy, longest first. A worker that
fails is rescanned here, so a whole wheel costs about one inflate of its binaries.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import select
import signal
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from archwheel.binary import speedups
from archwheel.binary.scan.binary import (
    InputInflation,
    MemberResult,
    scan_member,
    scan_small_members,
    small_enough,
)
from archwheel.binary.zipread import Member, file_identity
from archwheel.effects import process
from archwheel.effects.files import open_regular

PARALLEL_MIN_COMPRESSED = 8 << 20
# Small members are read in batches of this many (``scan_small_members``): one compiled call
# each, and the entry bound checked between them.
SMALL_BATCH = 256
# The most fatbin entries one input (a wheel) keeps, all members together: members not yet
# scanned when it is reached are left unscanned (memory stays bounded; docs/design.md).
MAX_ENTRIES_PER_INPUT = 1 << 20
FORK_WORKERS = True  # tests turn it off to exercise the spawned workers
WORKER_MODULE = "archwheel.binary.scan.worker"

ProgressSink = Callable[[int, str], None]
"""Called as ``sink(done_bytes, current_member)`` while members are scanned."""


def default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))


class _Worker:
    """One member scanned in a child process (the base: a fresh interpreter, result on stdout)."""

    index: int
    member: Member

    @property
    def done_bytes(self) -> int:
        raise NotImplementedError

    def finished(self) -> bool:
        raise NotImplementedError

    def result(self) -> MemberResult | None:
        raise NotImplementedError

    def kill(self) -> None:
        raise NotImplementedError


class _ForkedWorker(_Worker):
    """A forked copy of this process scans the member: no interpreter start, no imports.

    Only used while this process runs a single thread (forking a threaded process can copy
    locks held by other threads). Progress is a counter in shared memory; the pickled result
    comes back through a pipe drained without blocking.
    """

    def __init__(
        self, path: Path, archive_size: int, index: int, member: Member, deep: bool, *, digest: bool
    ) -> None:
        self.index = index
        self.member = member
        self._counter = mmap.mmap(-1, 8)
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child, which never returns
            code = 1
            try:
                os.close(read_fd)
                speedups.retain_freed_memory()  # this process only scans, then exits
                done = 0

                def on_bytes(amount: int) -> None:
                    nonlocal done
                    done += amount
                    struct.pack_into("<Q", self._counter, 0, done)

                payload = pickle.dumps(
                    scan_member(path, archive_size, member, on_bytes, deep, digest=digest)
                )
                view = memoryview(payload)
                while view:
                    view = view[os.write(write_fd, view) :]
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        self._pid = pid
        self._fd: int | None = read_fd
        self._buffer = bytearray()
        self._status: int | None = None

    @property
    def done_bytes(self) -> int:
        return int(struct.unpack_from("<Q", self._counter, 0)[0])

    @property
    def fd(self) -> int | None:
        """The pipe its result comes through (None once it is closed)."""
        return self._fd

    def _drain(self, block: bool = False) -> None:
        if self._fd is None:
            return
        os.set_blocking(self._fd, block)
        while True:
            try:
                data = os.read(self._fd, 1 << 20)
            except BlockingIOError:
                return
            if not data:
                os.close(self._fd)
                self._fd = None
                return
            self._buffer += data

    def finished(self) -> bool:
        self._drain()
        if self._status is None:
            pid, status = os.waitpid(self._pid, os.WNOHANG)
            if pid:
                self._status = status
        return self._status is not None

    def result(self) -> MemberResult | None:
        self._drain(block=True)
        if self._status is None:
            _, self._status = os.waitpid(self._pid, 0)
        self._counter.close()
        if os.waitstatus_to_exitcode(self._status) != 0:
            return None
        return _unpickle_result(bytes(self._buffer))

    def kill(self) -> None:
        if self._status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            _, self._status = os.waitpid(self._pid, 0)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _unpickle_result(data: bytes) -> MemberResult | None:
    try:
        value = pickle.loads(data)  # noqa: S301 - from our own child process
    except Exception:
        return None
    return value if isinstance(value, tuple) else None


class _SpawnedWorker(_Worker):
    """A fresh ``python -m archwheel.binary.scan.worker``; progress arrives as stderr lines."""

    def __init__(
        self, path: Path, archive_size: int, index: int, member: Member, deep: bool, *, digest: bool
    ) -> None:
        self.index = index
        self.member = member
        self._done = 0
        self._stdout = b""
        self.proc = process.spawn(
            [sys.executable, "-m", WORKER_MODULE],
            stdin=process.PIPE,
            stdout=process.PIPE,
            stderr=process.PIPE,
        )
        assert self.proc.stdin is not None
        self.proc.stdin.write(pickle.dumps((str(path), archive_size, member, deep, digest)))
        self.proc.stdin.close()
        self._threads = [
            threading.Thread(target=self._read_result, daemon=True),
            threading.Thread(target=self._read_progress, daemon=True),
        ]
        for t in self._threads:
            t.start()

    @property
    def done_bytes(self) -> int:
        return self._done

    def _read_result(self) -> None:
        assert self.proc.stdout is not None
        self._stdout = self.proc.stdout.read()

    def _read_progress(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if line.strip().isdigit():
                self._done = int(line)

    def finished(self) -> bool:
        return self.proc.poll() is not None

    def result(self) -> MemberResult | None:
        self.proc.wait()
        for t in self._threads:
            t.join()
        if self.proc.returncode != 0:
            return None
        return _unpickle_result(self._stdout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _can_fork() -> bool:
    """Whether workers are forked copies of this process (POSIX, one thread running)."""
    return hasattr(os, "fork") and threading.active_count() == 1 and FORK_WORKERS


def _start_worker(
    path: Path, archive_size: int, index: int, member: Member, deep: bool, *, digest: bool
) -> _Worker:
    if _can_fork():
        return _ForkedWorker(path, archive_size, index, member, deep, digest=digest)
    return _SpawnedWorker(path, archive_size, index, member, deep, digest=digest)


def _wait(running: list[_Worker], seconds: float) -> None:
    """Wait until a worker has something to say (its result, its end) or ``seconds`` pass."""
    fds = [w.fd for w in running if isinstance(w, _ForkedWorker) and w.fd is not None]
    if fds and len(fds) == len(running):
        select.select(fds, [], [], seconds)
    else:
        time.sleep(min(seconds, 0.02))


def scan_members(
    path: Path,
    archive_size: int,
    members: list[Member],
    progress: ProgressSink,
    workers: int | None,
    *,
    deep: bool = False,
    digest: bool = False,
    identity: tuple[int, int, int, int] | None = None,
) -> dict[int, MemberResult]:
    """Every member's result by its index in ``members``, big ones scanned in worker processes;
    ``progress`` hears the bytes scanned so far, all workers together.

    The members scanned here read one handle of the archive, opened once: a wheel of 200000
    tiny members is not opened 200000 times, and they all read the file whose directory was
    read (``identity``, from ``WheelReader``; without it, a file of the size read). Another
    file in its place: the archive changed since, and no member is read.
    """
    with contextlib.ExitStack() as stack:
        try:
            handle = stack.enter_context(open_regular(path))
        except OSError:
            handle = None  # each member says why it cannot be read
        if handle is not None:
            now = file_identity(os.fstat(handle.fileno()))
            if now[2] != archive_size or (identity is not None and now != identity):
                changed = "the archive changed while it was scanned: not read"
                return dict.fromkeys(range(len(members)), (None, changed))
        return _scan_members(
            path, archive_size, members, progress, workers, deep=deep, digest=digest, handle=handle
        )


def _scan_members(
    path: Path,
    archive_size: int,
    members: list[Member],
    progress: ProgressSink,
    workers: int | None,
    *,
    deep: bool,
    digest: bool,
    handle: BinaryIO | None,
) -> dict[int, MemberResult]:
    results: dict[int, MemberResult] = {}
    kept_entries = 0
    inflation = InputInflation(sum(m.size for m in members))

    def keep(index: int, result: MemberResult) -> bool:
        """Keep one result; False once the entry bound is passed (the rest stays unscanned:
        the caller reports the limit)."""
        nonlocal kept_entries, deep
        results[index] = result
        scan = result[0]
        if scan is None:
            return True
        for lib in scan.libraries:
            kept_entries += len(lib.entries)
        if kept_entries > MAX_ENTRIES_PER_INPUT:
            big.clear()
            small.clear()
            return False
        if deep and inflation.passed_with(scan):
            deep = False  # the members scanned from now on are not checked
        return True

    # Forked workers scan every big member, one process per core, while this process reads the
    # small ones and waits: a fork costs milliseconds, and a process that only scans keeps the
    # memory it frees (``speedups.retain_freed_memory``, which this one must not set for its
    # caller). Spawned workers cost an interpreter's start each: this process scans too.
    count = workers or default_workers()
    forked = _can_fork() and count > 1
    slots = count if forked else count - 1
    by_size = sorted(range(len(members)), key=lambda i: -members[i].compressed_size)
    # Queues taken from the front: a deque each, so that a wheel of 200000 members costs
    # linear time (list.pop(0) made it quadratic).
    big = deque(i for i in by_size if members[i].compressed_size >= PARALLEL_MIN_COMPRESSED)
    if slots < 1 or (len(big) < 2 and not forked):
        big.clear()
    chosen = set(big)
    small = deque(i for i in by_size if i not in chosen)
    local_done = 0
    running: list[_Worker] = []

    def report(name: str) -> None:
        progress(local_done + sum(w.done_bytes for w in running), name)

    def scan_here(index: int) -> None:
        nonlocal local_done
        member = members[index]

        def on_bytes(amount: int) -> None:
            nonlocal local_done
            local_done += amount
            report(member.name)

        keep(
            index,
            scan_member(path, archive_size, member, on_bytes, deep, digest=digest, handle=handle),
        )

    def batchable(index: int) -> bool:
        return handle is not None and not deep and not digest and small_enough(members[index])

    def scan_batch() -> None:
        """The small members at the front of ``small``, up to ``SMALL_BATCH``, in one call."""
        nonlocal local_done
        assert handle is not None
        run: list[int] = []
        while small and len(run) < SMALL_BATCH and small_enough(members[small[0]]):
            run.append(small.popleft())

        def on_bytes(amount: int) -> None:
            nonlocal local_done
            local_done += amount
            report(members[run[-1]].name)

        found = scan_small_members(
            path, archive_size, [members[i] for i in run], on_bytes, handle=handle
        )
        for index, result in zip(run, found, strict=True):
            if not keep(index, result):
                break

    try:
        while big or small or running:
            while big and len(running) < slots:
                index = big.popleft()
                try:
                    running.append(
                        _start_worker(
                            path, archive_size, index, members[index], deep, digest=digest
                        )
                    )
                except OSError:
                    # Cannot start processes here: scan everything in this one.
                    slots, forked = 0, False
                    scan_here(index)
            ended = [w for w in running if w.finished()]
            for worker in ended:
                running.remove(worker)
                outcome = worker.result()
                local_done += worker.member.size
                if outcome is None:
                    local_done -= worker.member.size
                    scan_here(worker.index)
                else:
                    keep(worker.index, outcome)
            if ended and big:
                continue  # the next big member to the freed slot first
            if big and not forked:
                scan_here(big.popleft())
            elif small and batchable(small[0]):
                scan_batch()
            elif small:
                scan_here(small.popleft())
            elif running:
                _wait(running, 0.1)
                report(running[0].member.name)
    finally:
        for worker in running:
            worker.kill()
    return results
