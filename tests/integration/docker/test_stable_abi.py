"""One wheel for several torch releases, on real builds and real torches.

archwheel's stable-ABI example (``recipes/stable-ops.toml``: torch's stable ABI only,
``TORCH_TARGET_VERSION`` 2.12) is built once against torch 2.14.1 in a container; its recipe's
``[torch] loads_with`` makes the build run can-load against torch 2.12.1, 2.13.0 and 2.14.0 from
the package index (by range requests) and state in ``Requires-Dist`` the range of those that
load it. Then, in fresh virtual environments holding the real torch 2.12.1, 2.13.0 and 2.14.1,
pip installs the wheel from a folder without any index (so the claim must admit the torch that
is there), its CPU operator runs, and can-load's verdict against each torch wheel matches the
real loader. archwheel's ordinary C++-API example (libtorch-ops, the same session's build) is
checked by the same test the other way: it loads with its own torch only.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet

from tests.support.cli import CliRun
from tests.support.components import fetch_wheel
from tests.support.extension_builds import Built, Session, ok
from tests.support.real_import import check_against_import
from tests.support.venvs import copy_torch_venv

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.realwheel]

# The torches of the real imports: the build's own and two older releases (all CUDA 13.0 builds
# from the index; 2.13.0 and 2.12.1 share 2.14.1's venv by hard links, tests/support/venvs.py).
TORCHES = ("2.12.1", "2.13.0", "2.14.1")
CLAIMED = ("2.12.1", "2.13.0", "2.14.0", "2.14.1")  # the recipe's [torch] loads_with


def _metadata(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return z.read(name).decode().splitlines()


def _torch_requirements(wheel: Path) -> list[str]:
    return [
        line.removeprefix("Requires-Dist: ")
        for line in _metadata(wheel)
        if line.startswith("Requires-Dist: torch")
    ]


@pytest.fixture(scope="module")
def stable(extension_builds: Session) -> Built:
    return ok(extension_builds, "stable-ops")


def test_the_build_claims_the_range_its_checks_backed(stable: Built) -> None:
    provenance: dict[str, Any] = stable.provenance
    claim = provenance["torch_range"]
    assert isinstance(claim, dict), provenance.keys()
    checks = {c["version"]: c for c in claim["checks"]}
    # the build's own torch is the load gate's; each other release was checked after the build
    assert set(checks) == set(CLAIMED) - {"2.14.1"}
    assert {v: c["verdict"] for v, c in checks.items()} == dict.fromkeys(checks, "loads")
    assert claim["passed"] == list(CLAIMED)
    assert claim["failed"] == [] and claim["unchecked_excluded"] == []
    assert claim["requirement"] == "torch>=2.12.1,<2.15"
    # the wheel says exactly that, and nothing else about torch; no +pt label (local_version
    # false): one wheel for the range
    assert _torch_requirements(stable.wheel) == ["torch>=2.12.1,<2.15"]
    assert stable.wheel.name.startswith("archwheel_stable_ops-0.1.0-")
    # the provenance describes the delivered bytes (the wheel was re-packed with the claim)
    assert provenance["wheel"]["sha256"] == stable.document["sha256"]


def test_the_stable_wheel_has_no_cpp_api_symbol(stable: Built, cli_run: CliRun) -> None:
    """What makes it portable: its undefined symbols are torch's stable C shims, not C++."""
    code, out, err = cli_run(
        "can-load", str(stable.wheel), "--with", str(fetch_wheel("torch==2.14.1")),
        "--format", "json",
    )  # fmt: skip
    assert code == 0, out + err
    (lib,) = json.loads(out)["libraries"]
    assert lib["path"] == "archwheel_stable_ops/_C.abi3.so"
    assert lib["opened_as"] == "dlopened"  # no PyInit__C: the package's torch.ops.load_library


@pytest.mark.parametrize("torch", TORCHES)
def test_the_stable_example_installs_loads_and_runs_with_each_torch(
    stable: Built, torch: str, cli_run: CliRun, tmp_path: Path
) -> None:
    python = copy_torch_venv(torch, tmp_path / "venv")
    # can-load against that torch's wheel agrees with the real loader (RTLD_NOW after torch)
    doc = check_against_import(cli_run, python, stable.wheel, fetch_wheel(f"torch=={torch}"),
                               tmp_path / "unpacked")  # fmt: skip
    assert doc["verdict"] == "loads"
    # pip, with no index at all, installs it next to the torch that is there: the claim admits it
    folder = tmp_path / "wheels"
    folder.mkdir()
    (folder / stable.wheel.name).symlink_to(stable.wheel)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index",
         "--find-links", str(folder), "archwheel-stable-ops"],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # the operator registers and its CPU kernel computes (the recipe's smoke snippet, CPU part)
    snippet = stable.wheel.with_name(stable.wheel.name + ".smoke.py")
    run = subprocess.run(
        [str(python), str(snippet)], capture_output=True, text=True, check=False, timeout=600,
        env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"}, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"CPU kernel correct with torch {torch}" in run.stdout


@pytest.mark.parametrize("torch", TORCHES)
def test_the_ordinary_api_example_loads_with_its_own_torch_only(
    extension_builds: Session, torch: str, cli_run: CliRun, tmp_path: Path
) -> None:
    """libtorch-ops (torch's ordinary C++ API, built against 2.14.1): can-load and the real
    loader agree, and only 2.14.1 loads it."""
    wheel = ok(extension_builds, "libtorch-ops").wheel
    assert _torch_requirements(wheel) == ["torch==2.14.1"]
    python = copy_torch_venv(torch, tmp_path / "venv")
    doc: dict[str, Any] = check_against_import(
        cli_run, python, wheel, fetch_wheel(f"torch=={torch}"), tmp_path / "unpacked"
    )
    assert doc["verdict"] == ("loads" if torch == "2.14.1" else "does-not-load")
    if torch != "2.14.1":
        (lib,) = doc["libraries"]
        assert any("another torch version" in c for c in lib["causes"])
        assert not SpecifierSet("==2.14.1").contains(torch)  # and pip would refuse it anyway
