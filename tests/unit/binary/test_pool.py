"""The worker pool of a wheel's scan (``scan/pool.py``): forked workers that stay up for several
members, each member's result the serial scan's, a worker that dies or fails replaced by a scan
in this process, and progress that never goes back."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from archwheel.binary.scan import binary, pool
from archwheel.binary.scan.inputs import scan_path
from tests.support.builders import Entry, container, elf64, write_zip


def _wheel(tmp_path: Path, count: int) -> Path:
    members = [
        (f"pkg/lib{i}.so", elf64([(".nv_fatbin", container(Entry(sm=80 + i)))]))
        for i in range(count)
    ]
    return write_zip(tmp_path / "x.whl", members)


def _every_member_to_a_worker(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    monkeypatch.setattr(pool, "PARALLEL_MIN_COMPRESSED", 0)
    started: list[Any] = []
    real_start = pool._start_worker

    def counting_start(*args: Any, **named: Any) -> Any:
        worker = real_start(*args, **named)
        started.append(worker)
        return worker

    monkeypatch.setattr(pool, "_start_worker", counting_start)
    return started


def test_forked_workers_take_several_members_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = _wheel(tmp_path, 7)
    serial = scan_path(wheel, workers=1)
    started = _every_member_to_a_worker(monkeypatch)
    seen: list[int] = []
    meanwhile: list[list[bool]] = []
    parallel = scan_path(
        wheel,
        workers=2,
        on_progress=lambda done, total, name: seen.append(done),
        while_waiting=lambda reader: meanwhile.append([w.busy for w in started]),
    )
    assert [type(w).__name__ for w in started] == ["_ForkedWorker", "_ForkedWorker"]
    assert parallel.libraries == serial.libraries
    assert parallel.problems == serial.problems
    assert meanwhile == [[True, True]]  # called once, with both workers holding a member
    assert seen == sorted(seen)  # progress never goes back


def test_a_worker_that_dies_is_replaced_by_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = _wheel(tmp_path, 5)
    serial = scan_path(wheel, workers=1)
    _every_member_to_a_worker(monkeypatch)
    parent = os.getpid()
    real_scan = binary.scan_member

    def dying_scan(*args: Any, **named: Any) -> Any:
        if os.getpid() != parent and args[2].name.endswith(("1.so", "3.so")):
            os._exit(3)  # the worker is gone, with a member at hand
        return real_scan(*args, **named)

    monkeypatch.setattr(pool, "scan_member", dying_scan)
    parallel = scan_path(wheel, workers=2)
    assert parallel.libraries == serial.libraries
    assert parallel.problems == serial.problems


def test_while_waiting_runs_once_after_a_scan_without_workers(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, 3)
    calls: list[int] = []
    inventory = scan_path(
        wheel, workers=1, while_waiting=lambda reader: calls.append(len(reader.members))
    )
    assert calls == [3]  # once, with the wheel's directory read
    assert len(inventory.libraries) == 3
    library = tmp_path / "lib.so"
    library.write_bytes(elf64([(".nv_fatbin", container(Entry(sm=90)))]))
    scan_path(library, while_waiting=lambda reader: calls.append(len(reader.members)))
    assert calls == [3]  # a single file starts no worker: nothing to do meanwhile
