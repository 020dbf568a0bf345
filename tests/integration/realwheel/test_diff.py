"""diff on the real torch 2.13.0 and 2.14.1 wheels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.can_load_fakes import validate_schema
from tests.support.cli import CliRun
from tests.support.components import fetch_wheel


@pytest.mark.realwheel
@pytest.mark.slow
def test_real_torch_wheels(torch_wheel: Path, cli_run: CliRun) -> None:
    cpu = fetch_wheel("torch==2.13.0+cpu")
    code, out, err = cli_run("diff", str(torch_wheel), str(cpu), "--format", "json")
    assert code == 1, err
    doc = json.loads(out)
    validate_schema(doc, "diff")
    assert "sm_90" in doc["archs_gone"] and "compute_120" in doc["archs_gone"]
    cuda = next(c for c in doc["libraries"] if c["path"] == "torch/lib/libtorch_cuda.so")
    assert cuda["status"] == "removed" and "sm_120" in cuda["dropped"]
    pins = {p["name"]: p for p in doc["pins"]}
    assert pins["cuda-toolkit"]["before"] == "==13.0.3" and pins["cuda-toolkit"]["after"] is None
    code, out, _err = cli_run("diff", str(cpu), str(torch_wheel), "--format", "markdown")
    assert code == 0 and "libtorch_cuda.so" in out and "no arch lost" in out
