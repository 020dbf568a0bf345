"""The shape of a recipe file (``recipes/*.toml``, docs/builds.md) as typed msgspec Structs.

Each table is one Struct: its keys, their types, which are required and their defaults;
``facts.typed.decode`` refuses a wrong type, a missing key and an unknown one (with the closest
known key) in the recipe's words (``[build] comand: unknown key``). A key whose absence means
something (``[source] path`` or ``git``) is ``None`` when absent. What a value must be beyond
its type (a CUDA version, a sha256, a folder inside the wheel) ``wheelbuild.recipes.recipe`` checks.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, field

from archwheel.facts.typed import Document, NonBlank


class RecipeMeta(Document, frozen=True, kw_only=True):
    """``[recipe]``: the name (default: the file's stem), kind, version, description."""

    name: str | None = None
    kind: str = "extension"
    version: str = "0"
    description: str = ""
    source_date_epoch: int | None = None


class PatchDoc(Document, frozen=True, kw_only=True):
    """One ``[[source.patches]]``: a diff beside the recipe and its sha256."""

    path: NonBlank
    sha256: NonBlank
    reason: str = ""


class SourceDoc(Document, frozen=True, kw_only=True):
    """``[source]``: exactly one of ``path``, ``git`` (+ ``ref``), ``sdist`` (+ ``sha256``),
    ``project`` (+ ``version``, ``sha256``), ``debian`` (+ ``version``, optional ``suite`` and
    ``sha256``: the ``.dsc``'s)."""

    path: NonBlank | None = None
    git: NonBlank | None = None
    ref: NonBlank | None = None
    submodules: bool = False
    sdist: NonBlank | None = None
    sha256: NonBlank | None = None
    mirror: dict[str, str] | None = None
    project: NonBlank | None = None
    version: NonBlank | None = None
    debian: NonBlank | None = None
    suite: NonBlank | None = None
    patches: tuple[PatchDoc, ...] = ()


class ToolchainDoc(Document, frozen=True, kw_only=True):
    """``[toolchain]``: the CUDA (else the pinned torch's), the base image, where nvcc is."""

    cuda: NonBlank | None = None
    base_image: NonBlank
    base_image_id: str | None = None
    source: str = "image"
    pypi_packages: tuple[str, ...] | None = None
    system_packages: tuple[str, ...] = ()
    apt_components: tuple[str, ...] = ()
    stand_ins: tuple[str, ...] = ()
    build_depends: NonBlank | None = None
    build_depends_exclude: tuple[str, ...] = ()


class PythonDoc(Document, frozen=True, kw_only=True):
    """``[python]``: the Python versions built for."""

    versions: tuple[str, ...] = ("3.11",)
    ignore_requires_python: bool = False


class ArchDoc(Document, frozen=True, kw_only=True):
    """``[arch]``: how the arch list enters the build, and its default."""

    variable: str | None = None
    format: str | None = None
    consumer: str | None = None
    default: NonBlank


_BUILD_EXT = 'true, false or "auto"'
_COMPRESS = 'true, false or a -compress-mode ("size", "balance", "default", "speed", "none")'


class ParallelDoc(Document, frozen=True, kw_only=True):
    """``[build.parallel]``: each way archwheel spreads the compiles, on or off."""

    jobs: bool = True
    build_ext: Annotated[bool | Literal["auto"], Meta(extra={"expected": _BUILD_EXT})] = "auto"
    nvcc_threads: bool = True
    extensions: bool = True


class BuildDoc(Document, frozen=True, kw_only=True):
    """``[build]``: the command and what it runs with."""

    command: NonBlank
    configure: NonBlank | None = None
    build_folder: NonBlank | None = None
    requirements: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    network: bool = False
    jobs_variable: str = "MAX_JOBS"
    memory_per_job_gib: Annotated[float, Meta(ge=0.05, le=1024)] = 2.0
    parallel: ParallelDoc = ParallelDoc()
    compress_fatbins: Annotated[
        bool | Literal["size", "balance", "default", "speed", "none"],
        Meta(extra={"expected": _COMPRESS}),
    ] = True


class SmokeDoc(Document, frozen=True, kw_only=True):
    """``[smoke]``: a Python snippet run after the import."""

    snippet: str | None = None


class GateDoc(Document, frozen=True, kw_only=True):
    """``[gate]``: the module gate's switches."""

    extra_archs: bool | None = None
    unbuilt_cuda: tuple[str, ...] = ()


_STRIP = 'true (debug sections), "all" (symbols too) or false'


class RepairDoc(Document, frozen=True, kw_only=True):
    """``[repair]``: the repair step's settings (docs/builds.md, "The repair step")."""

    pins: str | None = None
    rpath_folders: tuple[str, ...] | None = None
    rpath_base: str | None = None
    library_folder: str | None = None
    bundle: tuple[str, ...] | None = None
    requirements: tuple[str, ...] | None = None
    provided: tuple[str, ...] | None = None
    platform: str | None = None
    force_rpath: bool | None = None
    strip: Annotated[bool | Literal["all"] | None, Meta(extra={"expected": _STRIP})] = None


_LABEL = 'must be a template such as "pt{torch}cu{cuda_nodot}" or false'


class TorchDoc(Document, frozen=True, kw_only=True):
    """``[torch]``: the torch pin (where ``[build] requirements`` has none) and its options."""

    version: NonBlank | None = None
    local_version: Annotated[str | bool | None, Meta(extra={"problem": _LABEL})] = None
    requires_dist: bool | None = None
    loads_with: tuple[str, ...] | None = None


class RecipeDoc(Document, frozen=True, kw_only=True):
    """A whole recipe file; ``source``, ``toolchain`` and ``build`` are required."""

    schema_version: int | None = None
    recipe: RecipeMeta = RecipeMeta()
    source: SourceDoc
    toolchain: ToolchainDoc
    python: PythonDoc = PythonDoc()
    arch: ArchDoc | None = None
    build: BuildDoc
    smoke: SmokeDoc = SmokeDoc()
    repair: RepairDoc | None = None
    torch: TorchDoc = TorchDoc()
    gate: GateDoc = GateDoc()


LABEL_PROBLEM = _LABEL
