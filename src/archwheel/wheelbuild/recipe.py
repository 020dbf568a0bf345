"""Build recipes (``recipes/*.toml``): loaded, validated and turned into frozen objects.

A recipe says where the source comes from, which CUDA toolkit and base image build it, which
Python versions it supports, how the arch list enters the build, and the build itself. Every
problem is a ``RecipeError`` that names the file and the key (``[build] comand: unknown key; did
you mean 'command'?``); nothing here starts a container or touches the network.

The format is documented in docs/builds.md; ``recipes/example.toml`` is the annotated example.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import re
import stat
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, cast

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from archwheel.effects.files import (
    DocumentUnreadable,
    FileTooLarge,
    check_regular,
    is_pseudo,
    parse_document,
    read_regular,
)
from archwheel.errors import ArchListError, RecipeError, UsageError
from archwheel.facts import arch_consumers, arch_grammars
from archwheel.facts.arch import ArchList
from archwheel.facts.catalog import CudaFacts, load_facts
from archwheel.facts.python_target import PythonTarget
from archwheel.facts.pytorch_official import load_official
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild.torch_pin import (
    DEFAULT_LABEL_TEMPLATE,
    TorchOptions,
    check_label_cuda,
    check_label_template,
    find_torch_pin,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

RECIPE_SCHEMA_VERSION = 1
MAX_RECIPE_BYTES = 1 << 20
MAX_RECIPE_NESTING = 16  # tables and arrays inside each other (a real recipe nests 3 deep)

RecipeKind = Literal["pytorch", "extension"]
SourceKind = Literal["path", "git", "sdist"]
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

# Variables archwheel sets itself in the build container; a recipe may not override them.
RESERVED_ENV = frozenset(
    {
        "PATH",
        "HOME",
        "CUDA_HOME",
        "CUDA_PATH",
        "SOURCE_DATE_EPOCH",
        "CCACHE_DIR",
        "CCACHE_BASEDIR",
        "CCACHE_DISABLE",
        "ARCHWHEEL_SRC",
        "ARCHWHEEL_DIST",
        "ARCHWHEEL_BUILD",
        "ARCHWHEEL_PYTHON",
        "ARCHWHEEL_ARCH_LIST",
        "ARCHWHEEL_JOBS",
    }
)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
_IMAGE_ID = re.compile(r"^sha256:[0-9a-f]{64}\Z")
_IMAGE_REF = re.compile(r"^[a-z0-9][a-z0-9._/:@-]*\Z")
_SONAME = re.compile(r"^[A-Za-z0-9_+.-]+\.so(\.[0-9]+)*\Z")
_MANYLINUX = re.compile(r"^manylinux_[0-9]+_[0-9]+_[a-z0-9_]+\Z")

# Allowed keys per table: the schema, used for did-you-mean on unknown keys.
SCHEMA: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "": frozenset(
            {
                "schema_version",
                "recipe",
                "source",
                "toolchain",
                "python",
                "arch",
                "build",
                "smoke",
                "repair",
                "torch",
            }
        ),
        "recipe": frozenset({"name", "kind", "version", "description", "source_date_epoch"}),
        "source": frozenset(
            {"path", "git", "ref", "submodules", "sdist", "sha256", "mirror", "project", "version"}
        ),
        "toolchain": frozenset(
            {"cuda", "base_image", "base_image_id", "source", "pypi_packages", "system_packages"}
        ),
        "python": frozenset({"versions"}),
        "arch": frozenset({"variable", "format", "consumer", "default"}),
        "build": frozenset(
            {
                "command",
                "requirements",
                "env",
                "network",
                "jobs_variable",
                "memory_per_job_gib",
            }
        ),
        "smoke": frozenset({"snippet"}),
        # docs/builds.md, "The repair step"; resolved by build/repair.py (spec_for_recipe)
        "repair": frozenset(
            {
                "pins",
                "rpath_folders",
                "rpath_base",
                "library_folder",
                "bundle",
                "requirements",
                "provided",
                "platform",
                "force_rpath",
            }
        ),
        "torch": frozenset({"version", "local_version", "requires_dist"}),
    }
)


# -- the model ----------------------------------------------------------------------------------


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

    def describe(self) -> str:
        if self.kind == "path":
            return f"path {self.path}"
        if self.kind == "git":
            subs = " with submodules" if self.submodules else ""
            return f"git {self.git_url} @ {self.ref}{subs}"
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
    (``build/toolkit.py`` ``with_torch_cuda`` reloads the recipe with it). ``cuda_from`` says
    where the value came from: ``recipe`` (written), ``torch-label``, ``torch-wheel``, or
    ``torch`` while still unresolved.
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
    command: str
    requirements: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    network: bool = False  # network allowed while compiling
    jobs_variable: str = "MAX_JOBS"
    memory_per_job_gib: float = 2.0


@dataclass(frozen=True)
class RepairConfig:
    """A recipe's ``[repair]`` table as written: ``pins = "official"`` takes every value from
    the pin table of the recipe's PyTorch release and CUDA version; other keys override it."""

    pins: str | None = None  # "official" or None
    values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


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

    @property
    def default_python(self) -> str:
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
        try:
            version = Version(self.version)
        except InvalidVersion:
            version = Version("0")
        return version, self.toolchain.cuda or CudaVersion(0, 0)


