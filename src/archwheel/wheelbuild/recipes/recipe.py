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
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from archwheel.effects.files import check_regular, is_pseudo, read_document
from archwheel.errors import ArchListError, RecipeError, UsageError
from archwheel.facts import arch_consumers
from archwheel.facts.arch import ArchList
from archwheel.facts.catalog import CudaFacts
from archwheel.facts.debian_names import PACKAGE as DEBIAN_PACKAGE
from archwheel.facts.debian_names import VERSION as DEBIAN_VERSION
from archwheel.facts.documents import Table
from archwheel.facts.python_target import PythonTarget
from archwheel.facts.typed import decode
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild.compile.parallel import BuildExtMode, ParallelSwitches
from archwheel.wheelbuild.recipes.cmake_arch import env_problem, variable_problem
from archwheel.wheelbuild.recipes.recipe_debian import debian_keys, debian_suite
from archwheel.wheelbuild.recipes.recipe_doc import (
    ArchDoc,
    BuildDoc,
    ParallelDoc,
    RecipeDoc,
    RepairDoc,
    SourceDoc,
    ToolchainDoc,
)
from archwheel.wheelbuild.recipes.recipe_env import OWN_TIME, OWN_TIME_HINT, sets_nvcc_time
from archwheel.wheelbuild.recipes.recipe_model import (
    ARCH_FORMATS,
    CONSUMER_FORMAT,
    DEFAULT_ARCH_VARIABLE,
    DEFAULT_CONSUMER,
    RESERVED_ENV,
    ArchFormat,
    ArchInput,
    BuildSpec,
    GateSpec,
    Recipe,
    RecipeKind,
    RepairConfig,
    SourcePatch,
    SourceSpec,
    ToolchainSpec,
)
from archwheel.wheelbuild.recipes.recipe_torch import parse_torch_table, pinned_torch
from archwheel.wheelbuild.recipes.torch_pin import (
    find_torch_pin,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

RECIPE_SCHEMA_VERSION = 1
MAX_RECIPE_BYTES = 1 << 20
MAX_RECIPE_NESTING = 16  # tables and arrays inside each other (a real recipe nests 3 deep)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
_IMAGE_ID = re.compile(r"^sha256:[0-9a-f]{64}\Z")
_IMAGE_REF = re.compile(r"^[a-z0-9][a-z0-9._/:@-]*\Z")
_SONAME = re.compile(r"^[A-Za-z0-9_+.-]+\.so(\.[0-9]+)*\Z")
_MANYLINUX = re.compile(r"^manylinux_[0-9]+_[0-9]+_[a-z0-9_]+\Z")

# -- loading ------------------------------------------------------------------------------------


def load_recipe(path: Path, facts: CudaFacts, *, torch_cuda: CudaVersion | None = None) -> Recipe:
    """Read and validate one recipe file.

    ``torch_cuda``: the CUDA of the pinned torch wheel, for a recipe without ``[toolchain]
    cuda`` (the caller read it from the wheel); a recipe that writes ``cuda`` ignores it.
    """
    path = path.resolve()
    document, raw = read_document(  # FIFOs, devices, /proc refused by type
        path, MAX_RECIPE_BYTES, MAX_RECIPE_NESTING, toml=True, error=RecipeError, what="a recipe"
    )
    data = cast("dict[str, Any]", document)  # TOML's top level is always a table
    return parse_recipe(data, origin=path, raw=raw, facts=facts, torch_cuda=torch_cuda)


def parse_recipe(
    data: Mapping[str, Any],
    *,
    origin: Path,
    raw: bytes = b"",
    facts: CudaFacts,
    torch_cuda: CudaVersion | None = None,
) -> Recipe:
    """Validate already-parsed TOML data; ``origin`` names the file in errors and anchors paths.
    Types, required and unknown keys: ``recipe_doc`` (msgspec); what each value must be: here."""
    top = Table(data, str(origin), RecipeError, toml_keys=True, toml=True)
    doc = decode(top, RecipeDoc)
    schema = doc.schema_version
    if schema is not None and schema != RECIPE_SCHEMA_VERSION:
        raise top.fail(
            "schema_version",
            f"version {schema} is not supported (this archwheel reads {RECIPE_SCHEMA_VERSION})",
        )

    meta = top.table("recipe")
    name = doc.recipe.name if doc.recipe.name is not None else origin.stem
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise meta.fail("name", f"{name!r} is not a valid recipe name (letters, digits, . _ -)")
    kind_text = doc.recipe.kind
    if kind_text not in ("pytorch", "extension"):
        raise meta.fail("kind", f"{kind_text!r} is not a recipe kind", hint="pytorch or extension")
    kind: RecipeKind = "pytorch" if kind_text == "pytorch" else "extension"
    version = doc.recipe.version
    epoch = doc.recipe.source_date_epoch
    if epoch is not None and not 315532800 <= epoch < 2**32:
        raise meta.fail("source_date_epoch", "must be a Unix time between 1980 and 2106")

    source_table = top.table("source")
    source = dataclasses.replace(
        _parse_source(doc.source, source_table, origin),
        patches=_parse_patches(doc.source, source_table, origin),
    )
    toolchain = _parse_toolchain(
        doc.toolchain,
        top.table("toolchain"),
        facts,
        None if doc.toolchain.cuda is not None else _torch_cuda(doc, kind, origin, torch_cuda),
    )
    source = debian_suite(source, toolchain, source_table)
    toolchain = debian_keys(doc.toolchain, toolchain, source, top.table("toolchain"))
    python = top.table("python")
    versions = doc.python.versions
    if not versions:
        raise python.fail("versions", "must list at least one Python version")
    for v in versions:
        try:
            PythonTarget.parse(v)
        except ValueError as exc:
            raise python.fail("versions", str(exc)) from None
    # The torch whose arch-list readers apply (facts/arch_grammars.py): the release a PyTorch
    # recipe builds, or the torch an extension pins in its build requirements or [torch] table.
    grammar_torch = version if kind == "pytorch" else pinned_torch(doc.build.requirements)
    if grammar_torch is None and kind != "pytorch":
        grammar_torch = doc.torch.version
    arch_table = top.table("arch")
    if doc.arch is None:
        raise arch_table.missing("default")
    arch = _parse_arch(doc.arch, arch_table, toolchain, kind, grammar_torch, facts)
    build = _parse_build(doc.build, top.table("build"), arch)
    build, torch = parse_torch_table(doc.torch, top.table("torch"), build, toolchain, origin)
    snippet = doc.smoke.snippet
    if snippet is not None:
        try:
            compile(snippet, f"{origin}:[smoke] snippet", "exec")
        except SyntaxError as exc:
            raise top.table("smoke").fail(
                "snippet", f"not valid Python: {exc.msg} (line {exc.lineno})"
            ) from None

    repair = _parse_repair(doc.repair, top.table("repair")) if doc.repair is not None else None
    unbuilt = doc.gate.unbuilt_cuda
    for pattern in unbuilt:
        if not pattern.strip() or pattern.startswith("/") or ".." in pattern.split("/"):
            raise top.table("gate").fail(
                "unbuilt_cuda", f"{pattern!r} is not a glob inside the source"
            )

    return Recipe(
        gate=GateSpec(extra_archs=doc.gate.extra_archs, unbuilt_cuda=unbuilt),
        repair=repair,
        name=name,
        path=origin,
        sha256=hashlib.sha256(raw).hexdigest(),
        kind=kind,
        version=version,
        description=doc.recipe.description,
        source=source,
        toolchain=toolchain,
        python_versions=versions,
        ignore_requires_python=doc.python.ignore_requires_python,
        arch=arch,
        build=build,
        smoke_snippet=snippet,
        source_date_epoch=epoch,
        torch=torch,
        document=data,
    )


def with_cuda_of_torch(recipe: Recipe, cuda: CudaVersion, facts: CudaFacts) -> Recipe:
    """``recipe`` (one without ``[toolchain] cuda`` whose torch pin has no ``+cuXYZ`` label)
    validated again from the document it was read from, with ``cuda``, its pinned torch wheel's
    CUDA: the toolchain, the arch list and the torch table follow it. The file is not read
    again, so the recipe keeps the sha256 of the bytes it was read from."""
    again = parse_recipe(recipe.document, origin=recipe.path, facts=facts, torch_cuda=cuda)
    return dataclasses.replace(again, sha256=recipe.sha256)


_REPAIR_LISTS = ("rpath_folders", "bundle", "requirements", "provided")
_REPAIR_TEXTS = ("rpath_base", "library_folder", "platform")


def _parse_repair(doc: RepairDoc, table: Table) -> RepairConfig:
    pins = doc.pins
    if pins is not None and pins != "official":
        raise table.fail(
            "pins",
            f"{pins!r} is not a pin table",
            hint='"official": the table of the recipe\'s PyTorch release and CUDA version',
        )
    values: dict[str, Any] = {}
    for key in _REPAIR_LISTS:
        if getattr(doc, key) is not None:
            values[key] = getattr(doc, key)
    for key in _REPAIR_TEXTS:
        text = getattr(doc, key)
        if text is not None:
            if key != "platform" and (
                text.startswith("/") or ".." in text.split("/") or not text.strip()
            ):
                raise table.fail(key, f"{text!r} must be a folder inside the wheel")
            values[key] = text
    for folder in values.get("rpath_folders", ()):
        if folder.startswith("/") or ".." in folder.split("/") or not folder.strip():
            raise table.fail("rpath_folders", f"{folder!r} must be relative to site-packages")
    for line in values.get("requirements", ()):
        try:
            Requirement(line)
        except InvalidRequirement as exc:
            raise table.fail("requirements", f"{line!r}: {exc}") from None
    for key in ("bundle", "provided"):
        for name in values.get(key, ()):
            if not _SONAME.match(name):
                raise table.fail(key, f"{name!r} is not a library file name such as libgomp.so.1")
    platform = values.get("platform")
    if platform is not None and platform != "auto" and not _MANYLINUX.match(platform):
        raise table.fail(
            "platform",
            f"{platform!r} is not a manylinux tag",
            hint='e.g. manylinux_2_28_x86_64, or "auto" (the oldest tag auditwheel accepts)',
        )
    if doc.force_rpath is not None:
        values["force_rpath"] = doc.force_rpath
    strip = doc.strip
    if strip is not None:
        values["strip"] = "debug" if strip is True else ("all" if strip == "all" else "none")
    return RepairConfig(pins, MappingProxyType(values))


def _parse_source(doc: SourceDoc, table: Table, origin: Path) -> SourceSpec:
    given = [
        k for k in ("path", "git", "sdist", "project", "debian") if getattr(doc, k) is not None
    ]
    if len(given) != 1:
        raise table.fail(
            "path" if not given else given[1],
            "exactly one of path, git or sdist (or project and version, or debian and "
            "version) is required" + (f" (found {', '.join(given)})" if given else ""),
        )
    if doc.project is not None:
        return _parse_index_source(doc, doc.project, table)
    if doc.debian is not None:
        return _parse_debian_source(doc, doc.debian, table)
    if doc.version is not None:
        raise table.fail("version", "only valid with project or debian")
    if doc.suite is not None:
        raise table.fail("suite", "only valid with debian")
    submodules = doc.submodules
    if doc.path is not None:
        for key in ("ref", "sha256"):
            if getattr(doc, key) is not None:
                raise table.fail(key, "only valid with git (ref) or sdist (sha256)")
        folder = (origin.parent / doc.path).resolve()
        try:
            status = folder.stat()
        except OSError:
            raise table.fail("path", f"{folder} is not a folder") from None
        if not stat.S_ISDIR(status.st_mode):
            raise table.fail("path", f"{folder} is not a folder")
        if folder == Path(folder.anchor) or is_pseudo(status):
            raise table.fail("path", f"{folder} cannot be a source folder (a filesystem root)")
        return SourceSpec("path", path=folder, submodules=submodules)
    if doc.git is not None:
        url, ref = doc.git, doc.ref
        if ref is None:
            raise table.fail("ref", "missing: give the tag, branch or commit to build")
        if doc.sha256 is not None:
            raise table.fail("sha256", "only valid with sdist")
        if url.startswith("-") or ref.startswith("-"):
            raise table.fail("git", "must not start with '-'")
        mirrors = tuple(sorted((doc.mirror or {}).items()))
        for public, mirror in mirrors:
            if not public.strip() or not mirror.strip() or mirror.startswith("-"):
                raise table.fail(f"mirror.{public}", "must map a URL prefix to a mirror prefix")
        return SourceSpec("git", git_url=url, ref=ref, submodules=submodules, mirrors=mirrors)
    sdist = doc.sdist
    assert sdist is not None  # exactly one of path, git, sdist, project
    digest = doc.sha256
    if digest is None:
        raise table.fail("sha256", "missing: an sdist needs its sha256 (pip hash, 64 hex digits)")
    digest = digest.lower().removeprefix("sha256:")
    if not _SHA256.match(digest):
        raise table.fail("sha256", "must be 64 hexadecimal digits")
    if doc.ref is not None:
        raise table.fail("ref", "only valid with git")
    if doc.mirror is not None:
        raise table.fail("mirror", "only valid with git")
    local: Path | None = None
    if "://" not in sdist or sdist.startswith("file://"):
        given_file = (origin.parent / sdist.removeprefix("file://")).resolve()
        try:
            check_regular(given_file, given_file.stat())
        except FileNotFoundError:
            raise table.fail("sdist", f"{given_file} does not exist") from None
        except OSError as exc:
            raise table.fail(
                "sdist", f"{given_file}: {exc.strerror or exc} (or give an https:// URL)"
            ) from None
        if "://" not in sdist:
            local = given_file
            sdist = str(local)
    elif not sdist.startswith(("https://", "http://", "file://")):
        raise table.fail("sdist", "must be an https://, http:// or file:// URL, or a local path")
    return SourceSpec("sdist", path=local, sdist=sdist, sha256=digest, submodules=submodules)


MAX_PATCH_BYTES = 16 << 20
MAX_PATCHES = 100


def _parse_patches(doc: SourceDoc, table: Table, origin: Path) -> tuple[SourcePatch, ...]:
    """``[[source.patches]]``: ``path`` (beside the recipe) and ``sha256`` of each diff, checked
    here: a patch that is not there, or not the one the recipe names, is refused now."""
    if len(doc.patches) > MAX_PATCHES:
        raise table.fail("patches", f"at most {MAX_PATCHES} patches")
    patches = []
    for entry, given in zip(table.tables("patches"), doc.patches, strict=True):
        where = (origin.parent / given.path).resolve()
        digest = given.sha256.lower().removeprefix("sha256:")
        if not _SHA256.match(digest):
            raise entry.fail("sha256", "must be 64 hexadecimal digits")
        try:
            check_regular(where, where.stat())
            with where.open("rb") as handle:
                data = handle.read(MAX_PATCH_BYTES + 1)
        except OSError as exc:
            raise entry.fail("path", f"{where}: {exc.strerror or exc}") from None
        if len(data) > MAX_PATCH_BYTES:
            raise entry.fail("path", f"{where} is larger than {MAX_PATCH_BYTES >> 20} MiB")
        found = hashlib.sha256(data).hexdigest()
        if found != digest:
            raise entry.fail(
                "sha256", f"{where.name} has sha256 {found}, not the {digest} the recipe names"
            )
        patches.append(SourcePatch(where, digest, given.reason.strip()))
    return tuple(patches)


def _parse_index_source(doc: SourceDoc, project: str, table: Table) -> SourceSpec:
    """``project = "torch-scatter"``, ``version = "2.1.2"``, ``sha256``: an sdist on the index."""
    if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", project):
        raise table.fail("project", f"{project!r} is not a project name")
    version = doc.version
    if version is None:
        raise table.fail("version", "missing: the release of the project to build")
    try:
        Version(version)
    except InvalidVersion:
        raise table.fail("version", f"{version!r} is not a version") from None
    if doc.sha256 is None:
        raise table.fail("sha256", "missing: an sdist needs its sha256 (pip hash, 64 hex digits)")
    digest = doc.sha256.lower().removeprefix("sha256:")
    if not _SHA256.match(digest):
        raise table.fail("sha256", "must be 64 hexadecimal digits")
    if doc.ref is not None:
        raise table.fail("ref", "only valid with git")
    return SourceSpec(
        "sdist",
        sha256=digest,
        project=project,
        project_version=version,
        submodules=doc.submodules,
    )


def _parse_debian_source(doc: SourceDoc, package: str, table: Table) -> SourceSpec:
    """``debian = "pytorch"``, ``version = "2.6.0+dfsg-7"``, optional ``suite`` (else the suite
    of an ``archwheel/debian:SUITE`` base image) and ``sha256`` (the ``.dsc``'s)."""
    if not DEBIAN_PACKAGE.match(package):
        raise table.fail("debian", f"{package!r} is not a Debian source package name")
    version = doc.version
    if version is None:
        raise table.fail("version", "missing: the Debian version to build, e.g. 2.6.0+dfsg-7")
    if not DEBIAN_VERSION.match(version):
        raise table.fail("version", f"{version!r} is not a Debian version")
    if doc.suite is not None and not re.fullmatch(r"[a-z][a-z0-9-]{1,31}", doc.suite):
        raise table.fail("suite", f"{doc.suite!r} is not a Debian suite name")
    digest = doc.sha256
    if digest is not None:
        digest = digest.lower().removeprefix("sha256:")
        if not _SHA256.match(digest):
            raise table.fail("sha256", "must be 64 hexadecimal digits (the .dsc's sha256)")
    for key in ("ref", "mirror"):
        if getattr(doc, key) is not None:
            raise table.fail(key, "only valid with git")
    if doc.submodules:
        raise table.fail("submodules", "only valid with git")
    return SourceSpec(
        "debian", debian=package, project_version=version, sha256=digest, suite=doc.suite
    )


@cache
def pypi_toolchains() -> Mapping[int, Mapping[str, Any]]:
    """The PyPI toolchain data (``build/data/pypi_toolchains.toml``) by CUDA major."""
    text = resources.files("archwheel.wheelbuild").joinpath("data/pypi_toolchains.toml").read_text()
    data = tomllib.loads(text)
    return MappingProxyType({int(k): v for k, v in data["toolchain"].items()})


def _torch_cuda(
    doc: RecipeDoc, kind: RecipeKind, origin: Path, from_wheel: CudaVersion | None
) -> tuple[str, CudaVersion | None] | None:
    """Where ``[toolchain] cuda`` comes from when the recipe does not write it: the pinned
    torch's ``+cuXYZ`` label, else the torch wheel's own CUDA (``from_wheel``; None until the
    caller has read it). None: the recipe pins no torch, so ``cuda`` is required."""
    if kind == "pytorch":
        return None
    pin = find_torch_pin(doc.build.requirements, f"{origin}: [build] requirements")
    if pin is None:
        version = doc.torch.version
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
    doc: ToolchainDoc,
    table: Table,
    facts: CudaFacts,
    derived: tuple[str, CudaVersion | None] | None = None,
) -> ToolchainSpec:
    cuda: CudaVersion | None
    cuda_from = "recipe"
    if doc.cuda is not None or derived is None:
        cuda_text = doc.cuda
        if cuda_text is None:
            raise table.missing("cuda")
        try:
            cuda = CudaVersion.parse(cuda_text)
            facts.toolkit(cuda)
        except UsageError as exc:
            raise table.fail("cuda", exc.one_line()) from None
    else:
        cuda_from, cuda = derived
        if cuda is not None:
            try:
                facts.toolkit(cuda)
            except UsageError as exc:
                raise table.fail(
                    "cuda", f"derived from the pinned torch: {exc.one_line()}"
                ) from None
    image = doc.base_image
    if not _IMAGE_REF.match(image):
        raise table.fail("base_image", f"{image!r} is not an image reference (lowercase name:tag)")
    pin = doc.base_image_id
    if pin is not None and not _IMAGE_ID.match(pin):
        raise table.fail(
            "base_image_id",
            f"{pin!r} is not an image ID (sha256: and 64 hex digits)",
            hint=f"`docker image inspect --format '{{{{.Id}}}}' {image}` prints it",
        )
    source_text = doc.source
    if source_text not in ("image", "pypi"):
        raise table.fail(
            "source", f"{source_text!r} is not a toolchain source", hint="image or pypi"
        )
    system = doc.system_packages
    if source_text == "image":
        if doc.pypi_packages is not None:
            raise table.fail("pypi_packages", 'only valid with source = "pypi"')
        return ToolchainSpec(
            cuda, image, "image", system_packages=system, base_image_id=pin, cuda_from=cuda_from
        )
    if cuda is None:  # the pinned torch's CUDA is not known yet: packages follow on reload
        return ToolchainSpec(
            None,
            image,
            "pypi",
            pypi_packages=doc.pypi_packages or (),
            system_packages=system,
            base_image_id=pin,
            cuda_from=cuda_from,
        )
    known = pypi_toolchains().get(cuda.major)
    if known is None:
        majors = ", ".join(f"{m}.x" for m in sorted(pypi_toolchains()))
        raise table.fail(
            "source",
            f"PyPI has no complete nvcc for CUDA {cuda} (only {majors}; the 12.x nvcc wheels "
            "ship only ptxas)",
            hint='use source = "image" with a base image that holds the toolkit, '
            "e.g. pytorch/manylinux2_28-builder:cuda12.8",
        )
    default_packages = tuple(f"{p}=={cuda}.*" for p in known["packages"])
    packages = doc.pypi_packages if doc.pypi_packages is not None else default_packages
    if not packages:
        raise table.fail("pypi_packages", "must not be empty")
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


