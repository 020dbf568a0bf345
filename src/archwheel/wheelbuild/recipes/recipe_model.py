"""The recipe model: the frozen objects a validated recipe is made of.

``recipe.py`` reads and validates a recipe file into these (``load_recipe``); everything after
it (the plan, the source fetcher, the images, the repair step, provenance) reads them. The
constants that say how an arch list enters a build (formats, consumers, their default
variables) and which variables archwheel reserves for itself live here too: the plan and the
validation both need them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from packaging.version import InvalidVersion, Version

from archwheel.errors import RecipeError
from archwheel.facts import arch_consumers, arch_grammars
from archwheel.facts.arch import ArchList
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild.compile.parallel import ParallelSwitches
from archwheel.wheelbuild.recipes.torch_pin import TorchOptions

RecipeKind = Literal["pytorch", "extension"]
SourceKind = Literal["path", "git", "sdist", "debian"]
ToolchainSource = Literal["image", "pypi"]
ArchFormat = Literal["torch", "cmake", "gencode", "project"]

ARCH_FORMATS: Mapping[str, str] = MappingProxyType(
    {
        "torch": "TORCH_CUDA_ARCH_LIST syntax: 8.0;9.0+PTX",
        "cmake": "CMAKE_CUDA_ARCHITECTURES syntax: 80-real;90",
        "gencode": "nvcc flags: -gencode=arch=compute_80,code=sm_80 ...",
    }
)
# The consumer a format implies when [arch] consumer is not given (torch: by recipe kind), and
# the format each consumer implies (docs/building-extensions.md, "Who reads the arch list").
DEFAULT_CONSUMER: Mapping[str, str] = MappingProxyType(
    {"cmake": arch_consumers.CMAKE, "gencode": arch_consumers.NVCC}
)
CONSUMER_FORMAT: Mapping[str, ArchFormat] = MappingProxyType(
    {
        arch_consumers.TORCH_CMAKE: "torch",
        arch_consumers.CPP_EXTENSION: "torch",
        arch_consumers.CMAKE_FINDCUDA: "torch",
        arch_consumers.CMAKE: "cmake",
        arch_consumers.NVCC: "gencode",
    }
)
DEFAULT_ARCH_VARIABLE: Mapping[str, str] = MappingProxyType(
    {
        "torch": "TORCH_CUDA_ARCH_LIST",
        "cmake": "CMAKE_CUDA_ARCHITECTURES",
        "gencode": "CUDA_GENCODE_FLAGS",
    }
)

# Variables archwheel sets itself in the build container; a recipe may not override them
# (refused when the recipe is read). plan.py sets them; a variable it sets that is missing here
# is still refused, when the plan is made (plan.refuse_replaced), never replaced silently, and
# tests/unit/wheelbuild/test_build_plan.py checks that this set holds every one it sets.
RESERVED_ENV = frozenset(
    {
        "PATH",
        "HOME",
        "CUDA_HOME",
        "CUDA_PATH",
        "SOURCE_DATE_EPOCH",
        "PYTHONDONTWRITEBYTECODE",
        "TZ",
        "LC_ALL",
        "SCCACHE_DIR",
        "SCCACHE_CACHE_SIZE",
        "SCCACHE_IDLE_TIMEOUT",
        "SCCACHE_SERVER_UDS",
        "SCCACHE_C_CUSTOM_CACHE_BUSTER",
        "SCCACHE_NO_CACHE",
        "CCACHE_DISABLE",
        "ARCHWHEEL_SRC",
        "ARCHWHEEL_DIST",
        "ARCHWHEEL_BUILD",
        "ARCHWHEEL_PYTHON",
        "ARCHWHEEL_ARCH_LIST",
        "ARCHWHEEL_JOBS",
        "ARCHWHEEL_WHOLE_CALL_DIR",
        "ARCHWHEEL_WHOLE_CALL_ERR",
    }
)


@dataclass(frozen=True)
class SourcePatch:
    """One ``[[source.patches]]`` entry: a unified diff beside the recipe, with its sha256."""

    path: Path  # absolute
    sha256: str
    reason: str = ""  # why the recipe patches the source (plan, provenance)

    def describe(self) -> str:
        """The patch for the plan: its file name and the start of its sha256."""
        return f"{self.path.name} (sha256 {self.sha256[:12]})"


@dataclass(frozen=True)
class SourceSpec:
    """Where the source comes from: a local folder, a git ref, or an sdist with its sha256."""

    kind: SourceKind
    path: Path | None = None  # local folder (absolute), or a local sdist file
    git_url: str | None = None
    ref: str | None = None
    submodules: bool = False
    sdist: str | None = None  # URL or absolute path
    sha256: str | None = None
    # git URL prefix -> mirror prefix, for the repository and every submodule (git's
    # url.<mirror>.insteadOf); from [source] mirror, or ARCHWHEEL_GIT_MIRROR / --git-mirror
    mirrors: tuple[tuple[str, str], ...] = ()
    # An sdist named by project and version, found on the package index pip is configured
    # with (build/index_sdist.py fills ``sdist`` with its URL before the source is resolved).
    project: str | None = None
    project_version: str | None = None
    # Applied in order to the resolved source, on the host, before the build sees it
    # (wheelbuild/sources/source_patches.py).
    patches: tuple[SourcePatch, ...] = ()
    # A Debian source package (wheelbuild/sources/debian_source.py): its name (the version is
    # ``project_version``, ``sha256`` the .dsc's when pinned) and the suite whose archive
    # serves it.
    debian: str | None = None
    suite: str | None = None

    def describe(self) -> str:
        """The source for the plan: where it comes from, and the patches applied to it."""
        patched = (
            "; patched with " + ", ".join(p.describe() for p in self.patches)
            if self.patches
            else ""
        )
        return self._where() + patched

    def _where(self) -> str:
        if self.kind == "path":
            return f"path {self.path}"
        if self.kind == "git":
            subs = " with submodules" if self.submodules else ""
            return f"git {self.git_url} @ {self.ref}{subs}"
        if self.kind == "debian":
            pin = f", .dsc sha256 {self.sha256[:12]}..." if self.sha256 else ""
            return (
                f"Debian source package {self.debian} {self.project_version} from the archive "
                f"of archwheel/debian:{self.suite} (apt-get source, dpkg-source -x{pin})"
            )
        if self.project and not self.sdist:
            return (
                f"sdist {self.project} {self.project_version} from the package index "
                f"(sha256 {str(self.sha256)[:12]}...)"
            )
        return f"sdist {self.sdist} (sha256 {str(self.sha256)[:12]}...)"


@dataclass(frozen=True)
class ToolchainSpec:
    """The CUDA toolkit, the base image, and whether nvcc is in the image or from PyPI.

    ``cuda`` is None only for a recipe that pins torch without a ``+cuXYZ`` label and writes no
    ``cuda``: the CUDA is then the pinned torch wheel's, known once the wheel is fetched
    (``wheelbuild/images/toolkit.py`` ``with_torch_cuda`` validates the recipe's document again with
    it). ``cuda_from`` says where the value came from: ``recipe`` (written), ``torch-label``,
    ``torch-wheel``, or ``torch`` while still unresolved.
    """

    cuda: CudaVersion | None
    base_image: str
    source: ToolchainSource
    pypi_packages: tuple[str, ...] = ()
    pypi_prefix: str = ""
    cudart_soname: str = ""
    system_packages: tuple[str, ...] = ()
    # The base image pinned by its ID (sha256:...): a tag that now names another image is
    # refused before anything is built on it. None: the tag floats (provenance records the ID).
    base_image_id: str | None = None
    cuda_from: str = "recipe"
    # a control file of a Debian source package whose Build-Depends the builder image gets
    # (sources/debian_depends.py), and the packages of it left out
    build_depends: str | None = None
    build_depends_exclude: tuple[str, ...] = ()
    # archive components added to the base image's apt entries (contrib, non-free)
    apt_components: tuple[str, ...] = ()
    # empty packages installed in their place: what the recipe provides otherwise
    stand_ins: tuple[str, ...] = ()


@dataclass(frozen=True)
class ArchInput:
    """How the arch list enters the build: which variable, read by which code (``consumer``).

    ``torch`` is the torch release whose parsers apply (the pinned build requirement, or the
    version a PyTorch recipe builds); ``cuda`` the toolkit (project grammars depend on it).
    """

    variable: str
    format: ArchFormat
    default: ArchList
    consumer: str = arch_consumers.NVCC
    torch: str | None = None
    cuda: CudaVersion | None = None

    def render(self, arch_list: ArchList) -> str:
        """Exactly what the consumer accepts; ``ArchListError`` (its rule, the nearest list)."""
        return arch_grammars.render(
            self.consumer, arch_list, torch=self.torch, cuda=self.cuda, variable=self.variable
        )


@dataclass(frozen=True)
class BuildSpec:
    """A recipe's ``[build]`` table: the build command and its requirements, environment, network
    and job sizing.
    """

    command: str
    requirements: tuple[str, ...] = ()
    # run before the command, in the same container; `--stop-after configure` stops after it
    configure: str = ""
    # where configure writes build.ninja, relative to the source (PyTorch: build): --targets
    build_folder: str = ""
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    network: bool = False  # network allowed while compiling
    jobs_variable: str = "MAX_JOBS"
    memory_per_job_gib: float = 2.0
    parallel: ParallelSwitches = field(default_factory=ParallelSwitches)
    # true: archwheel's mode; false: as nvcc leaves them; a -compress-mode name (compression.py)
    compress_fatbins: bool | str = True


@dataclass(frozen=True)
class RepairConfig:
    """A recipe's ``[repair]`` table as written: ``pins = "official"`` takes every value from
    the pin table of the recipe's PyTorch release and CUDA version; other keys override it."""

    pins: str | None = None  # "official" or None
    values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class GateSpec:
    """``[gate]``: what the gate at the end of a build lets pass beyond the request.

    ``extra_archs``: archs the request did not ask for are reported, not refused (PyTorch adds
    ``sm_90a`` kernels to a 9.0 build on purpose; an extension that carries them ignored the
    arch list). None: the default of the recipe's kind (PyTorch true, extensions false).
    ``unbuilt_cuda``: globs of ``.cu`` files of the source that nvcc need not compile (tests,
    other platforms); every other one must be, or a module fell back to CPU."""

    extra_archs: bool | None = None
    unbuilt_cuda: tuple[str, ...] = ()

    def allows_extra(self, kind: str) -> bool:
        """Whether archs beyond the request pass the gate for a recipe of ``kind``."""
        return self.extra_archs if self.extra_archs is not None else kind == "pytorch"


