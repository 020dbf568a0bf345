"""Compatibility verdicts of the real torch 2.14.1+cu130 wheel through the real scanner, and
`archwheel can-run` on it.

The expected verdicts are the hand-written ones of tests/support/real_torch.py, which
tests/unit/verdicts/test_compat.py also checks on a hand-built inventory of the same wheel.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archwheel.binary.scan.inputs import scan_path
from tests.support.cli import CliRun
from tests.support.real_torch import check_torch_verdicts

# -- the real wheel -----------------------------------------------------------------------------


@pytest.mark.realwheel
@pytest.mark.slow
def test_real_torch_wheel_verdicts(torch_wheel: Path) -> None:
    check_torch_verdicts(scan_path(torch_wheel))


@pytest.mark.realwheel
@pytest.mark.slow
def test_can_run_cli_on_real_wheel(torch_wheel: Path, cli_run: CliRun) -> None:
    code, out, _ = cli_run(
        "can-run", str(torch_wheel), "--gpu", "T4,RTX 5090", "--driver", "580.65.06",
        "--format", "json",
    )  # fmt: skip
    assert code == 11
    doc = json.loads(out)
    item = doc["inputs"][0]
    assert item["name"] == "torch"
    t4, rtx = item["gpus"]
    assert t4["verdict"] == "no-kernel-image"
    assert [lib["library"] for lib in t4["libraries"] if lib["verdict"] == "no-kernel-image"] == [
        "torch/lib/libtorch_cuda_linalg.so"
    ]
    assert rtx["verdict"] == "native"
    assert t4["runtime"]["status"] == "full"
    assert t4["runtime"]["cuda_runtime"] == "13.0"
