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
from typing import TYPE_CHECKING, BinaryIO

from archwheel.binary import speedups
from archwheel.binary.scan.binary import (
    InputInflation,
    MemberResult,
    scan_member,
    scan_small_members,
    small_enough,
)
from archwheel.binary.zipmember import Member
from archwheel.binary.zipread import file_identity
from archwheel.effects.files import open_regular

if TYPE_CHECKING:
    from archwheel.effects import process

PARALLEL_MIN_COMPRESSED = 8 << 20
# Small members are read in batches of this many (``scan_small_members``): one compiled call
# each, and the entry bound checked between them.
SMALL_BATCH = 256
# The most fatbin entries one input (a wheel) keeps, all members together: members not yet
# scanned when it is reached are left unscanned (memory stays bounded; docs/limits.md).
MAX_ENTRIES_PER_INPUT = 1 << 20
FORK_WORKERS = True  # tests turn it off to exercise the spawned workers
WORKER_MODULE = "archwheel.binary.scan.worker"

ProgressSink = Callable[[int, str], None]
"""Called as ``sink(done_bytes, current_member)`` while members are scanned."""


def default_workers() -> int:
    """How many worker processes scan a wheel's big members: the CPUs, between 1 and 4."""
    return max(1, min(4, os.cpu_count() or 1))


class _Worker:
    """A child process that scans the big members it is given, one at a time."""

    @property
    def busy(self) -> bool:
        raise NotImplementedError

    @property
    def done_bytes(self) -> int:
        """Bytes of the member at hand scanned so far."""
        raise NotImplementedError

    @property
    def fd(self) -> int | None:
        """What to wait on for its next result (None: poll)."""
        return None

    def assign(self, index: int, member: Member, deep: bool) -> None:
        raise NotImplementedError

    def collect(self) -> list[tuple[int, MemberResult | None]]:
        """The members it finished since the last call, by index; None: it failed (the
        member is to be scanned again elsewhere)."""
        raise NotImplementedError

    @property
    def alive(self) -> bool:
        """Whether it can take another member."""
        return True

    def close(self) -> None:
        """No more members: let it end."""

    def kill(self) -> None:
        raise NotImplementedError


_FRAME = struct.Struct("<qQ")  # a result's member index and pickled length
_STOP = -1