# -- loading ------------------------------------------------------------------------------------


class _Table:
    """Typed access to one TOML table; every error names the file, table and key."""

    def __init__(self, origin: Path, name: str, data: Mapping[str, Any]) -> None:
        self.origin = origin
        self.name = name
        self.data = data
        allowed = SCHEMA[name]
        for key in data:
            if key not in allowed:
                close = difflib.get_close_matches(key, sorted(allowed), n=1, cutoff=0.6)
                hint = (
                    f"did you mean {close[0]!r}?"
                    if close
                    else f"known: {', '.join(sorted(allowed))}"
                )
                raise self.error(key, "unknown key", hint=hint)

    def where(self, key: str) -> str:
        return f"[{self.name}] {key}" if self.name else key

    def error(self, key: str, message: str, hint: str | None = None) -> RecipeError:
        return RecipeError(f"{self.origin}: {self.where(key)}: {message}", hint=hint)

    def has(self, key: str) -> bool:
        return key in self.data

    def text(self, key: str, default: str | None = None, *, required: bool = False) -> str:
        if key not in self.data:
            if required or default is None:
                raise self.error(key, "missing (required)")
            return default
        value = self.data[key]
        if not isinstance(value, str):
            raise self.error(key, f"must be a string, not {type(value).__name__}")
        if required and not value.strip():
            raise self.error(key, "must not be empty")
        return value

    def opt_str(self, key: str) -> str | None:
        return self.text(key) if key in self.data else None

    def flag(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, not {value!r}")
        return value

    def number(self, key: str, default: float) -> float:
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, f"must be a number, not {value!r}")
        return float(value)

    def opt_int(self, key: str) -> int | None:
        if key not in self.data:
            return None
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"must be an integer, not {value!r}")
        return value

    def str_list(self, key: str, default: Iterable[str] = ()) -> tuple[str, ...]:
        value = self.data.get(key, list(default))
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, "must be a list of strings")
        return tuple(value)

    def table(self, key: str, name: str | None = None) -> _Table:
        value = self.data.get(key, {})
        if not isinstance(value, dict):
            raise self.error(key, "must be a table")
        return _Table(self.origin, name or key, value)

    def str_map(self, key: str) -> dict[str, str]:
        value = self.data.get(key, {})
        if not isinstance(value, dict):
            raise self.error(key, "must be a table of strings")
        out: dict[str, str] = {}
        for k, v in value.items():
            if not isinstance(v, str):
                raise self.error(f"{key}.{k}", f"must be a string, not {type(v).__name__}")
            out[str(k)] = v
        return out


