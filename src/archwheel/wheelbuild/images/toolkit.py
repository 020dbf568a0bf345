"""The toolkit and the torch a torch-extension build compiles against, made once and kept.

Two things here:

* **Platform tags.** A host-side ``pip download`` for the container must ask for every
  manylinux tag the container's glibc accepts (glibc 2.36 on Debian bookworm:
  ``manylinux_2_36`` down to ``manylinux2014`` and the older aliases), not ``manylinux2014``
  only: NVIDIA's CUDA 13 component wheels are tagged ``manylinux_2_27``/``_2_28``.

* **The torch image.** For a recipe pinning ``torch==X.Y.Z`` the builder image gets one more
  layer: torch from the cached wheel, with its dependencies, and NVIDIA's ``cuda-toolkit``
  metapackage at the version that torch pins, plus the compiler's extras (nvcc, crt, nvvm,
  cccl), and ninja, installed in one ``pip install`` into ``/opt/archwheel/venv`` (so the
  component wheels torch runs with and the toolkit it is compiled with are the same files).
  ``/usr/local/cuda`` then points at ``site-packages/nvidia/cu13``, completed with ``lib64``
  and unversioned libraries. The container is committed as ``archwheel/torch:<hash>``
  (builder image ID, torch wheel sha256, toolkit requirement, extra packages, script): every
  later build against the same torch starts from that image and neither downloads nor unpacks
  those gigabytes again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from archwheel.effects.engine import ContainerEngine, ContainerSpec, Mount
from archwheel.effects.pipconfig import PipSettings
from archwheel.effects.process import LineSink
from archwheel.errors import BuildError, RecipeError, ToolError
from archwheel.facts.base_pythons import load_base_pythons
from archwheel.facts.catalog import CudaFacts
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild.images.baseimage import is_local_base, suite_of
from archwheel.wheelbuild.recipes.recipe import pypi_toolchains, with_cuda_of_torch
from archwheel.wheelbuild.recipes.recipe_model import Recipe, ToolchainSpec
from archwheel.wheelbuild.recipes.recipe_torch import with_torch
from archwheel.wheelbuild.recipes.torch_pin import (
    TorchPin,
    TorchWheel,
    check_torch_wheel,
    compile_toolkit_requirement,
    fetch_torch_wheel,
    local_label,
    read_torch_wheel,
)

TORCH_REPOSITORY = "archwheel/torch"
TORCH_IMAGE_FORMAT = 1
CONTAINER_WHEELS = "/opt/archwheel/torch-wheels"
IMAGE_SITE_PACKAGES_LABEL = "org.archwheel.site-packages"
EXTRA_PACKAGES = ("ninja",)
# When the base image's glibc is not known before a container runs: torch's own tag.
FALLBACK_GLIBC = (2, 28)
_LEGACY = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}


def manylinux_platforms(glibc: tuple[int, int], machine: str = "x86_64") -> tuple[str, ...]:
    """Every manylinux tag a glibc ``2.N`` system accepts, newest first (PEP 600 + aliases)."""
    major, minor = glibc
    if major != 2 or minor < 5:
        raise ToolError(f"glibc {major}.{minor} is not a glibc manylinux wheels target")
    tags: list[str] = []
    for n in range(minor, 4, -1):
        tags.append(f"manylinux_2_{n}_{machine}")
        if n in _LEGACY and (n != 5 or machine in ("x86_64", "i686")):
            tags.append(f"{_LEGACY[n]}_{machine}")
    return tuple(tags)


def known_glibc(base_image: str) -> tuple[int, int] | None:
    """The glibc of a base image known without running it (archwheel's Debian images)."""
    if is_local_base(base_image):
        suite = load_base_pythons().suite(suite_of(base_image))  # Debian's libc6 version
        return suite.glibc if suite is not None else None
    return None


def parse_glibc(text: str) -> tuple[int, int] | None:
    """``glibc 2.36`` (getconf) or ``ldd (Debian GLIBC 2.36-9) 2.36`` -> (2, 36)."""
    found = re.findall(r"\b2\.([0-9]+)\b", text)
    return (2, int(found[-1])) if found else None


def image_glibc(engine: ContainerEngine, image: str) -> tuple[int, int]:
    """The glibc of ``image``: known for archwheel's Debian images, else read in a container."""
    known = known_glibc(image)
    if known is not None:
        return known
    with engine.container(ContainerSpec(image=image, network="none")) as container:
        text = container.output(
            ["sh", "-c", "getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>&1 | head -n 1"]
        )
    found = parse_glibc(text)
    if found is None:
        raise ToolError(f"cannot tell the glibc version of {image} (it said {text.strip()!r})")
    return found


# -- the torch image ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TorchBuild:
    """Everything a build against a pinned torch needs, decided on the host."""

    pin: TorchPin
    wheel: TorchWheel
    wheel_sha256: str
    toolkit_requirement: str | None  # None: the base image's own toolkit (source "image")
    extra_packages: tuple[str, ...] = EXTRA_PACKAGES
    local_version: str | None = None  # the label added to the wheel's version; None: off
    pin_requirement: str | None = None  # Requires-Dist added to the wheel; None: off
    loads_with: tuple[str, ...] = ()  # [torch] loads_with: checked after the build (gate.py)

    @property
    def cuda(self) -> CudaVersion | None:
        """The CUDA of the pinned torch wheel; None for a CPU build."""
        return self.wheel.cuda

    def to_json_dict(self) -> dict[str, object]:
        """The torch build as the provenance's ``torch`` entry."""
        return {
            "requirement": self.pin.requirement,
            "replaces": self.pin.replaces,
            "version": self.wheel.version,
            "cuda": str(self.wheel.cuda) if self.wheel.cuda else None,
            "wheel": self.wheel.filename,
            "wheel_sha256": self.wheel_sha256,
            "toolkit_requirement": self.toolkit_requirement,
            "extra_packages": list(self.extra_packages),
            "local_version": self.local_version,
            "requires_dist": self.pin_requirement,
            "loads_with": list(self.loads_with),
        }


def toolkit_requirement_for(wheel: TorchWheel, toolchain: ToolchainSpec) -> str | None:
    """What provides CUDA_HOME: torch's cuda-toolkit pin + compile extras, for a PyPI toolkit.

    A recipe with ``pypi_packages`` of its own, or a torch without a cuda-toolkit pin (older
    releases pin ``nvidia-*-cu12`` wheels), keeps the builder image's toolchain; ``image``
    keeps the base image's.
    """
    if toolchain.source != "pypi":
        return None
    return compile_toolkit_requirement(wheel)


def torch_env_script() -> str:
    """The text of ``data/torch-env.sh``, which installs the pinned torch into the torch image."""
    return resources.files("archwheel.wheelbuild").joinpath("data/torch-env.sh").read_text()


def torch_image_tag(build: TorchBuild, builder_image_id: str) -> str:
    """``archwheel/torch:<hash>`` of the torch image's inputs: a changed input makes a new image."""
    payload = json.dumps(
        {
            "format": TORCH_IMAGE_FORMAT,
            "builder_image_id": builder_image_id,
            "torch_wheel_sha256": build.wheel_sha256,
            "toolkit": build.toolkit_requirement,
            "extra": list(build.extra_packages),
            "script": hashlib.sha256(torch_env_script().encode()).hexdigest(),
        },
        sort_keys=True,
    )
    return f"{TORCH_REPOSITORY}:{hashlib.sha256(payload.encode()).hexdigest()[:16]}"


@dataclass(frozen=True)
class TorchImage:
    """The builder image plus the pinned torch: tag, ID, new or reused, its site-packages."""

    tag: str
    image_id: str
    created: bool
    site_packages: str  # /opt/archwheel/venv/lib/python3.X/site-packages


def ensure_torch_image(
    engine: ContainerEngine,
    build: TorchBuild,
    *,
    builder_tag: str,
    builder_image_id: str,
    python: str,
    toolchain: ToolchainSpec,
    pip: PipSettings,
    sink: LineSink | None = None,
) -> TorchImage:
    """The builder image plus the pinned torch and its toolkit; made once, then reused."""
    tag = torch_image_tag(build, builder_image_id)
    site = f"/opt/archwheel/venv/lib/python{python}/site-packages"
    existing = engine.image_id(tag)
    if existing:
        if sink:
            sink(f"torch image {tag} exists: torch {build.wheel.version} is not installed again")
        return TorchImage(tag, existing, created=False, site_packages=site)
    prefix = toolchain.pypi_prefix or str(pypi_toolchains().get(13, {}).get("prefix", ""))
    env = {
        "HOME": "/tmp",
        "TORCH_WHEEL": f"{CONTAINER_WHEELS}/{build.wheel.filename}",
        "TOOLKIT_REQUIREMENT": build.toolkit_requirement or "",
        "EXTRA_PACKAGES": " ".join(build.extra_packages),
        "PYPI_PREFIX": prefix,
        "CUDART_SONAME": toolchain.cudart_soname or "libcudart.so.13",
        **pip.container_env(),
    }
    spec = ContainerSpec(
        image=builder_tag,
        network="host",
        user="0:0",
        mounts=(
            *pip.mounts(),
            Mount(str(build.wheel.path.parent), CONTAINER_WHEELS, read_only=True),
        ),
    )
    with engine.container(spec) as container:
        container.call(
            ["sh", "-c", torch_env_script(), "torch-env.sh"],
            env=env,
            user="0:0",
            sink=sink,
            what=f"installing torch {build.wheel.version} and its CUDA toolkit",
        )
        changes = [
            f"LABEL org.archwheel.torch={build.wheel.version}",
            f"LABEL {IMAGE_SITE_PACKAGES_LABEL}={site}",
            "USER 0:0",
        ]
        args = ["commit"]
        for change in changes:
            args += ["--change", change]
        engine.run(*args, container.name, tag, what=f"{engine.name} commit")
    image_id = engine.image_id(tag)
    if image_id is None:
        raise BuildError(f"{engine.name} commit did not produce image {tag}")
    return TorchImage(tag, image_id, created=True, site_packages=site)


def requirements_without_torch(requirements: Sequence[str]) -> tuple[str, ...]:
    """The recipe's requirements other than torch (torch is in the torch image)."""
    return tuple(r for r in requirements if canonicalize_name(Requirement(r).name) != "torch")


def _wheel_sha256(path: Path) -> str:
    """sha256 of a cached wheel, remembered beside it (hashing 600 MB each build is waste)."""
    sidecar = path.with_name(path.name + ".sha256")
    stat = path.stat()
    stamp = f"{stat.st_size}:{stat.st_mtime_ns}"
    if sidecar.is_file():
        stored_stamp, _, digest = sidecar.read_text().strip().partition(" ")
        if stored_stamp == stamp and len(digest) == 64:
            return digest
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    digest = sha.hexdigest()
    sidecar.write_text(f"{stamp} {digest}\n")
    return digest


def pinned_torch_wheel(
    recipe: Recipe, python: str, pip: PipSettings, cache: Path, *, sink: LineSink | None = None
) -> TorchWheel | None:
    """The torch wheel the recipe's pin names for ``python`` on its base image's glibc:
    fetched into the cache (once: ``pip download --no-deps``) and read (``METADATA``,
    ``torch/version.py``). None for a recipe that pins no torch."""
    pin = recipe.torch.pin
    if pin is None:
        return None
    glibc = known_glibc(recipe.toolchain.base_image) or FALLBACK_GLIBC
    path = fetch_torch_wheel(pin, python, manylinux_platforms(glibc), pip, cache, sink=sink)
    return read_torch_wheel(path)


def with_torch_cuda(
    recipe: Recipe,
    python: str,
    pip: PipSettings,
    cache: Path,
    *,
    facts: CudaFacts,
    sink: LineSink | None = None,
) -> tuple[Recipe, TorchWheel | None]:
    """A recipe without ``[toolchain] cuda`` and without a ``+cuXYZ`` pin, validated again with
    the CUDA of its pinned torch wheel (``pinned_torch_wheel``), and that wheel, read, for
    ``prepare_torch``. Any other recipe is returned as it is, and no wheel (None)."""
    pin = recipe.torch.pin
    if recipe.toolchain.cuda is not None or pin is None:
        return recipe, None
    wheel = pinned_torch_wheel(recipe, python, pip, cache, sink=sink)
    assert wheel is not None  # the recipe pins torch
    if wheel.cuda is None:
        raise RecipeError(
            f"{recipe.path}: {pin.requirement} resolved to torch {wheel.version} "
            f"({wheel.filename}), which has no CUDA (torch.version.cuda is None), so "
            "[toolchain] cuda cannot be taken from it",
            hint=f"pin a CUDA build of torch, e.g. torch=={pin.public}+cu130, from an index "
            "that serves it",
        )
    if sink:
        sink(f"[toolchain] cuda: {wheel.cuda}, from {wheel.filename} (torch.version.cuda)")
    resolved = with_cuda_of_torch(recipe, wheel.cuda, facts)
    if pin.replaces:  # built against another torch (--torch): the document has the file's pin
        resolved = with_torch(resolved, str(pin.version))
    # The base image chosen for the Python (python_base.with_base_for), not the document's.
    toolchain = dataclasses.replace(resolved.toolchain, base_image=recipe.toolchain.base_image)
    return dataclasses.replace(resolved, toolchain=toolchain), wheel


def prepare_torch(
    recipe: Recipe,
    python: str,
    pip: PipSettings,
    cache: Path,
    sink: LineSink | None = None,
    *,
    wheel: TorchWheel | None = None,
) -> TorchBuild | None:
    """For a recipe pinning torch: fetch and read its wheel, refuse a contradiction (exit 2).

    Runs on the host before any container: ``pip download --no-deps`` into the archwheel cache
    (once per torch wheel), then ``torch/version.py`` and ``METADATA`` are read; ``wheel``: the
    pin's wheel read already (``with_torch_cuda``'s), neither fetched nor read again.
    """
    options = recipe.torch
    if options.pin is None:
        return None
    if wheel is None:
        wheel = pinned_torch_wheel(recipe, python, pip, cache, sink=sink)
        assert wheel is not None  # the recipe pins torch
    path = wheel.path
    check_torch_wheel(wheel, options.pin, recipe.cuda, recipe.path)
    toolkit = toolkit_requirement_for(wheel, recipe.toolchain)
    if recipe.toolchain.source == "pypi" and toolkit is None:
        raise RecipeError(
            f"{recipe.path}: torch {wheel.version} does not pin NVIDIA's cuda-toolkit "
            "metapackage, so archwheel cannot tell which CUDA components it runs with",
            hint='use [toolchain] source = "image" with a base image that holds CUDA '
            f"{recipe.toolchain.cuda}",
        )
    assert wheel.cuda is not None  # check_torch_wheel refused a CPU build
    label = (
        local_label(options.local_version, wheel.version, wheel.cuda)
        if options.local_version
        else None
    )
    requirement = f"torch=={Version(wheel.version).public}" if options.requires_dist else None
    return TorchBuild(
        pin=options.pin,
        wheel=wheel,
        wheel_sha256=_wheel_sha256(path),
        toolkit_requirement=toolkit,
        local_version=label,
        pin_requirement=requirement,
        loads_with=options.loads_with,
    )
