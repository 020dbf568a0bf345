"""`archwheel arch` on the real torch 2.14.1 wheel: the size estimate of an arch list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import CliRun


@pytest.mark.realwheel
@pytest.mark.slow
def test_size_estimate_from_the_real_wheel(cli_run: CliRun, torch_wheel: Path) -> None:
    code, out, _ = cli_run(
        "arch", "--gpu", "A100,H100", "--reference", str(torch_wheel), "--format", "json"
    )
    assert code == 0
    size = json.loads(out)["size_estimate"]
    reference = torch_wheel.stat().st_size
    assert size["reference_bytes"] == reference
    assert 0 < size["estimated_bytes"] < reference
    assert size["estimated_bytes"] == reference - size["removed_bytes"] + size["added_bytes"]
    assert size["method"].startswith("reference wheel size - stored bytes")
    code, out, _ = cli_run("arch", "--gpu", "A100,H100", "--reference", str(torch_wheel))
    assert "this is an estimate" in out