def load_recipe(
    path: Path, facts: CudaFacts | None = None, *, torch_cuda: CudaVersion | None = None
) -> Recipe:
    """Read and validate one recipe file.

    ``torch_cuda``: the CUDA of the pinned torch wheel, for a recipe without ``[toolchain]
    cuda`` (the caller read it from the wheel); a recipe that writes ``cuda`` ignores it.
    """
    facts = facts or load_facts()
    path = path.resolve()
    try:
        raw = read_regular(path, MAX_RECIPE_BYTES)  # FIFOs, devices, /proc refused by type
    except FileNotFoundError:
        raise RecipeError(f"recipe file {path} does not exist") from None
    except FileTooLarge:
        raise RecipeError(f"{path}: larger than {MAX_RECIPE_BYTES} bytes; not a recipe") from None
    except OSError as exc:
        raise RecipeError(f"cannot read recipe {path}: {exc.strerror or exc}") from None
    try:
        document = parse_document(raw, MAX_RECIPE_NESTING, toml=True)
    except DocumentUnreadable as exc:
        raise RecipeError(f"{path}: {exc}") from None
    data = cast("dict[str, Any]", document)  # TOML's top level is always a table
    return parse_recipe(data, origin=path, raw=raw, facts=facts, torch_cuda=torch_cuda)


def parse_recipe(
    data: Mapping[str, Any],
    *,
    origin: Path,
    raw: bytes = b"",
    facts: CudaFacts | None = None,
    torch_cuda: CudaVersion | None = None,
) -> Recipe:
    """Validate already-parsed TOML data; ``origin`` names the file in errors and anchors paths."""
    facts = facts or load_facts()
    top = _Table(origin, "", data)
    schema = top.opt_int("schema_version")
    if schema is not None and schema != RECIPE_SCHEMA_VERSION:
        raise top.error(
            "schema_version",
            f"version {schema} is not supported (this archwheel reads {RECIPE_SCHEMA_VERSION})",
        )
    for section in ("source", "toolchain", "build"):
        if section not in data:
            raise top.error(section, "missing table (required)")

    meta = top.table("recipe")
    name = meta.text("name", origin.stem)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise meta.error("name", f"{name!r} is not a valid recipe name (letters, digits, . _ -)")
    kind_text = meta.text("kind", "extension")
    if kind_text not in ("pytorch", "extension"):
        raise meta.error("kind", f"{kind_text!r} is not a recipe kind", hint="pytorch or extension")
    kind: RecipeKind = "pytorch" if kind_text == "pytorch" else "extension"
    version = meta.text("version", "0")
    epoch = meta.opt_int("source_date_epoch")
    if epoch is not None and not 315532800 <= epoch < 2**32:
        raise meta.error("source_date_epoch", "must be a Unix time between 1980 and 2106")

    source = _parse_source(top.table("source"), origin)
    toolchain_table = top.table("toolchain")
    toolchain = _parse_toolchain(
        toolchain_table,
        facts,
        None if toolchain_table.has("cuda") else _torch_cuda(top, kind, origin, torch_cuda),
    )
    python = top.table("python")
    versions = python.str_list("versions", ["3.11"])
    if not versions:
        raise python.error("versions", "must list at least one Python version")
    for v in versions:
        try:
            PythonTarget.parse(v)
        except ValueError as exc:
            raise python.error("versions", str(exc)) from None
    # The torch whose arch-list readers apply (facts/arch_grammars.py): the release a PyTorch
    # recipe builds, or the torch an extension pins in its build requirements or [torch] table.
    grammar_torch = (
        version if kind == "pytorch" else pinned_torch(top.table("build").str_list("requirements"))
    )
    if grammar_torch is None and kind != "pytorch":
        grammar_torch = top.table("torch").opt_str("version")
    arch = _parse_arch(top.table("arch"), toolchain, kind, grammar_torch, facts)
    build = _parse_build(top.table("build"), arch)
    build, torch = _parse_torch(top.table("torch"), build, toolchain, origin)
    smoke = top.table("smoke")
    snippet = smoke.opt_str("snippet")
    if snippet is not None:
        try:
            compile(snippet, f"{origin}:[smoke] snippet", "exec")
        except SyntaxError as exc:
            raise smoke.error(
                "snippet", f"not valid Python: {exc.msg} (line {exc.lineno})"
            ) from None

    repair = _parse_repair(top.table("repair")) if "repair" in data else None

    return Recipe(
        repair=repair,
        name=name,
        path=origin,
        sha256=hashlib.sha256(raw).hexdigest(),
        kind=kind,
        version=version,
        description=meta.text("description", ""),
        source=source,
        toolchain=toolchain,
        python_versions=versions,
        arch=arch,
        build=build,
        smoke_snippet=snippet,
        source_date_epoch=epoch,
        torch=torch,
    )


