"""PyTorch itself from its real source, as far as a bounded run goes: Debian's source package
``pytorch`` 2.6.0+dfsg-7 with CUDA 13.0 from the package index
(recipes/pytorch-2.6.0-debian-cu130.toml), on a real Docker engine.

1. ``--stop-after configure`` fetches and verifies the source, makes the builder image with the
   Build-Depends of ``debian/control.cuda`` (Debian's own CUDA left out), runs PyTorch's
   configure offline and proves every CUDA compile of the build.ninja it wrote: exactly sm_80
   and sm_90, and sm_90a only where PyTorch's CMake adds it (``RowwiseScaledMM.cu``,
   ``AsyncMM.cu``), named with its rule, and names the system libraries its link steps link;
2. ``--targets`` on the kept tree builds c10, c10_cuda, three kernels and the cuDNN attention
   file, audits each CUDA object against its step (``RowwiseScaledMM.cu``'s object holds
   sm_90a too) and runs the recipe's repair step on libc10.so and libc10_cuda.so, each set
   beside the official 2.6.0 wheel's. ``Nonzero.cu`` (CUB 3's removed iterators) and
   ``MHA.cpp`` (Debian's cudnn-frontend against CUDA 13's graph API) compile only with the
   recipe's CUDA 13 patches;
3. ``archwheel clean --work`` removes the tree.

The builder image is about 4 GB and the run about 20 minutes on 2 cores from a fresh machine:
``nox -s heavy`` (docs/building-pytorch.md, "From Debian's source package").
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from archwheel.effects.paths import cache_dir

CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]
RECIPE = "pytorch-2.6.0-debian-cu130"
ARCH = "8.0;9.0"
KERNELS = (
    "aten/src/ATen/cuda/Sleep.cu",
    "aten/src/ATen/native/cuda/RowwiseScaledMM.cu",
    "aten/src/ATen/native/cuda/Nonzero.cu",
)
CUDNN_FRONTEND = "aten/src/ATen/native/cudnn/MHA.cpp"


pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.heavy]


def _cache() -> Path:
    """archwheel's cache folder, as the CLI under test finds it (the kept trees are under work/)."""
    return cache_dir(os.environ.get("ARCHWHEEL_CACHE") or os.environ.get("XDG_CACHE_HOME"))


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], env=env, capture_output=True, text=True, timeout=3600, check=False
    )


@pytest.fixture(scope="module")
def session(
    docker_engine: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict[str, str], str, Path]]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    made = _run(env, "base-image", "--suite", "trixie")
    assert made.returncode == 0, made.stderr[-2000:]
    name = f"test-pytorch-{uuid.uuid4().hex[:8]}"
    out = tmp_path_factory.mktemp("pytorch-debian") / "dist"
    yield env, name, out
    cache = _cache()
    shutil.rmtree(cache / "work" / name, ignore_errors=True)


def test_configure_proves_every_cuda_compile(session: tuple[dict[str, str], str, Path]) -> None:
    env, name, out = session
    proc = _run(env, "build", "--recipe", RECIPE, "--arch", ARCH, "--out", str(out),
                "--stop-after", "configure", "--work-name", name, "--format", "json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-5000:]
    document = json.loads(proc.stdout)
    (proof,) = document["configured"]
    assert proof["path"] == "build/build.ninja" and proof["torch"] == "2.6.0"
    assert proof["nvcc"].startswith("13.0")
    assert proof["cuda_steps"] > 300 and proof["deviating"] == 0
    assert proof["exact"] + proof["with_additions"] == proof["cuda_steps"]
    added = {(Path(a["source"]).name, a["image"]) for a in proof["additions"]}
    assert added == {("RowwiseScaledMM.cu", "sm_90a"), ("AsyncMM.cu", "sm_90a")}
    assert "Build-Depends" in proc.stderr and "debian/control.cuda" in proc.stderr
    # Debian's system libraries the whole wheel will link, read from the link steps
    host = set(document["host_libraries"])
    assert {"libsleef.so", "libprotobuf.so", "libnuma.so", "libcpuinfo.so"} <= host
    assert "libnccl.so" not in host  # provided: the recipe's nvidia-nccl-cu13 requirement


def test_a_partial_build_audits_its_objects(session: tuple[dict[str, str], str, Path]) -> None:
    env, name, out = session
    targets = ",".join(("c10", "c10_cuda", *KERNELS, CUDNN_FRONTEND))
    proc = _run(env, "build", "--recipe", RECIPE, "--arch", ARCH, "--out", str(out),
                "--targets", targets, "--work-name", name, "--format", "json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-5000:]
    document = json.loads(proc.stdout)
    found = {Path(c["source"]).name: (c["found"], c["ok"]) for c in document["objects"]}
    assert found == {
        "Sleep.cu": (["sm_80", "sm_90"], True),
        "RowwiseScaledMM.cu": (["sm_80", "sm_90", "sm_90a"], True),
        "Nonzero.cu": (["sm_80", "sm_90"], True),
    }
    cache = _cache()
    objects = cache / "work" / name / "src" / "build" / "caffe2" / "CMakeFiles" / "torch_cuda.dir"
    assert (objects / "__" / f"{CUDNN_FRONTEND}.o").stat().st_size > 0  # a C++ object: no audit
    assert not list(out.glob("*.whl"))
    # the repair step on the libraries it built, beside the official 2.6.0 wheel's
    preview = document["repair_preview"]
    assert preview["wheel"] == "torch-2.6.0+partial-cp313-cp313-linux_x86_64.whl"
    assert preview["against"] == "2.6.0/cu124 (CUDA 12.4)"
    assert preview["repair"]["platform"] == "linux_x86_64"
    rows = {row["library"]: row for row in preview["libraries"]}
    assert set(rows) == {"libc10.so", "libc10_cuda.so"}
    for row in rows.values():  # unversioned, as the official (the recipe's no-soversion patch)
        assert row["soname"] == row["official_soname"] == row["library"]
        assert row["rpath"].endswith("$ORIGIN/../../nvidia/cu13/lib:$ORIGIN")
    assert "libcudart.so.13" in rows["libc10_cuda.so"]["more"]
    assert "libcudart.so.12" in rows["libc10_cuda.so"]["less"]
    assert "libnuma.so.1" in rows["libc10.so"]["more"]  # Debian's system library (USE_NUMA)


def test_clean_removes_the_kept_tree(session: tuple[dict[str, str], str, Path]) -> None:
    env, name, _ = session
    proc = _run(env, "clean", "--work", name)
    assert proc.returncode == 0, proc.stderr
    assert "removed the kept build tree" in proc.stdout
