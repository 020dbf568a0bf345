"""can-load on extension wheels archwheel built from its shipped recipes (torch 2.14.1, CUDA 13.0),
each verdict checked against the real loader: the wheel unpacked next to a real torch installed
in a virtual environment, ``import torch``, then every extension module opened with RTLD_NOW.

The wheels come from the session's ``extension_builds`` (built once, shared with
test_build_torch_extensions.py); the environments from tests/support/venvs.py (each torch wheel
downloaded once).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import CliRun
from tests.support.components import fetch_wheel
from tests.support.extension_builds import Session, ok
from tests.support.real_import import check_against_import, open_after_torch
from tests.support.venvs import TORCH_CU12_SPEC

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.realwheel]


def judged(
    cli_run: CliRun, python: Path, wheel: Path, torch: Path, tmp: Path
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """can-load's JSON document, checked against the real import (each module in a process of
    its own), and its libraries by path."""
    doc: dict[str, Any] = check_against_import(cli_run, python, wheel, torch, tmp, separate=True)
    return doc, {str(lib["path"]): lib for lib in doc["libraries"]}


@pytest.mark.heavy
def test_torch_scatter_loads_with_2_14_1_and_not_with_the_cuda_2_13_0(
    extension_builds: Session,
    torch_venv: Path,
    torch_2130_venv: Path,
    torch_wheel: Path,
    cli_run: CliRun,
    tmp_path: Path,
) -> None:
    """torch-scatter's autograd Functions use torch's ordinary C++ API: built against 2.14.1's
    headers, they call two torch::autograd functions the CUDA build of 2.13.0 does not export."""
    wheel = ok(extension_builds, "torch-scatter-2.1.2").wheel
    loads, _ = judged(cli_run, torch_venv, wheel, torch_wheel, tmp_path / "a")
    assert loads["verdict"] == "loads"
    old, libs = judged(
        cli_run, torch_2130_venv, wheel, fetch_wheel("torch==2.13.0"), tmp_path / "b"
    )
    assert old["verdict"] == "does-not-load"
    failing = [lib for lib in libs.values() if lib["verdict"] == "does-not-load"]
    assert failing
    for lib in failing:
        assert lib["missing_libraries"] == []  # the CUDA 2.13.0 has every library it needs
        symbols = lib["missing_symbols"]
        assert isinstance(symbols, list)
        names = sorted(s.get("demangled", s["name"]).split("(")[0] for s in symbols)
        if shutil.which("c++filt"):
            assert names == [
                "torch::autograd::_wrap_outputs",
                "torch::autograd::fire_node_creation_hooks",
            ], lib
        assert any("another torch version" in str(c) for c in lib["causes"])
    assert any("torch==2.14.1" in c for c in old["metadata_conflicts"])


def test_cuda_extension_next_to_a_cpu_torch(
    extension_builds: Session, torch_cpu_venv: Path, cli_run: CliRun, tmp_path: Path
) -> None:
    """The libtorch example's module needs libc10_cuda.so and libtorch_cuda.so, which a +cpu
    torch does not have."""
    wheel = ok(extension_builds, "libtorch-ops").wheel
    doc, libs = judged(cli_run, torch_cpu_venv, wheel, fetch_wheel("torch==2.13.0+cpu"), tmp_path)
    assert doc["verdict"] == "does-not-load"
    lib = libs["archwheel_torch_ops/_ops.so"]
    assert {"libc10_cuda.so", "libtorch_cuda.so"} <= set(lib["missing_libraries"])
    assert any("CPU-only torch" in str(c) for c in lib["causes"])


def test_cuda_13_extension_next_to_a_cuda_12_torch(
    extension_builds: Session, torch_cu12_venv: Path, cli_run: CliRun, tmp_path: Path
) -> None:
    """torch 2.9.1 from the index is built with CUDA 12.8 (libcudart.so.12, nvidia-*-cu12); the
    extension, built with CUDA 13.0, needs libcudart.so.13."""
    wheel = ok(extension_builds, "libtorch-ops").wheel
    torch = fetch_wheel(TORCH_CU12_SPEC)
    code, out, err = cli_run("can-load", str(wheel), "--with", str(torch), "--format", "json")
    assert code == 1, out + err
    doc = json.loads(out)
    assert doc["verdict"] == "does-not-load" and doc["torch"] == torch.name
    assert "libcudart.so.12" in doc["assumed_loaded_by_torch"]
    (lib,) = [x for x in doc["libraries"] if x["path"] == "archwheel_torch_ops/_ops.so"]
    assert "libcudart.so.13" in lib["missing_libraries"]
    causes = " ".join(lib["causes"])
    assert "CUDA major mismatch" in causes and "uses CUDA 12" in causes
    code, out, _err = cli_run("can-load", str(wheel), "--with", str(torch))
    assert code == 1 and "libcudart.so.13" in out and "CUDA major mismatch" in out
    # the real loader, after `import torch` of 2.9.1
    opened, message, mapped = open_after_torch(
        torch_cu12_venv, wheel, "archwheel_torch_ops/_ops.so", tmp_path, "libcudart.so.13"
    )
    print(f"real loader: opened={opened} {message!r}; libcudart.so.13 mapped from {mapped}")
    if opened:  # only a libcudart.so.13 from outside every wheel (this host's CUDA toolkit in
        # ld.so.cache) lets it load; a clean machine with torch 2.9.1 has none
        assert mapped and not any("site-packages" in m for m in mapped), mapped
        assert lib["missing_symbols"] == []
    else:
        named = [*lib["missing_libraries"], *(s["name"] for s in lib["missing_symbols"])]
        assert any(n in message for n in named), (message, named)