_REPAIR_LISTS = ("rpath_folders", "bundle", "requirements", "provided")
_REPAIR_TEXTS = ("rpath_base", "library_folder", "platform")


def _parse_repair(table: _Table) -> RepairConfig:
    pins = table.opt_str("pins")
    if pins is not None and pins != "official":
        raise table.error(
            "pins",
            f"{pins!r} is not a pin table",
            hint='"official": the table of the recipe\'s PyTorch release and CUDA version',
        )
    values: dict[str, Any] = {}
    for key in _REPAIR_LISTS:
        if table.has(key):
            values[key] = table.str_list(key)
    for key in _REPAIR_TEXTS:
        if table.has(key):
            text = table.text(key)
            if key != "platform" and (
                text.startswith("/") or ".." in text.split("/") or not text.strip()
            ):
                raise table.error(key, f"{text!r} must be a folder inside the wheel")
            values[key] = text
    for folder in values.get("rpath_folders", ()):
        if folder.startswith("/") or ".." in folder.split("/") or not folder.strip():
            raise table.error("rpath_folders", f"{folder!r} must be relative to site-packages")
    for line in values.get("requirements", ()):
        try:
            Requirement(line)
        except InvalidRequirement as exc:
            raise table.error("requirements", f"{line!r}: {exc}") from None
    for key in ("bundle", "provided"):
        for name in values.get(key, ()):
            if not _SONAME.match(name):
                raise table.error(key, f"{name!r} is not a library file name such as libgomp.so.1")
    platform = values.get("platform")
    if platform is not None and not _MANYLINUX.match(platform):
        raise table.error(
            "platform", f"{platform!r} is not a manylinux tag", hint="e.g. manylinux_2_28_x86_64"
        )
    if table.has("force_rpath"):
        values["force_rpath"] = table.flag("force_rpath", True)
    return RepairConfig(pins, MappingProxyType(values))


def _parse_source(table: _Table, origin: Path) -> SourceSpec:
    given = [k for k in ("path", "git", "sdist", "project") if table.has(k)]
    if len(given) != 1:
        raise table.error(
            "path" if not given else given[1],
            "exactly one of path, git or sdist (or project and version) is required"
            + (f" (found {', '.join(given)})" if given else ""),
        )
    if given[0] == "project":
        return _parse_index_source(table)
    if table.has("version"):
        raise table.error("version", "only valid with project")
    submodules = table.flag("submodules", False)
    if given[0] == "path":
        for key in ("ref", "sha256"):
            if table.has(key):
                raise table.error(key, "only valid with git (ref) or sdist (sha256)")
        folder = (origin.parent / table.text("path", required=True)).resolve()
        try:
            status = folder.stat()
        except OSError:
            raise table.error("path", f"{folder} is not a folder") from None
        if not stat.S_ISDIR(status.st_mode):
            raise table.error("path", f"{folder} is not a folder")
        if folder == Path(folder.anchor) or is_pseudo(status):
            raise table.error("path", f"{folder} cannot be a source folder (a filesystem root)")
        return SourceSpec("path", path=folder, submodules=submodules)
    if given[0] == "git":
        url = table.text("git", required=True)
        ref = table.text("ref", required=True) if table.has("ref") else None
        if ref is None:
            raise table.error("ref", "missing: give the tag, branch or commit to build")
        if table.has("sha256"):
            raise table.error("sha256", "only valid with sdist")
        if url.startswith("-") or ref.startswith("-"):
            raise table.error("git", "must not start with '-'")
        mirrors = tuple(sorted(table.str_map("mirror").items()))
        for public, mirror in mirrors:
            if not public.strip() or not mirror.strip() or mirror.startswith("-"):
                raise table.error(f"mirror.{public}", "must map a URL prefix to a mirror prefix")
        return SourceSpec("git", git_url=url, ref=ref, submodules=submodules, mirrors=mirrors)
    sdist = table.text("sdist", required=True)
    digest = table.text("sha256", required=True) if table.has("sha256") else None
    if digest is None:
        raise table.error("sha256", "missing: an sdist needs its sha256 (pip hash, 64 hex digits)")
    digest = digest.lower().removeprefix("sha256:")
    if not _SHA256.match(digest):
        raise table.error("sha256", "must be 64 hexadecimal digits")
    if table.has("ref"):
        raise table.error("ref", "only valid with git")
    if table.has("mirror"):
        raise table.error("mirror", "only valid with git")
    local: Path | None = None
    if "://" not in sdist or sdist.startswith("file://"):
        given_file = (origin.parent / sdist.removeprefix("file://")).resolve()
        try:
            check_regular(given_file, given_file.stat())
        except FileNotFoundError:
            raise table.error("sdist", f"{given_file} does not exist") from None
        except OSError as exc:
            raise table.error(
                "sdist", f"{given_file}: {exc.strerror or exc} (or give an https:// URL)"
            ) from None
        if "://" not in sdist:
            local = given_file
            sdist = str(local)
    elif not sdist.startswith(("https://", "http://", "file://")):
        raise table.error("sdist", "must be an https://, http:// or file:// URL, or a local path")
    return SourceSpec("sdist", path=local, sdist=sdist, sha256=digest, submodules=submodules)


