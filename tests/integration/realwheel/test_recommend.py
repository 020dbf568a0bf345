"""The size estimate of an arch list on the real torch 2.14.1 wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from archwheel.binary.scan.inputs import scan_path
from archwheel.facts.arch import ArchList, CodeKind, Target, Variant
from archwheel.verdicts.recommend import estimate_size


@pytest.mark.realwheel
@pytest.mark.slow
def test_estimate_on_the_real_torch_wheel(torch_wheel: Path) -> None:
    inv = scan_path(torch_wheel)
    archs = ArchList.parse("8.0;9.0;12.0")
    estimate = estimate_size(archs, inv, torch_wheel.stat().st_size)
    # Independently: every image of a plain target outside the list, every PTX, and every
    # 'a'/'f' cubin of a major without a plain target in the list is removed.
    majors = {8, 9, 12}
    removed = 0
    for lib in inv.device_libraries:
        for e in lib.entries:
            kept = e.kind is CodeKind.SASS and (
                e.target in {Target.from_name(n)[1] for n in ("sm_80", "sm_90", "sm_120")}
                or (e.target.variant is not Variant.PLAIN and e.target.cc.major in majors)
            )
            removed += 0 if kept else e.stored_bytes
    assert estimate.removed_bytes == removed
    assert estimate.added_bytes == 0  # every requested cubin exists in the reference
    assert estimate.estimated_bytes == torch_wheel.stat().st_size - removed
    assert estimate.estimated_bytes < torch_wheel.stat().st_size