class _ForkedWorker(_Worker):
    """A forked copy of this process: no interpreter start, no imports. It stays up for as
    many members as it is given (a member index on its command pipe; a result frame, index and
    pickle, on its result pipe), so a freed slot takes its next member at once.

    Only used while this process runs a single thread (forking a threaded process can copy
    locks held by other threads). Progress is a counter in shared memory, the member at hand's
    bytes scanned so far (set to 0 before its result is sent).
    """

    def __init__(self, path: Path, archive_size: int, *, digest: bool) -> None:
        self._counter = mmap.mmap(-1, 8)
        command_r, command_w = os.pipe()
        result_r, result_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child, which never returns
            code = 1
            try:
                os.close(command_w)
                os.close(result_r)
                speedups.retain_freed_memory()  # this process only scans, then exits
                self._serve(command_r, result_w, path, archive_size, digest)
                code = 0
            finally:
                os._exit(code)
        os.close(command_r)
        os.close(result_w)
        os.set_blocking(result_r, False)
        self._pid = pid
        self._command: int | None = command_w
        self._fd: int | None = result_r
        self._buffer = bytearray()
        self._current: tuple[int, Member] | None = None
        self._status: int | None = None

    def _serve(
        self, command: int, out: int, path: Path, archive_size: int, digest: bool
    ) -> None:  # pragma: no cover - runs in the child
        done = 0

        trim_at = speedups.TRIM_EVERY

        def on_bytes(amount: int) -> None:
            nonlocal done, trim_at
            done += amount
            struct.pack_into("<Q", self._counter, 0, done)
            if done >= trim_at:  # what the inflater left fragmented goes back to the kernel
                trim_at = done + speedups.TRIM_EVERY
                speedups.trim_freed_memory()

        with os.fdopen(command, "rb", buffering=0) as commands:
            while True:
                head = _read_exact(commands, _MEMBER_ORDER.size)
                if head is None:
                    return
                index, length = _MEMBER_ORDER.unpack(head)
                order = _read_exact(commands, length) if index != _STOP else None
                if order is None:
                    return
                member, deep = pickle.loads(order)  # noqa: S301 - our parent
                done = 0
                trim_at = speedups.TRIM_EVERY
                # Mapped: a file cut short while it is read kills this process (SIGBUS), and the
                # parent reads the member again (``collect`` says it failed).
                result = scan_member(
                    path, archive_size, member, on_bytes, deep, digest=digest, mapped=True
                )
                payload = pickle.dumps(result)
                struct.pack_into("<Q", self._counter, 0, 0)
                view = memoryview(_FRAME.pack(index, len(payload)) + payload)
                while view:
                    view = view[os.write(out, view) :]

    @property
    def busy(self) -> bool:
        return self._current is not None

    @property
    def done_bytes(self) -> int:
        return int(struct.unpack_from("<Q", self._counter, 0)[0]) if self.busy else 0

    @property
    def fd(self) -> int | None:
        return self._fd

    @property
    def alive(self) -> bool:
        return self._fd is not None

    def assign(self, index: int, member: Member, deep: bool) -> None:
        assert self._command is not None and self._current is None
        payload = pickle.dumps((member, deep))
        with contextlib.suppress(OSError):  # it is gone: collect says so, the member goes on
            _write_all(self._command, _MEMBER_ORDER.pack(index, len(payload)) + payload)
        self._current = (index, member)

    def collect(self) -> list[tuple[int, MemberResult | None]]:
        ended = self._drain()
        out: list[tuple[int, MemberResult | None]] = []
        while len(self._buffer) >= _FRAME.size:
            index, length = _FRAME.unpack_from(self._buffer)
            if len(self._buffer) < _FRAME.size + length:
                break
            payload = bytes(self._buffer[_FRAME.size : _FRAME.size + length])
            del self._buffer[: _FRAME.size + length]
            if self._current is not None and self._current[0] == index:
                self._current = None
                out.append((index, _unpickle_result(payload)))
        if ended and self._current is not None:  # it died with a member at hand
            out.append((self._current[0], None))
            self._current = None
        return out

    def _drain(self) -> bool:
        """Read what has arrived; True once the pipe has ended (the child is gone)."""
        if self._fd is None:
            return True
        while True:
            try:
                data = os.read(self._fd, 1 << 20)
            except BlockingIOError:
                return False
            if not data:
                os.close(self._fd)
                self._fd = None
                return True
            self._buffer += data

    def close(self) -> None:
        if self._command is not None:
            with contextlib.suppress(OSError):
                _write_all(self._command, _MEMBER_ORDER.pack(_STOP, 0))
            os.close(self._command)
            self._command = None

    def kill(self) -> None:
        self.close()
        if self._status is None:
            if self._current is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._pid, signal.SIGKILL)
            _, self._status = os.waitpid(self._pid, 0)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._counter.close()


_MEMBER_ORDER = struct.Struct("<qQ")  # a member's index and its pickled length


def _read_exact(stream: BinaryIO, size: int) -> bytes | None:
    """``size`` bytes of an unbuffered pipe, or None when it ends first."""
    data = b""
    while len(data) < size:
        more = stream.read(size - len(data))
        if not more:
            return None
        data += more
    return data


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _unpickle_result(data: bytes) -> MemberResult | None:
    try:
        value = pickle.loads(data)  # noqa: S301 - from our own child process
    except Exception:
        return None
    return value if isinstance(value, tuple) else None