def _parse_index_source(table: _Table) -> SourceSpec:
    """``project = "torch-scatter"``, ``version = "2.1.2"``, ``sha256``: an sdist on the index."""
    project = table.text("project", required=True)
    if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", project):
        raise table.error("project", f"{project!r} is not a project name")
    if not table.has("version"):
        raise table.error("version", "missing: the release of the project to build")
    version = table.text("version", required=True)
    try:
        Version(version)
    except InvalidVersion:
        raise table.error("version", f"{version!r} is not a version") from None
    if not table.has("sha256"):
        raise table.error("sha256", "missing: an sdist needs its sha256 (pip hash, 64 hex digits)")
    digest = table.text("sha256", required=True).lower().removeprefix("sha256:")
    if not _SHA256.match(digest):
        raise table.error("sha256", "must be 64 hexadecimal digits")
    if table.has("ref"):
        raise table.error("ref", "only valid with git")
    return SourceSpec(
        "sdist",
        sha256=digest,
        project=project,
        project_version=version,
        submodules=table.flag("submodules", False),
    )


def _parse_torch(
    table: _Table, build: BuildSpec, toolchain: ToolchainSpec, origin: Path
) -> tuple[BuildSpec, TorchOptions]:
    """The torch pin (from ``[build] requirements`` or ``[torch] version``) and its options."""
    requirements = build.requirements
    if table.has("version"):
        version = table.text("version", required=True)
        pinned = find_torch_pin(requirements, f"{origin}: [build] requirements")
        if pinned is not None:
            raise table.error(
                "version", f"torch is already pinned in [build] requirements ({pinned.requirement})"
            )
        requirements = (*requirements, f"torch=={version}")
        build = BuildSpec(
            command=build.command,
            requirements=requirements,
            env=build.env,
            network=build.network,
            jobs_variable=build.jobs_variable,
            memory_per_job_gib=build.memory_per_job_gib,
        )
    where = f"{origin}: " + ("[torch] version" if table.has("version") else "[build] requirements")
    pin = find_torch_pin(requirements, where)
    label_value = table.data.get("local_version", DEFAULT_LABEL_TEMPLATE)
    if label_value is False:
        label: str | None = None
    elif isinstance(label_value, str) and label_value.strip():
        label = label_value.strip()
        check_label_template(label, f"{origin}: [torch] local_version")
    else:
        raise table.error(
            "local_version", 'must be a template such as "pt{torch}cu{cuda_nodot}" or false'
        )
    requires_dist = table.flag("requires_dist", True)
    if pin is None:
        for key in ("local_version", "requires_dist"):
            if table.has(key):
                raise table.error(key, "only valid when the recipe pins torch (torch==X.Y.Z)")
        return build, TorchOptions()
    if toolchain.cuda is not None:
        check_label_cuda(pin, toolchain.cuda, str(origin))
    return build, TorchOptions(pin=pin, local_version=label, requires_dist=requires_dist)