def _parse_arch(  # noqa: PLR0917 (the arch table, read against what was read before it)
    doc: ArchDoc,
    table: Table,
    toolchain: ToolchainSpec,
    kind: RecipeKind,
    torch: str | None,
    facts: CudaFacts,
) -> ArchInput:
    grammars = arch_consumers.load_grammars()
    consumer = doc.consumer
    if consumer is not None and consumer not in grammars.consumers:
        close = difflib.get_close_matches(consumer, grammars.consumers, n=1, cutoff=0.5)
        raise table.fail(
            "consumer",
            f"{consumer!r} is not an arch consumer",
            hint=f"did you mean {close[0]!r}?"
            if close
            else f"known: {', '.join(grammars.consumers)}",
        )
    implied = CONSUMER_FORMAT.get(consumer, "project") if consumer else None
    fmt = doc.format if doc.format is not None else (implied or "torch")
    if fmt not in ARCH_FORMATS and not (fmt == "project" and implied == "project"):
        raise table.fail(
            "format",
            f"{fmt!r} is not an arch list format",
            hint="; ".join(f"{k}: {v}" for k, v in ARCH_FORMATS.items()),
        )
    if implied is not None and fmt != implied:
        raise table.fail(
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
        grammars.variable(consumer) if doc.consumer is not None else DEFAULT_ARCH_VARIABLE[fmt]
    )
    variable = doc.variable if doc.variable is not None else default_variable
    if not _ENV_NAME.match(variable) or variable in RESERVED_ENV:
        raise table.fail("variable", f"{variable!r} cannot be used as the arch variable")
    problem = variable_problem(consumer, variable)  # cmake_arch.py: what CMake really reads
    if problem is not None:
        raise table.fail("variable", problem)
    default_text = doc.default
    try:
        default = ArchList.parse(default_text, facts)
        if toolchain.cuda is not None:  # else checked when the torch's CUDA is known
            default.check_toolkit(facts.toolkit(toolchain.cuda), facts)
    except ArchListError as exc:
        raise table.fail("default", exc.one_line()) from None
    arch = ArchInput(
        variable, cast(ArchFormat, fmt), default, consumer, torch=torch, cuda=toolchain.cuda
    )
    try:
        arch.render(default)
    except ArchListError as exc:
        raise table.fail("default", exc.one_line()) from None
    return arch


