"""The package index going away in the middle of the toolkit download: on its own
(in ``nox -s tests``) and inside a whole ``archwheel build`` that must make a builder image
(``costly``: ``nox -s faults``).

The host-side ``pip download`` of a CUDA toolkit's component wheels (``download_toolchain``, the
first step of making a builder image) against a real HTTP server on 127.0.0.1 that serves a PEP
503 page for a real NVIDIA wheel (nvidia-cuda-cupti 13.0.85, about 11 MB, fetched from the index
pip is configured with) and ends every connection after half the file. What must hold: one
``ToolError`` line naming the toolkit and pip's reason, within a bounded time; no wheel (whole
or partial) in the destination; with the index back, the same call gets the real file.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from archwheel.effects.pipconfig import PipSettings
from archwheel.errors import ToolError
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild.images.builder_image import download_toolchain
from archwheel.wheelbuild.images.toolkit import manylinux_platforms
from archwheel.wheelbuild.recipes.recipe import pypi_toolchains
from archwheel.wheelbuild.recipes.recipe_model import ToolchainSpec
from tests.support.containers_support import containers_with_label
from tests.support.paths import CACHE
from tests.support.range_server import range_server, simple_index

pytestmark = [pytest.mark.faults, pytest.mark.realwheel, pytest.mark.slow]

SPEC = "nvidia-cuda-cupti==13.0.85"
TOOLCHAIN = ToolchainSpec(
    CudaVersion(13, 0), "archwheel/debian:bookworm", "pypi", pypi_packages=(SPEC,),
    pypi_prefix="nvidia/cu13", cudart_soname="libcudart.so.13",
)  # fmt: skip
PLATFORMS = manylinux_platforms((2, 36))


@pytest.fixture(scope="module")
def cupti_wheel() -> Path:
    folder = CACHE / "toolchain-fault-wheels"
    found = sorted(folder.glob("nvidia_cuda_cupti-13.0.85-*.whl"))
    if not found:
        download_toolchain(TOOLCHAIN, "3.11", folder, PipSettings.from_host(), None,
                           platforms=PLATFORMS)  # fmt: skip
        found = sorted(folder.glob("nvidia_cuda_cupti-13.0.85-*.whl"))
    assert len(found) == 1, found
    return found[0]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_index_that_goes_away_mid_download_fails_in_one_line_and_leaves_no_wheel(
    cupti_wheel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pip reads this machine's configuration too (its mirrors as extra indexes, find-links):
    # only the test's index may answer, or the fault would be bypassed
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for name in [n for n in os.environ if n.startswith("PIP_") and n != "PIP_CONFIG_FILE"]:
        monkeypatch.delenv(name)
    served = tmp_path / "served"
    served.mkdir()
    with range_server(served) as server:
        cut = simple_index(served, "nvidia-cuda-cupti", [cupti_wheel], mode="cut")
        whole = simple_index(served, "nvidia-cuda-cupti", [cupti_wheel], mode="files")
        dest = tmp_path / "dest"
        dest.mkdir()
        mark = time.monotonic()
        with pytest.raises(ToolError) as raised:
            download_toolchain(TOOLCHAIN, "3.11", dest, PipSettings(index_url=server.url + cut),
                               None, platforms=PLATFORMS)  # fmt: skip
        seconds = time.monotonic() - mark
        message = raised.value.message
        assert "\n" not in message
        assert message.startswith("pip could not download the CUDA 13.0 toolchain wheels: ")
        assert server.requests["cut"] >= 1
        assert list(dest.iterdir()) == []  # nothing half-downloaded where the image build looks
        assert seconds < 300, seconds  # bounded: pip's retries, not a hang
        print(f"cut mid-download: {seconds:.1f} s, {server.requests['cut']} attempts: {message}")
        # the index back: the same call gets the real wheel
        download_toolchain(TOOLCHAIN, "3.11", dest, PipSettings(index_url=server.url + whole),
                           None, platforms=PLATFORMS)  # fmt: skip
    (got,) = dest.glob("*.whl")
    assert got.name == cupti_wheel.name and _sha(got) == _sha(cupti_wheel)


# -- inside a whole build -----------------------------------------------------------------------

CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]
REPO = Path(__file__).resolve().parents[3]
WHOLE = ToolchainSpec(
    CudaVersion(13, 0), "archwheel/debian:bookworm", "pypi",
    pypi_packages=tuple(f"{name}==13.0.*" for name in pypi_toolchains()[13]["packages"]),
    pypi_prefix="nvidia/cu13", cudart_soname="libcudart.so.13",
)  # fmt: skip


@pytest.fixture(scope="module")
def toolkit_wheels() -> list[Path]:
    """The CUDA 13.0 toolkit's five component wheels, as a builder image gets them today."""
    folder = CACHE / "toolchain-fault-wheels" / "13.0"
    found = sorted(folder.glob("*.whl"))
    if len(found) != len(WHOLE.pypi_packages):
        folder.mkdir(parents=True, exist_ok=True)
        for old in found:
            old.unlink()
        download_toolchain(WHOLE, "3.11", folder, PipSettings.from_host(), None,
                           platforms=PLATFORMS)  # fmt: skip
        found = sorted(folder.glob("*.whl"))
    assert len(found) == len(WHOLE.pypi_packages), found
    return found