@cache
def pypi_toolchains() -> Mapping[int, Mapping[str, Any]]:
    """The PyPI toolchain data (``build/data/pypi_toolchains.toml``) by CUDA major."""
    text = resources.files("archwheel.wheelbuild").joinpath("data/pypi_toolchains.toml").read_text()
    data = tomllib.loads(text)
    return MappingProxyType({int(k): v for k, v in data["toolchain"].items()})


def _torch_cuda(
    top: _Table, kind: RecipeKind, origin: Path, from_wheel: CudaVersion | None
) -> tuple[str, CudaVersion | None] | None:
    """Where ``[toolchain] cuda`` comes from when the recipe does not write it: the pinned
    torch's ``+cuXYZ`` label, else the torch wheel's own CUDA (``from_wheel``; None until the
    caller has read it). None: the recipe pins no torch, so ``cuda`` is required."""
    if kind == "pytorch":
        return None
    build = top.table("build")
    requirements = build.str_list("requirements")
    pin = find_torch_pin(requirements, f"{origin}: [build] requirements")
    if pin is None:
        version = top.table("torch").opt_str("version")
        if version is None:
            return None
        pin = find_torch_pin([f"torch=={version}"], f"{origin}: [torch] version")
    if pin is None:
        return None
    from_label = pin.cuda_from_label()
    if from_label is not None:
        return "torch-label", from_label
    return ("torch-wheel", from_wheel) if from_wheel is not None else ("torch", None)


def _parse_toolchain(
    table: _Table, facts: CudaFacts, derived: tuple[str, CudaVersion | None] | None = None
) -> ToolchainSpec:
    cuda: CudaVersion | None
    cuda_from = "recipe"
    if table.has("cuda") or derived is None:
        cuda_text = table.text("cuda", required=True)
        try:
            cuda = CudaVersion.parse(cuda_text)
            facts.toolkit(cuda)
        except UsageError as exc:
            raise table.error("cuda", exc.one_line()) from None
    else:
        cuda_from, cuda = derived
        if cuda is not None:
            try:
                facts.toolkit(cuda)
            except UsageError as exc:
                raise table.error(
                    "cuda", f"derived from the pinned torch: {exc.one_line()}"
                ) from None
    image = table.text("base_image", required=True)
    if not _IMAGE_REF.match(image):
        raise table.error("base_image", f"{image!r} is not an image reference (lowercase name:tag)")
    pin = table.opt_str("base_image_id")
    if pin is not None and not _IMAGE_ID.match(pin):
        raise table.error(
            "base_image_id",
            f"{pin!r} is not an image ID (sha256: and 64 hex digits)",
            hint=f"`docker image inspect --format '{{{{.Id}}}}' {image}` prints it",
        )
    source_text = table.text("source", "image")
    if source_text not in ("image", "pypi"):
        raise table.error(
            "source", f"{source_text!r} is not a toolchain source", hint="image or pypi"
        )
    system = table.str_list("system_packages")
    if source_text == "image":
        if table.has("pypi_packages"):
            raise table.error("pypi_packages", 'only valid with source = "pypi"')
        return ToolchainSpec(
            cuda, image, "image", system_packages=system, base_image_id=pin, cuda_from=cuda_from
        )
    if cuda is None:  # the pinned torch's CUDA is not known yet: packages follow on reload
        return ToolchainSpec(
            None,
            image,
            "pypi",
            pypi_packages=table.str_list("pypi_packages"),
            system_packages=system,
            base_image_id=pin,
            cuda_from=cuda_from,
        )
    known = pypi_toolchains().get(cuda.major)
    if known is None:
        majors = ", ".join(f"{m}.x" for m in sorted(pypi_toolchains()))
        raise table.error(
            "source",
            f"PyPI has no complete nvcc for CUDA {cuda} (only {majors}; the 12.x nvcc wheels "
            "ship only ptxas)",
            hint='use source = "image" with a base image that holds the toolkit, '
            "e.g. pytorch/manylinux2_28-builder:cuda12.8",
        )
    default_packages = [f"{p}=={cuda}.*" for p in known["packages"]]
    packages = table.str_list("pypi_packages", default_packages)
    if not packages:
        raise table.error("pypi_packages", "must not be empty")
    return ToolchainSpec(
        cuda,
        image,
        "pypi",
        pypi_packages=packages,
        pypi_prefix=str(known["prefix"]),
        cudart_soname=str(known["cudart_soname"]),
        system_packages=system,
        base_image_id=pin,
        cuda_from=cuda_from,
    )


