"""PyTorch's official Linux CUDA wheels, per release and CUDA variant (``pytorch_official.toml``).

What the repair step needs to make a wheel like the official one (the RPATH folders of the
nvidia-* wheels, the system libraries bundled, the platform tag, the ``Requires-Dist`` pins) and
the official build environment the ``--compare-official`` report checks recipes against. Every
value carries the key of its source (a pipeline file and commit, or the official wheel itself).
A malformed data file is a ``FactsError`` naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any, cast

from packaging.requirements import InvalidRequirement, Requirement

from archwheel.errors import FactsError
from archwheel.facts.documents import Table, load_document

DATA_FILE = "pytorch_official.toml"
SCHEMA_VERSION = 1
MAX_NESTING = 16  # tables and arrays inside each other (the data file nests 4 deep)


@dataclass(frozen=True)
class Source:
    key: str
    file: str
    commit: str = ""
    sha256: str = ""
    note: str = ""

    def describe(self) -> str:
        pin = f"commit {self.commit}" if self.commit else f"sha256 {self.sha256}"
        return f"{self.file} ({pin})"


@dataclass(frozen=True)
class Setting:
    name: str
    value: str
    source: Source


@dataclass(frozen=True)
class OfficialVariant:
    """One official wheel variant: ``release`` (2.14.1) built with CUDA ``cuda`` (13.0)."""

    release: str
    variant: str  # cu130
    cuda: str
    in_official_matrix: bool
    rpath_folders: tuple[str, ...]  # relative to site-packages
    rpath_source: Source
    platform: str
    bundle: tuple[str, ...]
    library_folder: str
    requirements: tuple[str, ...]
    requirements_source: Source
    provided: frozenset[str]
    driver: frozenset[str]
    env: Mapping[str, Setting]
    libraries: frozenset[str] = frozenset()  # what the wheel ships in library_folder
    # Libraries the official wheel needs from the host that neither the manylinux policy nor a
    # requirement covers (2.15.0: its bundled libgfortran.so.5 needs libquadmath.so.0).
    host: frozenset[str] = frozenset()
    # Variables the official build of this variant does NOT set (a pipeline file that sets them
    # was not what made the wheel: the wheel itself shows it), each with that evidence.
    unset: Mapping[str, Source] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def key(self) -> str:
        return f"{self.release}/{self.variant}"


@dataclass(frozen=True)
class OfficialFacts:
    sources: Mapping[str, Source]
    variants: Mapping[tuple[str, str], OfficialVariant]  # (release, cuda "13.0")
    deliberate: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def variant(self, release: str, cuda: str) -> OfficialVariant | None:
        return self.variants.get((release, cuda))

    def known(self) -> tuple[str, ...]:
        return tuple(sorted(v.key for v in self.variants.values()))


def _relative_folders(table: Table, key: str) -> tuple[str, ...]:
    folders = table.texts(key, None)
    if any(f.startswith("/") or ".." in f.split("/") for f in folders):
        raise table.fail(key, "must be relative to site-packages")
    return folders


def parse_official(data: Mapping[str, Any]) -> OfficialFacts:
    """Validate the parsed data file; ``FactsError`` names the key."""
    top = Table(data, DATA_FILE, FactsError, toml=True)
    if data.get("schema_version") != SCHEMA_VERSION:
        raise top.expected("schema_version", str(SCHEMA_VERSION))
    sources: dict[str, Source] = {}
    source_tables = top.table("sources")
    for key in source_tables:
        table = source_tables.table(key)
        source = Source(
            key,
            table.text("file"),
            table.text("commit", ""),
            table.text("sha256", ""),
            table.text("note", ""),
        )
        if not source.commit and not source.sha256:
            raise table.fail(None, "needs a commit or a sha256")
        sources[key] = source

    def source_of(table: Table, key: str, name: object = None) -> Source:
        """The source named at ``key`` (or ``name``, written there)."""
        name = table.data.get(key) if name is None else name
        if not isinstance(name, str) or name not in sources:
            raise table.fail(key, f"unknown source {name!r}")
        return sources[name]

    layouts: dict[str, tuple[tuple[str, ...], Source]] = {}
    layout_tables = top.table("layouts")
    for key in layout_tables:
        table = layout_tables.table(key)
        layouts[key] = (_relative_folders(table, "folders"), source_of(table, "source"))

    variants: dict[tuple[str, str], OfficialVariant] = {}
    releases = top.table("releases")
    for release in releases:
        by_variant = releases.table(release)
        for name in by_variant:
            table = by_variant.table(name)
            cuda = table.text("cuda")
            layout = table.text("layout")
            if layout not in layouts:
                raise table.fail("layout", f"unknown layout {layout!r}")
            requirements = table.texts("requirements")
            for line in requirements:
                try:
                    Requirement(line)
                except InvalidRequirement as exc:
                    raise table.fail("requirements", str(exc)) from None
            env: dict[str, Setting] = {}
            env_table = table.table("env")
            for var in env_table:
                values = env_table.texts(var, None)
                if len(values) != 2:
                    raise env_table.expected(var, "[value, source]")
                env[var] = Setting(var, values[0], source_of(env_table, var, values[1]))
            unset: dict[str, Source] = {}
            unset_table = table.table("unset")
            for var in unset_table:
                if var in env:
                    raise unset_table.fail(var, "is also in env")
                unset[var] = source_of(unset_table, var)
            variants[(release, cuda)] = OfficialVariant(
                release=release,
                variant=name,
                cuda=cuda,
                in_official_matrix=table.flag("in_official_matrix", True),
                rpath_folders=layouts[layout][0],
                rpath_source=layouts[layout][1],
                platform=table.text("platform"),
                bundle=table.texts("bundle"),
                library_folder=table.text("library_folder"),
                requirements=requirements,
                requirements_source=source_of(table, "requirements_source"),
                provided=frozenset(table.texts("provided")),
                driver=frozenset(table.texts("driver")),
                env=MappingProxyType(env),
                libraries=frozenset(table.texts("libraries")),
                unset=MappingProxyType(unset),
                host=frozenset(table.texts("host")),
            )
    deliberate = top.text_map("deliberate")
    return OfficialFacts(
        MappingProxyType(sources), MappingProxyType(variants), MappingProxyType(deliberate)
    )


@cache
def load_official() -> OfficialFacts:
    """The packaged table (cached)."""
    raw = resources.files("archwheel.facts").joinpath(DATA_FILE).read_bytes()
    document = load_document(
        raw, origin=DATA_FILE, nesting=MAX_NESTING, toml=True, error=FactsError
    )
    return parse_official(cast("dict[str, Any]", document))  # TOML's top level is a table
