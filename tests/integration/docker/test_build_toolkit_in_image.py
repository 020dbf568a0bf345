"""The "toolkit already in the base image" build path (``source = "image"``) on a real engine.

NVIDIA's ``nvidia/cuda:*-devel`` and PyTorch's builder images cannot be pulled here (no
registry), so a local stand-in with CUDA 13.0 where those images keep it (tests/support/cuda_image.py)
plays their part: a copy of the example recipe declaring CUDA 12.8 on it is refused after the
probe, the same recipe declaring CUDA 13.0 builds with the image's own toolkit and passes the
audit gate, and an image holding two toolkits gets the one the recipe asks for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from archwheel.binary.scan.inputs import scan_path
from archwheel.effects.engine import ContainerEngine, EngineSettings
from archwheel.effects.pipconfig import PipSettings
from archwheel.effects.settings import Settings
from archwheel.facts.arch import CodeKind
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild.images.builder_image import (
    BuilderImageSpec,
    context_hash,
    ensure_builder_image,
    probe_base_toolkit,
    probe_toolchain,
)
from archwheel.wheelbuild.recipes.recipe_model import ToolchainSpec
from tests.support.containers_support import containers_created, containers_with_label
from tests.support.cuda_image import REPOSITORY, build_cuda_in_image
from tests.support.paths import CACHE, ROOT

EXAMPLE = ROOT / "recipes" / "example.toml"
CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]
BASE = "archwheel/debian:bookworm"

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@dataclass(frozen=True)
class CudaImage:
    tag: str  # archwheel-test/cuda-in-image:<random>
    nvcc: str  # the full nvcc version inside, from its wheel: 13.0.88


def _docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check)


def remove_with_builders(tag: str) -> None:
    """Remove ``tag`` and the builder images made on it (their tags hash the name, so no later
    session would reuse them); shared layers go with the last image that holds them."""
    for builder in builder_images_on(tag):
        _docker("image", "rm", "--force", builder, check=False)
    _docker("image", "rm", tag, check=False)


@pytest.fixture(scope="session")
def base_image(docker_engine: str) -> str:
    """archwheel's Debian base (``archwheel base-image``: made once, then reused)."""
    made = subprocess.run([*CLI, "base-image"], capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr[-2000:]
    return BASE


@pytest.fixture(scope="session")
def cuda_image(base_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CudaImage]:
    tag = f"{REPOSITORY}:{uuid.uuid4().hex[:10]}"
    try:
        work = tmp_path_factory.mktemp("cuda-in-image")
        nvcc = build_cuda_in_image(tag, base_image, CACHE, work)
        yield CudaImage(tag, nvcc)
    finally:
        remove_with_builders(tag)


@pytest.fixture(scope="module")
def ccache_volume(docker_engine: str) -> Iterator[str]:
    volume = f"archwheel-test-ccache-{uuid.uuid4().hex[:8]}"
    yield volume
    _docker("volume", "rm", "--force", volume, check=False)


def image_recipe(tmp_path: Path, image: str, cuda: str) -> Path:
    """A copy of the example recipe switched to the toolkit inside ``image``."""
    text = EXAMPLE.read_text()
    replacements = {
        'path = "../examples/cuda-kernels"': f'path = "{ROOT / "examples" / "cuda-kernels"}"',
        'cuda = "13.0"': f'cuda = "{cuda}"',
        'base_image = "archwheel/debian:bookworm"': f'base_image = "{image}"',
        'source = "pypi"': 'source = "image"',
    }
    for old, new in replacements.items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    recipe = tmp_path / f"example-cuda{cuda}.toml"
    recipe.write_text(text)
    return recipe


def run_build(
    recipe: Path, out: Path, volume: str, label: str, *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "build", "--recipe", str(recipe), "--out", str(out), "--ccache-volume", volume,
         *args],
        env={**os.environ, "ARCHWHEEL_RUN_LABEL": label, "COLUMNS": "200"},
        capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip


def containers_from(image: str) -> list[str]:
    """Every container (running or not) made from ``image`` or an image built on it."""
    return _docker("ps", "--all", "--quiet", "--filter", f"ancestor={image}").stdout.split()


def builder_images_on(image: str, cuda: str | None = None) -> list[str]:
    labels = [f"org.archwheel.base-image={image}"]
    if cuda:
        labels.append(f"org.archwheel.cuda={cuda}")
    args = [arg for label in labels for arg in ("--filter", f"label={label}")]
    return sorted(set(_docker("images", "--quiet", *args).stdout.split()))


def wheels_under(folder: Path) -> list[Path]:
    """Wheels, and partial wheels (``.part``), anywhere under ``folder`` (rejected/ too)."""
    return sorted(p for p in folder.rglob("*") if p.name.endswith((".whl", ".part")))


def image_id(reference: str) -> str:
    return _docker("image", "inspect", "--format", "{{.Id}}", reference).stdout.strip()


# -- through the command line --------------------------------------------------------------------


def test_recipe_for_another_cuda_is_refused_after_the_probe(
    cuda_image: CudaImage, ccache_volume: str, tmp_path: Path
) -> None:
    recipe = image_recipe(tmp_path, cuda_image.tag, "12.8")
    out = tmp_path / "dist"
    label = f"archwheel.test={uuid.uuid4().hex}"
    since = time.time()
    proc = run_build(recipe, out, ccache_volume, label, "--arch", "8.0")

    assert proc.returncode == 2, proc.stderr[-3000:]  # docs/exit-codes.md: a bad recipe
    error = [line for line in proc.stderr.splitlines() if line.startswith("archwheel: error:")]
    assert error == [
        f"archwheel: error: {recipe}: [toolchain] cuda is 12.8, but base image {cuda_image.tag} "
        f"carries CUDA 13.0 (nvcc {cuda_image.nvcc}) in /usr/local/cuda-13.0 "
        '(use a base image with CUDA 12.8, or set cuda = "13.0")'
    ]
    assert "Traceback" not in proc.stderr
    # The probe ran in one container of the base image itself, which is gone; nothing was
    # built on the image for a recipe it cannot serve, and no wheel exists.
    assert len(containers_created(["docker"], label, since)) == 1
    assert containers_with_label(["docker"], label) == []
    assert containers_from(cuda_image.tag) == []
    assert builder_images_on(cuda_image.tag, "12.8") == []
    assert wheels_under(out) == []
    (log,) = (out / "logs").glob("*.log")
    assert log.read_text().splitlines()[-1] == error[0]


def test_base_image_without_a_toolkit_is_refused_before_building(
    base_image: str, ccache_volume: str, tmp_path: Path
) -> None:
    recipe = image_recipe(tmp_path, base_image, "13.0")  # Debian: no CUDA toolkit inside
    label = f"archwheel.test={uuid.uuid4().hex}"
    builders = builder_images_on(base_image)
    proc = run_build(recipe, tmp_path / "dist", ccache_volume, label, "--arch", "8.0")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert (
        f'{recipe}: [toolchain] source = "image", but base image {BASE} has no CUDA toolkit '
        "(no nvcc in /usr/local/cuda-13.0, /usr/local/cuda or on PATH)"
    ) in proc.stderr
    assert "Traceback" not in proc.stderr
    assert containers_with_label(["docker"], label) == []
    assert builder_images_on(base_image) == builders  # nothing was built on it
    # The output folder holds only the log of the attempt, which ends with the reason.
    files = [p for p in (tmp_path / "dist").rglob("*") if p.is_file()]
    assert len(files) == 1, files
    assert files[0].parent.name == "logs"
    last = files[0].read_text().splitlines()[-1]
    assert last.startswith(f'archwheel: error: {recipe}: [toolchain] source = "image"'), last


def test_recipe_matching_the_image_builds_with_its_toolkit(
    cuda_image: CudaImage, ccache_volume: str, tmp_path: Path
) -> None:
    recipe = image_recipe(tmp_path, cuda_image.tag, "13.0")
    out = tmp_path / "dist"
    label = f"archwheel.test={uuid.uuid4().hex}"
    proc = run_build(recipe, out, ccache_volume, label, "--arch", "8.0", "--format", "json")

    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    wheel = Path(result["wheel"])
    assert wheels_under(out) == [wheel]
    assert result["audit"]["ok"] is True

    provenance = json.loads(Path(result["provenance"]).read_text())
    toolchain = provenance["toolchain"]
    assert toolchain["source"] == "image"  # provisioning used the image's toolkit
    assert toolchain["nvcc"] == cuda_image.nvcc  # read inside the container
    assert toolchain["cuda"] == "13.0"
    assert toolchain["cuda_home"] == "/usr/local/cuda-13.0"
    images = provenance["images"]
    assert images["base"] == cuda_image.tag
    assert images["base_id"] == image_id(cuda_image.tag)
    assert images["builder_id"] == image_id(images["builder"])
    assert provenance["recipe"]["path"] == str(recipe)
    assert provenance["arch"]["value"] == "-gencode=arch=compute_80,code=sm_80"

    # The audit, again and independently of the build's gate: sm_80 and nothing else.
    inventory = scan_path(wheel)
    assert inventory.complete
    found = {
        entry.target.name(entry.kind)
        for library in inventory.libraries
        for entry in library.entries
        if entry.kind in (CodeKind.SASS, CodeKind.PTX)
    }
    assert found == {"sm_80"}
    assert containers_with_label(["docker"], label) == []
    assert containers_from(cuda_image.tag) == []


# -- an image with two toolkits, whose ENV names another CUDA version -----------------------------

FAKE_128_DOCKERFILE = """\
FROM {base}
# A second toolkit cannot be had here (PyPI's CUDA 12.x wheels have no nvcc): a fake nvcc that
# only answers --version stands in for CUDA 12.8, made the image's default as in an image whose
# newest toolkit is not the one a recipe wants.
RUN mkdir -p /usr/local/cuda-12.8/bin \\
    && printf '#!/bin/sh\\necho "fake nvcc for archwheel tests"\\necho "Cuda compilation tools, \
release 12.8, V12.8.93"\\n' > /usr/local/cuda-12.8/bin/nvcc \\
    && chmod 755 /usr/local/cuda-12.8/bin/nvcc \\
    && rm /usr/local/cuda && ln -s /usr/local/cuda-12.8 /usr/local/cuda
ENV CUDA_VERSION=12.8.93
"""


@pytest.fixture(scope="module")
def two_toolkit_image(
    cuda_image: CudaImage, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    context = tmp_path_factory.mktemp("two-toolkits")
    (context / "Dockerfile").write_text(FAKE_128_DOCKERFILE.format(base=cuda_image.tag))
    tag = f"{REPOSITORY}-two:{uuid.uuid4().hex[:10]}"
    made = _docker("build", "--network", "none", "--force-rm", "--tag", tag, str(context),
                   check=False)  # fmt: skip
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    try:
        yield tag
    finally:
        remove_with_builders(tag)


@pytest.mark.parametrize(
    ("cuda", "home", "nvcc"),
    [("13.0", "/usr/local/cuda-13.0", None), ("12.8", "/usr/local/cuda-12.8", "12.8.93")],
)
def test_builder_takes_the_recipes_toolkit_among_several(
    cuda_image: CudaImage,
    two_toolkit_image: str,
    tmp_path: Path,
    cuda: str,
    home: str,
    nvcc: str | None,
) -> None:
    """The image's ENV CUDA_VERSION=12.8.93 must not decide which toolkit a 13.0 build gets."""
    engine = ContainerEngine(
        EngineSettings.create(
            "docker",
            Settings.from_environ(
                {**os.environ, "ARCHWHEEL_RUN_LABEL": f"archwheel.test={uuid.uuid4().hex}"}
            ),
            config_dir=tmp_path,
        ),
        echo=None,
    )
    version = CudaVersion.parse(cuda)
    expected_nvcc = nvcc or cuda_image.nvcc
    found = probe_base_toolkit(engine, two_toolkit_image, version, ROOT / "docker")
    assert (found.cuda_home, found.cuda, found.nvcc) == (home, version, expected_nvcc)

    spec = BuilderImageSpec(
        base_image=two_toolkit_image,
        toolchain=ToolchainSpec(version, two_toolkit_image, "image"),
        python="3.11",
        dockerfile_sha256=context_hash(ROOT / "docker"),
    )
    builder = ensure_builder_image(
        engine,
        spec,
        image_id(two_toolkit_image),
        docker_dir=ROOT / "docker",
        pip=PipSettings(),
        work_dir=tmp_path,
    )
    toolchain = probe_toolchain(engine, builder.tag)
    assert (toolchain.cuda_home, toolchain.cuda, toolchain.nvcc) == (home, version, expected_nvcc)
    assert toolchain.source == "image"
    assert containers_from(two_toolkit_image) == []