def with_torch(recipe: Recipe, version: str) -> Recipe:
    """The recipe built against another torch (``archwheel build --torch``, a matrix's torch
    axis): its torch pin, the torch whose arch-list grammar applies and so the wheel's local
    label and ``Requires-Dist`` follow. A recipe that pins no torch is refused (exit 2)."""
    where = f"--torch {version}"
    pin = recipe.torch.pin
    if pin is None:
        raise UsageError(
            f"{where}: recipe {recipe.name} is not built against torch (it pins no torch==X.Y.Z)",
            hint="leave out --torch for it (a matrix gives such a recipe one cell per Python)",
        )
    text = version.strip()
    if not text or text[0] in "=<>!~":
        raise UsageError(f"{where}: give a torch version such as 2.14.1, not a specifier")
    try:
        Version(text)
    except InvalidVersion:
        raise UsageError(f"{where}: {text!r} is not a version such as 2.14.1") from None
    new = find_torch_pin([f"torch=={text}"], where)
    assert new is not None
    if new.version == pin.version:
        return recipe
    if recipe.toolchain.cuda is not None:  # else it is derived from the new torch's wheel
        check_label_cuda(new, recipe.toolchain.cuda, where)
    new = dataclasses.replace(new, replaces=pin.replaces or pin.requirement)
    requirements = tuple(
        new.requirement if pinned_torch([r]) is not None else r for r in recipe.build.requirements
    )
    return dataclasses.replace(
        recipe,
        build=dataclasses.replace(recipe.build, requirements=requirements),
        arch=dataclasses.replace(recipe.arch, torch=str(new.version)),
        torch=dataclasses.replace(recipe.torch, pin=new),
    )


def pinned_torch(requirements: Iterable[str]) -> str | None:
    """The torch version a build requirement pins (``torch==2.14.1+cu130``), or None."""
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != "torch":
            continue
        pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
        if len(pins) == 1 and "*" not in pins[0]:
            return pins[0]
    return None


def _parse_arch(
    table: _Table, toolchain: ToolchainSpec, kind: RecipeKind, torch: str | None, facts: CudaFacts
) -> ArchInput:
    grammars = arch_consumers.load_grammars()
    consumer = table.opt_str("consumer")
    if consumer is not None and consumer not in grammars.consumers:
        close = difflib.get_close_matches(consumer, grammars.consumers, n=1, cutoff=0.5)
        raise table.error(
            "consumer",
            f"{consumer!r} is not an arch consumer",
            hint=f"did you mean {close[0]!r}?"
            if close
            else f"known: {', '.join(grammars.consumers)}",
        )
    implied = CONSUMER_FORMAT.get(consumer, "project") if consumer else None
    fmt = table.text("format", implied or "torch")
    if fmt not in ARCH_FORMATS and not (fmt == "project" and implied == "project"):
        raise table.error(
            "format",
            f"{fmt!r} is not an arch list format",
            hint="; ".join(f"{k}: {v}" for k, v in ARCH_FORMATS.items()),
        )
    if implied is not None and fmt != implied:
        raise table.error(
            "format",
            f"{fmt!r} contradicts consumer {consumer!r}, which reads the {implied} format",
            hint="drop format: the consumer implies it",
        )
    if consumer is None:
        torch_reader = (
            arch_consumers.TORCH_CMAKE if kind == "pytorch" else arch_consumers.CPP_EXTENSION
        )
        consumer = DEFAULT_CONSUMER.get(fmt, torch_reader)
    default_variable = (
        grammars.variable(consumer) if table.has("consumer") else DEFAULT_ARCH_VARIABLE[fmt]
    )
    variable = table.text("variable", default_variable)
    if not _ENV_NAME.match(variable) or variable in RESERVED_ENV:
        raise table.error("variable", f"{variable!r} cannot be used as the arch variable")
    default_text = table.text("default", required=True)
    try:
        default = ArchList.parse(default_text, facts)
        if toolchain.cuda is not None:  # else checked when the torch's CUDA is known
            default.check_toolkit(facts.toolkit(toolchain.cuda), facts)
    except ArchListError as exc:
        raise table.error("default", exc.one_line()) from None
    arch = ArchInput(
        variable, cast(ArchFormat, fmt), default, consumer, torch=torch, cuda=toolchain.cuda
    )
    try:
        arch.render(default)
    except ArchListError as exc:
        raise table.error("default", exc.one_line()) from None
    return arch


