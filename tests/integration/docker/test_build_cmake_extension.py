"""A real CMake-built torch extension: TorchOpt 0.7.3 against torch 2.14.1 (CUDA 13.0).

TorchOpt's setup.py drives CMake (CMake's CUDA language, FindCUDA's arch selection, pybind11
from its package), built from its sdist on the package index pip is configured with, for one
arch (``9.0``), by ``archwheel build --recipe torchopt-0.7.3``. Its recipe writes no
``[toolchain] cuda``: the CUDA comes from the pinned torch wheel. One session builds it once
(``built``); the compiler-cache test rebuilds it once more with the same cache volume
(``rebuilt``) and reads the C++ hits. Every container carries a label unique to the session.

Budget on the 2-core CI machine: 6 tests in about 4.5 minutes with the torch image present (the
build about 3.5 min, the rebuild 0.5 min, the smoke 15 s); docs/building-extensions.md, "Measured".
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from archwheel.facts import arch_consumers, arch_grammars
from tests.support.containers_support import containers_with_label
from tests.support.extension_builds import device_images

CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]
RECIPE = "torchopt-0.7.3"
ARCH = "9.0"
# What `import torchopt` needs besides torch (its Requires-Dist), fetched on the host for the
# offline smoke container; and setuptools, which torch 2.14.1 requires (>= 77.0.3) and which the
# fresh venv's own, older copy would otherwise shadow.
RUNTIME_DEPS = ("optree", "numpy", "graphviz", "typing-extensions", "setuptools")

# TorchOpt with its torch image is about 10 minutes on 2 cores: `nox -s heavy` (docs/maintainers/performance.md).
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.realwheel, pytest.mark.heavy]


@dataclass(frozen=True)
class Built:
    returncode: int
    stderr: str
    document: dict[str, object]
    wheel: Path
    provenance: dict[str, object]
    log: str
    seconds: float


@dataclass(frozen=True)
class Session:
    env: dict[str, str]
    label: str
    volume: str
    root: Path

    def build(self, name: str) -> Built:
        out = self.root / name
        mark = time.monotonic()
        proc = subprocess.run(
            [*CLI, "build", "--recipe", RECIPE, "--arch", ARCH, "--out", str(out),
             "--ccache-volume", self.volume, "--format", "json"],
            env=self.env, capture_output=True, text=True, timeout=3600, check=False,
        )  # fmt: skip
        seconds = time.monotonic() - mark
        document = json.loads(proc.stdout) if proc.returncode == 0 else {}
        provenance = json.loads(Path(str(document["provenance"])).read_text()) if document else {}
        log = Path(str(document["log"])).read_text() if document else ""
        wheel = Path(str(document.get("wheel", out / "missing.whl")))
        return Built(proc.returncode, proc.stderr, document, wheel, provenance, log, seconds)


@pytest.fixture(scope="session")
def cmake_session(
    docker_engine: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Session]:
    label = f"archwheel.test={uuid.uuid4().hex}"
    volume = f"archwheel-test-ccache-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", "ARCHWHEEL_RUN_LABEL": label}
    made = subprocess.run(
        [*CLI, "base-image"], env=env, capture_output=True, text=True, timeout=1800, check=False
    )
    assert made.returncode == 0, made.stderr[-2000:]
    yield Session(env, label, volume, tmp_path_factory.mktemp("cmake-extension"))
    subprocess.run(["docker", "volume", "rm", "--force", volume], capture_output=True, check=False)


@pytest.fixture(scope="session")
def built(cmake_session: Session) -> Built:
    result = cmake_session.build("first")
    assert result.returncode == 0, result.stderr[-4000:]
    print(f"{RECIPE} built in {result.seconds:.0f} s: {result.provenance['timings_s']}")
    return result


@pytest.fixture(scope="session")
def rebuilt(cmake_session: Session, built: Built) -> Built:
    result = cmake_session.build("again")
    assert result.returncode == 0, result.stderr[-4000:]
    print(f"{RECIPE} rebuilt in {result.seconds:.0f} s: {result.provenance['timings_s']}")
    return result


def extension_modules(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return sorted(n for n in z.namelist() if n.endswith(".so") or ".so." in n)


def test_every_extension_module_holds_exactly_sm_90(built: Built) -> None:
    modules = extension_modules(built.wheel)
    assert modules and all(m.startswith("torchopt/_C") for m in modules), modules
    images = device_images(built.wheel)
    assert sorted(images) == modules, (images, modules)  # the CUDA kernels are in every module
    assert all(found == {"sm_90"} for found in images.values()), images
    audit = built.provenance["audit"]
    assert isinstance(audit, dict) and audit["ok"] is True


def test_the_cuda_came_from_the_torch_and_the_wheel_says_what_it_was_built_against(
    built: Built,
) -> None:
    assert "+pt2.14.1cu130-" in built.wheel.name
    with zipfile.ZipFile(built.wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        meta = z.read(name).decode()
    assert "Requires-Dist: torch==2.14.1" in meta.split("\n\n")[0].splitlines()
    torch = built.provenance["torch"]
    assert isinstance(torch, dict)
    assert torch["version"] == "2.14.1+cu130" and torch["cuda"] == "13.0"
    assert built.provenance["toolchain"]["nvcc"].startswith("13.0.")  # type: ignore[index]
    assert "[toolchain] cuda: 13.0, from torch-2.14.1" in built.stderr
    source = built.provenance["source"]
    assert isinstance(source, dict) and source["kind"] == "sdist"


def test_cmake_drove_nvcc_with_the_requested_arch_only(built: Built) -> None:
    assert "Building CUDA object" in built.log  # CMake's CUDA language, not cpp_extension
    flags = set(re.findall(r"arch=compute_\d+,code=sm_\d+", built.log))
    assert flags == {"arch=compute_90,code=sm_90"}, flags
    # What CMake's own cuda_select_nvcc_arch_flags made of the value is what archwheel's model
    # of it (consumer cmake-findcuda) says.
    arch = built.provenance["arch"]
    assert isinstance(arch, dict) and arch["value"] == ARCH
    (printed,) = re.findall(r'CUDA_ARCH_FLAGS: "([^"]*)"', built.log)
    model = arch_grammars.read(arch_consumers.CMAKE_FINDCUDA, str(arch["value"]))
    assert tuple(printed.split(";")) == model.flags


def test_wheel_installs_into_a_fresh_venv_with_that_torch_and_runs_on_cpu(
    built: Built, cmake_session: Session
) -> None:
    torch = built.provenance["torch"]
    assert isinstance(torch, dict)
    folder = built.wheel.parent / ".smoke"
    deps = folder / "deps"
    deps.mkdir(parents=True, exist_ok=True)
    fetched = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
         "--python-version", "3.11", "--implementation", "cp",
         "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64",
         "--dest", str(deps), *RUNTIME_DEPS],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert fetched.returncode == 0, fetched.stderr[-2000:]
    snippet = built.provenance["smoke"]["snippet"]  # type: ignore[index]
    (folder / "smoke.py").write_text(str(snippet))
    (folder / built.wheel.name).write_bytes(built.wheel.read_bytes())
    site = "/opt/archwheel/venv/lib/python3.11/site-packages"
    script = (
        "set -e; python3 -m venv /tmp/v; "
        f"echo {site} > /tmp/v/lib/python3.11/site-packages/torch-image.pth; "
        "/tmp/v/bin/python -m pip install --no-index --find-links /wheel/deps --quiet "
        f"/wheel/{built.wheel.name}; "
        "/tmp/v/bin/python -m pip check; cd /tmp && /tmp/v/bin/python /wheel/smoke.py"
    )
    proc = subprocess.run(
        ["docker", "run", "--rm", "--network", "none",
         "--label", cmake_session.label.replace("=", "=smoke-", 1),
         "--mount", f"type=bind,source={folder},target=/wheel,readonly",
         "--entrypoint", "sh", str(torch["image"]), "-c", script],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "torchopt._C fused Adam on CPU: correct" in proc.stdout


def test_a_rebuild_gets_its_cpp_objects_from_the_compiler_cache(
    built: Built, rebuilt: Built
) -> None:
    # Every object CMake compiles in the rebuild (C++ and CUDA, counted from its log) is a hit.
    cxx = len(re.findall(r"Building CXX object", rebuilt.log))
    cuda = len(re.findall(r"Building CUDA object", rebuilt.log))
    assert cxx >= 3 and cuda >= 1, (cxx, cuda)
    first = built.provenance["compiler_cache"]
    again = rebuilt.provenance["compiler_cache"]
    assert isinstance(first, dict) and isinstance(again, dict)
    assert first["misses"] >= cxx + cuda, first  # the first build compiled them all
    # sccache's sub-phases: each C++ object is a C/C++ step, each CUDA object a CUDA step
    # (its host side) beside its device steps; only CMake's own probes, compiled from new
    # temporary files each run (src.cxx, detect_cuda_version.cc), may miss, as C/C++ steps
    # An object's call is answered whole (the whole-call cache: no sccache step), or else by
    # sccache's steps.
    phases = again["by_phase"]
    whole = again["whole_call"]["hits"]
    step_hits = sum(phases.get(name, {"hits": 0})["hits"] for name in ("C/C++", "CUDA"))
    assert step_hits + whole >= cxx + cuda, (phases, whole)
    assert all(row["misses"] == 0 for name, row in phases.items() if name != "C/C++"), phases
    assert again["fallbacks"] == 0, again
    assert rebuilt.wheel.read_bytes() == built.wheel.read_bytes()


def test_no_container_is_left(built: Built, cmake_session: Session) -> None:
    assert containers_with_label(["docker"], cmake_session.label) == []
