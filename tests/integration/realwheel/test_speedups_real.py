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
    with monkeypatch.context() as patch:
        whole = _record(patch, "scan_whole")
        directories = _record(patch, "plain_directory")
        batches = _record(patch, "scan_members")
        compiled = scan_path(wheel, workers=1)
    with monkeypatch.context() as patch:
        patch.setattr(speedups, "COMPILED", None)
        python = scan_path(wheel, workers=1)
    assert compiled.complete, [p.one_line() for p in compiled.problems]
    assert compiled == python
    small = [found for batch in batches for found in batch]
    answered = [found is not None for found in whole] + [isinstance(f, list) for f in small]
    assert sum(answered) >= 1, f"the compiled scan answered for none of {len(answered)} binaries"
    assert [found is not None for found in directories] == [True], "directory left to zipfile"
    assert any(found is not None for found in small), f"no small member read of {len(small)}"


def _record(patch: pytest.MonkeyPatch, name: str) -> list[Any]:
    """Every answer ``speedups.<name>`` gives while ``patch`` holds."""
    answers: list[Any] = []
    original = getattr(speedups, name)

    def recorded(*args: Any, **kwargs: Any) -> Any:
        found = original(*args, **kwargs)
        answers.append(found)
        return found

    patch.setattr(speedups, name, recorded)
    return answers