def _parse_build(table: _Table, arch: ArchInput) -> BuildSpec:
    command = table.text("command", required=True)
    env = table.str_map("env")
    jobs_variable = table.text("jobs_variable", "MAX_JOBS")
    if not _ENV_NAME.match(jobs_variable) or jobs_variable in RESERVED_ENV:
        raise table.error("jobs_variable", f"{jobs_variable!r} cannot be used as the jobs variable")
    for key in env:
        if not _ENV_NAME.match(key):
            raise table.error(f"env.{key}", "is not a valid environment variable name")
        if key in RESERVED_ENV or key in (arch.variable, jobs_variable):
            raise table.error(
                f"env.{key}", "is set by archwheel itself and cannot be overridden here"
            )
    memory = table.number("memory_per_job_gib", 2.0)
    if not 0.05 <= memory <= 1024:
        raise table.error("memory_per_job_gib", "must be between 0.05 and 1024")
    requirements = table.str_list("requirements")
    for req in requirements:
        if req.strip().startswith("-"):
            raise table.error("requirements", f"{req!r}: pip options are not allowed here")
    return BuildSpec(
        command=command,
        requirements=requirements,
        env=MappingProxyType(dict(sorted(env.items()))),
        network=table.flag("network", False),
        jobs_variable=jobs_variable,
        memory_per_job_gib=memory,
    )


# -- finding recipes ----------------------------------------------------------------------------


def _pins_known(recipe: Recipe) -> bool:
    if recipe.repair is None or recipe.repair.pins != "official":
        return True
    return load_official().variant(recipe.version, str(recipe.toolchain.cuda)) is not None


def recipe_files(directories: Iterable[Path]) -> list[Path]:
    files: list[Path] = []
    for directory in directories:
        if directory.is_dir():
            files.extend(sorted(directory.glob("*.toml")))
    return files


def find_recipe(
    name_or_path: str | None, directories: Iterable[Path], facts: CudaFacts | None = None
) -> Recipe:
    """A recipe by name (file stem or ``[recipe] name``) or path; None picks the newest PyTorch."""
    facts = facts or load_facts()
    dirs = list(directories)
    if name_or_path and (name_or_path.endswith(".toml") or "/" in name_or_path):
        return load_recipe(Path(name_or_path), facts)
    files = recipe_files(dirs)
    if not files:
        where = ", ".join(str(d) for d in dirs) or "(none)"
        raise UsageError(f"no recipes found in {where}", hint="set ARCHWHEEL_RECIPES to a folder")
    if name_or_path is None:
        recipes = [load_recipe(f, facts) for f in files]
        # Not a recipe whose [repair] pins = "official" has no pin table yet (it cannot build).
        pytorch = [r for r in recipes if r.kind == "pytorch" and _pins_known(r)]
        if not pytorch:
            raise UsageError("no PyTorch recipe found; pass --recipe NAME")
        return max(pytorch, key=lambda r: r.sort_key())
    for f in files:
        if f.stem == name_or_path:
            return load_recipe(f, facts)
    for f in files:
        recipe = load_recipe(f, facts)
        if recipe.name == name_or_path:
            return recipe
    names = sorted(f.stem for f in files)
    close = difflib.get_close_matches(name_or_path, names, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}?" if close else f"known recipes: {', '.join(names)}"
    raise UsageError(f"unknown recipe {name_or_path!r}", hint=hint)