@dataclass(frozen=True)
class Recipe:
    """A validated recipe. ``sha256`` is the hash of the file's bytes (recorded in provenance)."""

    name: str
    path: Path
    sha256: str
    kind: RecipeKind
    version: str
    description: str
    source: SourceSpec
    toolchain: ToolchainSpec
    python_versions: tuple[str, ...]
    arch: ArchInput
    build: BuildSpec
    smoke_snippet: str | None = None
    source_date_epoch: int | None = None
    repair: RepairConfig | None = None  # None: no [repair] table, the wheel is not repaired
    torch: TorchOptions = field(default_factory=TorchOptions)
    gate: GateSpec = field(default_factory=GateSpec)
    # [python] ignore_requires_python: build for a Python the project excludes (provenance)
    ignore_requires_python: bool = False
    # The document the recipe was validated from, as read from its file: validated again, not
    # read again, once the CUDA of its pinned torch wheel is known (recipe.with_cuda_of_torch).
    document: Mapping[str, Any] = field(
        default_factory=lambda: MappingProxyType({}), compare=False, repr=False
    )

    @property
    def default_python(self) -> str:
        """The Python a build targets when none is requested: the recipe's first."""
        return self.python_versions[0]

    @property
    def cuda(self) -> CudaVersion:
        """The recipe's CUDA; RecipeError while it is still to be read from the torch wheel."""
        if self.toolchain.cuda is None:
            raise RecipeError(
                f"{self.path}: [toolchain] cuda is not set and the pinned torch wheel has not "
                "been read yet",
                hint='set [toolchain] cuda (e.g. "13.0"), or pin torch==X.Y.Z+cuXYZ',
            )
        return self.toolchain.cuda

    def sort_key(self) -> tuple[Version, CudaVersion]:
        """Version, then CUDA: the newest recipe sorts last (an unparsable version as 0)."""
        try:
            version = Version(self.version)
        except InvalidVersion:
            version = Version("0")
        return version, self.toolchain.cuda or CudaVersion(0, 0)