def _parse_build(doc: BuildDoc, table: Table, arch: ArchInput) -> BuildSpec:
    command = doc.command
    env = doc.env
    jobs_variable = doc.jobs_variable
    if not _ENV_NAME.match(jobs_variable) or jobs_variable in RESERVED_ENV:
        raise table.fail("jobs_variable", f"{jobs_variable!r} cannot be used as the jobs variable")
    for key in env:
        if not _ENV_NAME.match(key):
            raise table.fail(f"env.{key}", "is not a valid environment variable name")
        if key in RESERVED_ENV or key in (arch.variable, jobs_variable):
            raise table.fail(
                f"env.{key}", "is set by archwheel itself and cannot be overridden here"
            )
        if sets_nvcc_time(env[key]):
            raise table.fail(f"env.{key}", OWN_TIME, hint=OWN_TIME_HINT)
    if sets_nvcc_time(command):
        raise table.fail("command", OWN_TIME, hint=OWN_TIME_HINT)
    clash = env_problem(arch.consumer, env)  # CUDAARCHS, CMAKE_ARGS: cmake_arch.py
    if clash is not None:
        raise table.fail(f"env.{clash[0]}", clash[1])
    memory = float(doc.memory_per_job_gib)  # 0.05 to 1024 (recipe_doc)
    requirements = doc.requirements
    for req in requirements:
        if req.strip().startswith("-"):
            raise table.fail("requirements", f"{req!r}: pip options are not allowed here")
    if doc.configure is not None and sets_nvcc_time(doc.configure):
        raise table.fail("configure", OWN_TIME, hint=OWN_TIME_HINT)
    folder = doc.build_folder or ""
    if folder and (folder.startswith("/") or ".." in folder.split("/")):
        raise table.fail("build_folder", f"{folder!r} is not a folder inside the source")
    return BuildSpec(
        command=command,
        configure=doc.configure or "",
        build_folder=folder.strip("/"),
        requirements=requirements,
        env=MappingProxyType(dict(sorted(env.items()))),
        network=doc.network,
        jobs_variable=jobs_variable,
        memory_per_job_gib=memory,
        parallel=_parse_parallel(doc.parallel),
        compress_fatbins=doc.compress_fatbins,
    )


def _parse_parallel(doc: ParallelDoc) -> ParallelSwitches:
    """``[build.parallel]``: each way archwheel spreads the compiles can be turned off
    (wheelbuild/compile/parallel.py; docs/building-extensions.md, "Every core busy")."""
    value = doc.build_ext
    mode: BuildExtMode = "auto" if value == "auto" else ("on" if value is True else "off")
    return ParallelSwitches(
        jobs=doc.jobs, build_ext=mode, nvcc_threads=doc.nvcc_threads, extensions=doc.extensions
    )
