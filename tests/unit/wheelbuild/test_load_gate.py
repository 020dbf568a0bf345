"""The build's load gate (build/gate.load_gate) on compiled fake wheels (g++ only): can-load of the
built wheel against the torch wheel it was built with, one line for the error and provenance."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from archwheel.wheelbuild.wheel.gate import load_gate
from tests.support.can_load_fakes import TAG, Fakes, make_wheel


def test_a_wheel_that_loads_passes(fakes: Fakes) -> None:
    verdict = load_gate(fakes.ext, fakes.torch_new)
    assert verdict.ok and verdict.verdict == "loads"
    assert verdict.torch == fakes.torch_new.name
    assert verdict.summary == f"all 1 libraries load next to {fakes.torch_new.name}"
    (lib,) = verdict.libraries
    assert lib["verdict"] == "loads" and lib["missing_symbols"] == []
    document = json.loads(json.dumps(verdict.to_json_dict()))  # what provenance records
    assert document["ok"] is True and document["libraries"][0]["path"] == lib["path"]


def test_a_symbol_the_torch_lacks_fails_naming_it_demangled(fakes: Fakes) -> None:
    verdict = load_gate(fakes.ext, fakes.torch_old)
    assert not verdict.ok and verdict.verdict == "does-not-load"
    (lib,) = verdict.libraries
    assert lib["missing_symbols"] == (
        ["c10::foo(int)"] if shutil.which("c++filt") else ["_ZN3c103fooEi"]
    )
    assert verdict.summary.startswith(f"does not load next to {fakes.torch_old.name}: myext/_ext.")
    assert ("undefined c10::foo" if shutil.which("c++filt") else "_ZN3c103fooEi") in verdict.summary
    assert "built against another torch version" in verdict.summary
    assert "\n" not in verdict.summary


def test_a_library_found_nowhere_fails_naming_it(fakes: Fakes) -> None:
    verdict = load_gate(fakes.ext_cuda13, fakes.torch_cu12)
    assert not verdict.ok
    assert "cuext/_cuda." in verdict.summary
    assert "needs libcudart.so.13 (found nowhere)" in verdict.summary
    assert "CUDA major mismatch" in verdict.summary


def test_a_symbol_version_beyond_the_platform_tag_fails(fakes: Fakes) -> None:
    verdict = load_gate(fakes.ext_glibc, fakes.torch_new)
    assert not verdict.ok
    assert "GLIBC_2.36" in verdict.summary and "manylinux_2_28" in verdict.summary


def test_what_cannot_be_checked_is_recorded_not_refused(fakes: Fakes, tmp_path: Path) -> None:
    """A wheel without shared libraries: nothing to load (the audit gate already refuses a wheel
    without device code); the verdict is unknown, and says why."""
    pure = make_wheel(tmp_path, "pure", "1.0", {}, tag=TAG)
    verdict = load_gate(pure, fakes.torch_new)
    assert verdict.ok and verdict.verdict == "unknown"
    assert "no shared library inside" in verdict.summary
