"""The GPU truth table's logic without a GPU or nvcc (gpu/truth_table.py): the hand-written H200
expectations agree with archwheel's rules, and the comparison logic counts disagreements. The
parts that need nvcc are in tests/integration/nvcc/test_smoke_truth_table.py.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from archwheel.facts.arch import ArchList
from tests.support.paths import ROOT

SCRIPT = ROOT / "gpu" / "truth_table.py"


def load_truth_table() -> ModuleType:
    spec = importlib.util.spec_from_file_location("truth_table", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tt = load_truth_table()


@pytest.mark.parametrize("case", list(tt.EXPECTED_ON_9_0))
def test_hand_written_h200_expectations_agree_with_archwheel_rules(case: str) -> None:
    spelling = {c: s for c, s, _ in tt.CASES}[case]
    images = tt._images(ArchList.parse(spelling).to_gencode())
    assert tt._rules_verdict(images, "9.0") == tt.EXPECTED_ON_9_0[case][0]


def _fake_attempt(behaviour: dict[str, dict[str, Any]]) -> Any:
    """A FAKE GPU for the parent's logic: per case, which modes ran and with which arch."""

    def attempt(
        case: str, route: str, mode: str, build_dir: Path, timeout: float
    ) -> dict[str, Any]:
        row = behaviour.get(case, {})
        info = {"name": "NVIDIA H200 (fake)", "cc": "9.0", "cuda_driver_api_version": 13000}
        if mode in row:
            return {**info, "case": case, "route": route, "mode": mode, "ok": True,
                    "cuda_arch": row[mode]}  # fmt: skip
        error = (
            "CUDA_ERROR_NO_BINARY_FOR_GPU: no kernel image is available for execution on the device"
        )
        return {**info, "case": case, "route": route, "mode": mode, "ok": False,
                "stage": "cuModuleLoadData", "code": 209, "error": error}  # fmt: skip

    return attempt


H200_AS_EXPECTED: dict[str, dict[str, Any]] = {
    "8.0+PTX": {"default": 800, "force": 800},
    "9.0": {"native": 900, "default": 900},
    "9.0a": {"native": 900, "default": 900},
    "compute_90": {"default": 900, "force": 900},
    "9.0+PTX": {"native": 900, "default": 900, "force": 900},
    # 8.0 (sm_80 only), 10.0, 12.0+PTX: nothing runs
}


def _manifest(folder: Path) -> Path:
    cases = {}
    for case, spelling, stem in tt.CASES:
        images = tt._images(ArchList.parse(spelling).to_gencode())
        cases[case] = {"images": images, "fatbin": f"{stem}.fatbin", "library": f"lib{stem}.so"}
    (folder / "manifest.json").write_text(json.dumps({"nvcc": "fake", "cases": cases}))
    return folder


def test_table_logic_with_a_device_that_behaves_as_expected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tt, "_attempt", _fake_attempt(H200_AS_EXPECTED))
    monkeypatch.setattr(tt, "_can_run", lambda path, cc: {"available": False, "why": "fake"})
    code = tt.table(_manifest(tmp_path), tmp_path / "out", 5)
    document = json.loads((tmp_path / "out" / "truth_table.json").read_text())
    assert code == 0
    assert document["mismatches"] == 0
    observed = {(r["case"], r["route"]): r["observed"] for r in document["rows"]}
    assert observed[("8.0+PTX", "fatbin")] == "jit-only"
    assert observed[("12.0+PTX", "runtime")] == "no-kernel-image"
    assert observed[("9.0a", "fatbin")] == "native"
    markdown = (tmp_path / "out" / "truth_table.md").read_text()
    assert "# GPU truth table: NVIDIA H200 (fake) (cc 9.0)" in markdown
    assert (
        "| 8.0+PTX | fatbin | sm_80 compute_80 | **jit-only** | jit-only | jit-only |" in markdown
    )


def test_table_logic_counts_a_disagreement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A driver that (wrongly) ran the sm_80 cubin on 9.0 must be flagged, not averaged away.
    wrong = {**H200_AS_EXPECTED, "8.0": {"native": 800, "default": 800}}
    monkeypatch.setattr(tt, "_attempt", _fake_attempt(wrong))
    monkeypatch.setattr(
        tt, "_can_run", lambda path, cc: {"available": True, "verdict": "no-kernel-image"}
    )
    code = tt.table(_manifest(tmp_path), tmp_path / "out", 5)
    document = json.loads((tmp_path / "out" / "truth_table.json").read_text())
    assert code == 1
    bad = [(r["case"], r["route"]) for r in document["rows"] if not r["agrees"]]
    # 8.0 on both routes; and can-run's fixed "no-kernel-image" disagrees with every row that ran
    assert ("8.0", "fatbin") in bad
    assert ("8.0", "runtime") in bad
    assert ("9.0", "fatbin") in bad
    assert ("10.0", "fatbin") not in bad
    assert document["mismatches"] == len(bad)
