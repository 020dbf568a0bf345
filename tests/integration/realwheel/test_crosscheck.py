"""The cross-check on the real torch 2.14.1 / torchvision 0.29.1 wheels: cuobjdump sees every device
library, and archwheel's scanner agrees with it.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from archwheel.binary.model import InputInventory
from archwheel.crosscheck.cuobjdump import Cuobjdump
from archwheel.crosscheck.inputs import crosscheck_input
from archwheel.facts.arch import CodeKind
from tests.support.cuobjdump_support import REL

PTX = CodeKind.PTX


@pytest.mark.realwheel
def test_crosscheck_sees_every_device_library_of_torchvision_even_if_the_scanner_sees_none(
    torchvision_wheel: Path, cuobjdump: Cuobjdump, private_tmpdir: Path
) -> None:
    empty = InputInventory(str(torchvision_wheel), "wheel", ())
    report = crosscheck_input(empty, torchvision_wheel, tool=cuobjdump)
    assert report.failures == ()
    assert report.files_checked >= 9  # every ELF member: torchvision/*.so, torchvision.libs/*
    assert "torchvision/_C_stable.so" in {r.library for r in report.disagreements}
    assert all(r.archwheel == 0 and r.cuobjdump > 0 for r in report.rows)
    assert list(private_tmpdir.iterdir()) == []


# -- acceptance: archwheel's scanner against cuobjdump -----------------------------------------


@pytest.mark.realwheel
@pytest.mark.slow
def test_scanner_and_cuobjdump_agree_on_the_torch_wheel(
    scan: SimpleNamespace, torch_wheel: Path, cuobjdump: Cuobjdump
) -> None:
    report = crosscheck_input(scan.scan_path(torch_wheel), torch_wheel, tool=cuobjdump)
    assert report.failures == ()
    assert report.disagreements == (), [r.one_line() for r in report.disagreements]
    cuda = {r.arch: r for r in report.rows if r.library == "torch/lib/libtorch_cuda.so"}
    assert cuda["sm_103"].archwheel_archs == ("sm_103f",)  # the f restored
    ptx = {(r.library, r.section, r.arch) for r in report.rows if r.kind is PTX}
    assert ptx == {("torch/lib/libtorch_nvshmem.so", REL, "compute_120")}


@pytest.mark.realwheel
@pytest.mark.slow
def test_scanner_and_cuobjdump_agree_on_the_torchvision_wheel(
    scan: SimpleNamespace, torchvision_wheel: Path, cuobjdump: Cuobjdump
) -> None:
    report = crosscheck_input(scan.scan_path(torchvision_wheel), torchvision_wheel, tool=cuobjdump)
    assert report.ok, [r.one_line() for r in report.disagreements]
    assert report.rows
