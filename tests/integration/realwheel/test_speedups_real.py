"""The compiled scan on the real wheels: what it answers is what the Python scan says.

The torch 2.14.1 and torchvision 0.29.1 wheels are scanned twice in this process (one worker,
so that no member goes to a worker process that would not see the switch): once as archwheel
runs, once with the compiled scan switched off. The inventories must be equal, and the
compiled scan must have answered for members of each wheel (else the comparison proves
nothing). tests/unit/binary/test_speedups.py has the generated and mutated binaries.
"""

from __future__ import annotations

from pathlib import Path

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

    with monkeypatch.context() as patch:
        patch.setattr(speedups, "scan_whole", counted)
        compiled = scan_path(wheel, workers=1)
    with monkeypatch.context() as patch:
        patch.setattr(speedups, "COMPILED", None)
        python = scan_path(wheel, workers=1)
    assert compiled.complete, [p.one_line() for p in compiled.problems]
    assert compiled == python
    assert sum(answered) >= 1, f"the compiled scan answered for none of {len(answered)} binaries"