def _images(repository: str) -> set[str]:
    proc = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}",
                           repository], capture_output=True, text=True, check=True)  # fmt: skip
    return set(proc.stdout.split())


@pytest.fixture
def own_base_image(docker_engine: str) -> Iterator[str]:
    """The base image under a name of the test's own: the same image, a builder image tag that
    no other build has (the tag hashes the base image's name), so this build must make it."""
    env = {**os.environ}
    made = subprocess.run([*CLI, "base-image"], env=env, capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    name = f"archwheel-test/debian:index-fault-{uuid.uuid4().hex[:8]}"
    subprocess.run(["docker", "tag", "archwheel/debian:bookworm", name], check=True)
    builders = _images("archwheel/builder")
    try:
        yield name
    finally:
        made_here = sorted(_images("archwheel/builder") - builders)
        subprocess.run(["docker", "rmi", "--force", name, *made_here], capture_output=True,
                       check=False)  # fmt: skip


@pytest.mark.costly
@pytest.mark.docker
@pytest.mark.nvcc
def test_an_index_that_goes_away_while_a_build_makes_its_builder_image(
    toolkit_wheels: list[Path], own_base_image: str, tmp_path: Path
) -> None:
    """``archwheel build`` of the example on a base image whose builder image does not exist
    yet, the index cutting every toolkit wheel half-way: one line, exit 4 (a tool failed), no
    image, no container, no build-context folder, nothing in --out. With the index back the
    same command downloads the toolkit, makes the image (the engine's layer cache makes that
    seconds: the same context as the usual image's) and the same wheel (sha256) as a build on
    the usual image."""
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    recipe = (REPO / "recipes" / "example.toml").read_text()
    recipe = recipe.replace('path = "../examples/cuda-kernels"',
                            f'path = "{REPO / "examples" / "cuda-kernels"}"')  # fmt: skip
    recipe = recipe.replace('base_image = "archwheel/debian:bookworm"',
                            f'base_image = "{own_base_image}"')  # fmt: skip
    assert own_base_image in recipe and str(REPO) in recipe
    (recipes / "example.toml").write_text(recipe)
    volume = f"archwheel-test-index-fault-{uuid.uuid4().hex[:8]}"
    # only the test's index may answer pip (this machine's mirrors and find-links would bypass
    # the fault); nothing from the shared remote cache either
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.pop("ARCHWHEEL_CACHE_URL", None)
    env.update({"PIP_CONFIG_FILE": os.devnull, "PYTHONUNBUFFERED": "1", "COLUMNS": "200",
                "TMPDIR": str(tmp_path / "tmp")})  # fmt: skip
    (tmp_path / "tmp").mkdir()

    def build(out: Path, recipe: str, *extra: str) -> tuple[subprocess.CompletedProcess[str], str]:
        label = f"archwheel.test={uuid.uuid4().hex}"
        args = [*CLI, "build", "--recipe", recipe, "--arch", "8.0", "--out", str(out),
                "--ccache-volume", volume, "--format", "json", *extra]  # fmt: skip
        proc = subprocess.run(args, env={**env, "ARCHWHEEL_RUN_LABEL": label},
                              capture_output=True, text=True, timeout=1800,
                              check=False)  # fmt: skip
        return proc, label

    served = tmp_path / "served"
    served.mkdir()
    try:
        undisturbed, _ = build(tmp_path / "undisturbed", "example")
        assert undisturbed.returncode == 0, undisturbed.stderr[-3000:]
        builders = _images("archwheel/builder")
        with range_server(served) as server:
            for wheel in toolkit_wheels:
                project = wheel.name.split("-")[0].replace("_", "-")
                cut = simple_index(served, project, [wheel], mode="cut")
                whole = simple_index(served, project, [wheel], mode="files")
            out = tmp_path / "out"
            mark = time.monotonic()
            failed, label = build(out, str(recipes / "example.toml"), "--index-url",
                                  server.url + cut)  # fmt: skip
            seconds = time.monotonic() - mark
            assert failed.returncode == 4, failed.stderr[-3000:]
            errors = [line for line in failed.stderr.splitlines() if line.startswith("archwheel:")]
            assert len(errors) == 1, failed.stderr[-3000:]
            assert errors[0].startswith(
                "archwheel: error: pip could not download the CUDA 13.0 toolchain wheels: "
            ), errors
            assert "Traceback" not in failed.stderr and server.requests["cut"] >= 1
            assert _images("archwheel/builder") == builders  # no image, not even a half one
            assert containers_with_label(["docker"], label) == []
            assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == []
            assert not out.exists() or [p.name for p in out.iterdir() if p.name != "logs"] == []
            print(f"cut during the builder image's download: {seconds:.1f} s: {errors[0]}")
            mark = time.monotonic()
            again, _ = build(out, str(recipes / "example.toml"), "--index-url",
                             server.url + whole)  # fmt: skip
            print(f"the same build with the index back: {time.monotonic() - mark:.0f} s")
            # the image was made from a fresh download: every toolkit wheel came from the index
            assert server.requests["files"] >= len(toolkit_wheels), server.requests
        assert again.returncode == 0, again.stderr[-3000:]
        assert len(_images("archwheel/builder") - builders) == 1
        assert json.loads(again.stdout)["sha256"] == json.loads(undisturbed.stdout)["sha256"]
    finally:
        subprocess.run(["docker", "volume", "rm", "--force", volume], capture_output=True,
                       check=False)  # fmt: skip
