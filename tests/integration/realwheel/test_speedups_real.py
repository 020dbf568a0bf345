"""The compiled scan on the real wheels: what it answers is what the Python scan says.

The torch 2.14.1 and torchvision 0.29.1 wheels are scanned twice in this process (one worker,
so that no member goes to a worker process that would not see the switch): once as archwheel
runs, once with the compiled scan switched off. The inventories must be equal, and the
compiled parts must have answered for each wheel (else the comparison proves nothing): its
directory read by ``plain_directory``, members read by ``scan_members`` (those small enough)
and scanned by ``scan_whole``. tests/unit/binary/test_speedups.py and test_speedups_zip.py
have the generated and mutated binaries and archives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from archwheel.binary import speedups
from archwheel.binary.scan.inputs import scan_path

pytestmark = pytest.mark.realwheel


@pytest.mark.parametrize("which", ["torch_wheel", "torchvision_wheel"])
def test_a_real_wheel_is_scanned_alike_compiled_or_not(
    which: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel: Path = request.getfixturevalue(which)
    answered = []
    scan_whole = speedups.scan_whole

    def counted(data: bytes, bounds: speedups.Bounds) -> list[speedups.Unit] | None:
        found = scan_whole(data, bounds)
        answered.append(found is not None)
        return found

    directories: list[bool] = []
    plain_directory = speedups.plain_directory

    def directory(*args: Any, **kwargs: Any) -> Any:
        found = plain_directory(*args, **kwargs)
        directories.append(found is not None)
        return found

    small: list[object] = []
    scan_members = speedups.scan_members

    def members(*args: Any, **kwargs: Any) -> Any:
        found = scan_members(*args, **kwargs)
        small.extend(found or [])
        return found

    with monkeypatch.context() as patch:
        patch.setattr(speedups, "scan_whole", counted)
        patch.setattr(speedups, "plain_directory", directory)
        patch.setattr(speedups, "scan_members", members)
        compiled = scan_path(wheel, workers=1)
    with monkeypatch.context() as patch:
        patch.setattr(speedups, "COMPILED", None)
        python = scan_path(wheel, workers=1)
    assert compiled.complete, [p.one_line() for p in compiled.problems]
    assert compiled == python
    answered += [isinstance(found, list) for found in small]
    assert sum(answered) >= 1, f"the compiled scan answered for none of {len(answered)} binaries"
    assert directories == [True], "the wheel's directory was left to zipfile"
    assert any(found is not None for found in small), f"no small member read of {len(small)}"