class _SpawnedWorker(_Worker):
    """A fresh ``python -m archwheel.binary.scan.worker`` per member; progress arrives as
    stderr lines."""

    def __init__(self, path: Path, archive_size: int, *, digest: bool) -> None:
        self._args = (str(path), archive_size, digest)
        self._index: int | None = None
        self._done = 0
        self._stdout = b""
        self.proc: process.Popen[bytes] | None = None
        self._threads: list[threading.Thread] = []

    @property
    def busy(self) -> bool:
        return self._index is not None

    @property
    def done_bytes(self) -> int:
        return self._done if self.busy else 0

    def assign(self, index: int, member: Member, deep: bool) -> None:
        from archwheel.effects import process  # spawned workers only: forks need no subprocess

        path, archive_size, digest = self._args
        self._done = 0
        self._stdout = b""
        self.proc = process.spawn(
            [sys.executable, "-m", WORKER_MODULE],
            stdin=process.PIPE,
            stdout=process.PIPE,
            stderr=process.PIPE,
        )
        self._index = index
        assert self.proc.stdin is not None
        self.proc.stdin.write(pickle.dumps((path, archive_size, member, deep, digest)))
        self.proc.stdin.close()
        self._threads = [
            threading.Thread(target=self._read_result, daemon=True),
            threading.Thread(target=self._read_progress, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read_result(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        self._stdout = self.proc.stdout.read()

    def _read_progress(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            if line.strip().isdigit():
                self._done = int(line)

    def collect(self) -> list[tuple[int, MemberResult | None]]:
        if self._index is None or self.proc is None or self.proc.poll() is None:
            return []
        for t in self._threads:
            t.join()
        index, self._index = self._index, None
        if self.proc.returncode != 0:
            return [(index, None)]
        return [(index, _unpickle_result(self._stdout))]

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()


def _can_fork() -> bool:
    """Whether workers are forked copies of this process (POSIX, one thread running)."""
    return hasattr(os, "fork") and threading.active_count() == 1 and FORK_WORKERS


def _start_worker(path: Path, archive_size: int, *, digest: bool) -> _Worker:
    if _can_fork():
        return _ForkedWorker(path, archive_size, digest=digest)
    return _SpawnedWorker(path, archive_size, digest=digest)


def _wait(busy: list[_Worker], seconds: float) -> None:
    """Wait until a busy worker has something to say (a result, its end) or ``seconds`` pass."""
    fds = [fd for fd in (w.fd for w in busy) if fd is not None]
    if len(fds) == len(busy):
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
    while_waiting: Callable[[], None] | None = None,
) -> dict[int, MemberResult]:
    """Every member's result by its index in ``members``, big ones scanned in worker processes;
    ``progress`` hears the bytes scanned so far, all workers together.

    ``while_waiting``, when given, is called once in this process, as soon as the workers have
    their first members (or after the scan, where no worker runs): the caller's work that does
    not need the results (imports, reading other files) is then done while they scan, not after.

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
                if while_waiting is not None:
                    while_waiting()
                return dict.fromkeys(range(len(members)), (None, changed))
        return _scan_members(
            path,
            archive_size,
            members,
            progress,
            workers,
            deep=deep,
            digest=digest,
            handle=handle,
            while_waiting=while_waiting,
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
    while_waiting: Callable[[], None] | None = None,
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
    pool: list[_Worker] = []

    def report(name: str) -> None:
        progress(local_done + sum(w.done_bytes for w in pool), name)

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

    busy: dict[_Worker, str] = {}  # a worker and the member at hand's name
    clean = False
    try:
        while big or small or busy:
            idle = [w for w in pool if w not in busy and w.alive]
            while big and len(busy) < slots:
                if idle:
                    worker = idle.pop()
                else:
                    try:
                        worker = _start_worker(path, archive_size, digest=digest)
                    except OSError:
                        # Cannot start processes here: scan everything in this one.
                        slots, forked = 0, False
                        break
                    pool.append(worker)
                index = big.popleft()
                worker.assign(index, members[index], deep)
                busy[worker] = members[index].name
            if while_waiting is not None and busy and forked:
                waiting, while_waiting = while_waiting, None
                waiting()
            finished = False
            for worker in list(busy):
                for index, outcome in worker.collect():
                    finished = True
                    if outcome is None:  # the worker failed: the member is scanned here
                        scan_here(index)
                    else:
                        local_done += members[index].size
                        keep(index, outcome)
                if not worker.busy:
                    del busy[worker]
            if finished and big:
                continue  # the next big member to the freed worker first
            if big and not forked:
                scan_here(big.popleft())
            elif small and batchable(small[0]):
                scan_batch()
            elif small:
                scan_here(small.popleft())
            elif busy:
                _wait(list(busy), 0.1)
                report(next(iter(busy.values())))
        clean = True
    finally:
        for worker in pool:
            if clean:
                worker.close()
            worker.kill()
    if while_waiting is not None:
        while_waiting()
    return results
