"""archwheel manifest / verify on the real torch 2.14.1 wheel: its manifest matches the environment
pip installed it into.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.support.cli import CliRun
from tests.support.schemas import manifest_schema


@pytest.mark.realwheel
@pytest.mark.slow
def test_real_torch_manifest_matches_its_installed_environment(
    torch_wheel: Path, torch_venv: Path, cli_run: CliRun, tmp_path: Path
) -> None:
    manifest = tmp_path / "manifest.json"
    assert cli_run("manifest", str(torch_wheel), "-o", str(manifest))[0] == 0
    doc = json.loads(manifest.read_text())
    jsonschema.validate(doc, manifest_schema())
    torch = doc["wheels"][0]
    assert torch["cuda"]["version"] == "13.0"
    assert torch["cudnn"] == "9.24.0.43"
    assert torch["nccl"] == "2.30.7"
    assert "sm_121a" in torch["archs"]["sass"]
    code, out, _ = cli_run(
        "verify", str(manifest), str(torch_wheel), "--env", "--python", str(torch_venv),
        "--format", "json",
    )  # fmt: skip
    report = json.loads(out)
    assert report["mismatches"] == []
    assert code == 0
    assert report["libraries_hashed"] is True
