"""PyTorch's official Linux CUDA wheels, per release and CUDA variant (``pytorch_official.toml``).

What the repair step needs to make a wheel like the official one (the RPATH folders of the
nvidia-* wheels, the system libraries bundled, the platform tag, the ``Requires-Dist`` pins) and
the official build environment the ``--compare-official`` report checks recipes against. Every
value carries the key of its source (a pipeline file and commit, or the official wheel itself).
A malformed data file is a ``FactsError`` naming the key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any, cast

from packaging.requirements import InvalidRequirement, Requirement

from archwheel.errors import FactsError
from archwheel.facts.documents import Table, load_document
from archwheel.facts.typed import Document, decode

DATA_FILE = "pytorch_official.toml"
SCHEMA_VERSION = 1
MAX_NESTING = 16  # tables and arrays inside each other (the data file nests 4 deep)


@dataclass(frozen=True)
class Source:
    """Where an official value was read: a pipeline file at a commit, or an official wheel
    by its sha256; every value in ``pytorch_official.toml`` cites one by ``key``."""

    key: str
    file: str
    commit: str = ""
    sha256: str = ""
    note: str = ""

    def describe(self) -> str:
        """``FILE (commit C)`` or ``FILE (sha256 S)``, to cite the source in a report."""
        pin = f"commit {self.commit}" if self.commit else f"sha256 {self.sha256}"
        return f"{self.file} ({pin})"


@dataclass(frozen=True)
class Setting:
    """One environment variable the official build sets, with its value and source."""

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
    # Each library's DT_NEEDED in the official wheel, by file name (recorded for 2.6.0: what a
    # build from Debian's source is compared with, library by library)
    needed: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def key(self) -> str:
        """``2.14.1/cu130``: how messages name the variant."""
        return f"{self.release}/{self.variant}"


@dataclass(frozen=True)
class OfficialFacts:
    """Every official variant recorded, its sources, and why archwheel's builds differ on
    purpose (``deliberate``); made once by ``load_official`` for repair and the comparison."""

    sources: Mapping[str, Source]
    variants: Mapping[tuple[str, str], OfficialVariant]  # (release, cuda "13.0")
    deliberate: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def variant(self, release: str, cuda: str) -> OfficialVariant | None:
        """The official variant of torch ``release`` for CUDA ``cuda`` (``13.0``); None if
        it is not recorded."""
        return self.variants.get((release, cuda))

    def of_release(self, release: str) -> tuple[OfficialVariant, ...]:
        """Every recorded official variant of torch ``release``, by CUDA version."""
        return tuple(sorted((v for v in self.variants.values() if v.release == release),
                            key=lambda v: v.cuda))  # fmt: skip

    def closest(self, release: str, cuda: str) -> OfficialVariant | None:
        """The official variant to compare a build of ``release`` with CUDA ``cuda`` against:
        that variant, else the release's newest CUDA's (Debian's source of 2.6.0 builds with
        CUDA 13.0; the official 2.6.0 wheel on PyPI is CUDA 12.4), else None."""
        exact = self.variant(release, cuda)
        if exact is not None:
            return exact
        others = self.of_release(release)
        return others[-1] if others else None

    def known(self) -> tuple[str, ...]:
        """The recorded variants' keys, sorted, for the message that names what is known."""
        return tuple(sorted(v.key for v in self.variants.values()))


class _SourceDoc(Document, frozen=True, kw_only=True):
    """``[sources.KEY]``: a pipeline file and its commit, or a wheel and its sha256."""

    file: str
    commit: str = ""
    sha256: str = ""
    note: str = ""


class _LayoutDoc(Document, frozen=True, kw_only=True):
    """``[layouts.KEY]``: the RPATH folders of the nvidia-* wheels, and their source."""

    folders: tuple[str, ...]
    source: str


class _VariantDoc(Document, frozen=True, kw_only=True):
    """``[releases."2.9.0".cu128]``: one official wheel variant, as ``OfficialVariant``."""

    cuda: str
    layout: str
    in_official_matrix: bool = True
    platform: str
    bundle: tuple[str, ...] = ()
    library_folder: str
    requirements: tuple[str, ...] = ()
    requirements_source: str
    provided: tuple[str, ...] = ()
    driver: tuple[str, ...] = ()
    env: dict[str, tuple[str, ...]] = {}  # noqa: RUF012 (msgspec copies an empty default)
    unset: dict[str, str] = {}  # noqa: RUF012
    libraries: tuple[str, ...] = ()
    host: tuple[str, ...] = ()
    needed: dict[str, tuple[str, ...]] = {}  # noqa: RUF012


class _OfficialDoc(Document, frozen=True, kw_only=True):
    """The data file (its ``schema_version`` is checked before, in its own words)."""

    schema_version: int
    sources: dict[str, _SourceDoc] = {}  # noqa: RUF012
    layouts: dict[str, _LayoutDoc] = {}  # noqa: RUF012
    releases: dict[str, dict[str, _VariantDoc]] = {}  # noqa: RUF012
    deliberate: dict[str, str] = {}  # noqa: RUF012


def parse_official(data: Mapping[str, Any]) -> OfficialFacts:
    """Validate the parsed data file; ``FactsError`` names the key."""
    top = Table(data, DATA_FILE, FactsError, toml=True)
    if data.get("schema_version") != SCHEMA_VERSION:
        raise top.expected("schema_version", str(SCHEMA_VERSION))
    doc = decode(top, _OfficialDoc)  # types, required and unknown keys (facts/typed.py)
    sources: dict[str, Source] = {}
    for key, given in doc.sources.items():
        if not given.commit and not given.sha256:
            raise top.table("sources").table(key).fail(None, "needs a commit or a sha256")
        sources[key] = Source(key, given.file, given.commit, given.sha256, given.note)

    def source_of(table: Table, key: str, name: str) -> Source:
        """The source ``name``, written at ``key`` of ``table``."""
        if name not in sources:
            raise table.fail(key, f"unknown source {name!r}")
        return sources[name]

    layouts: dict[str, tuple[tuple[str, ...], Source]] = {}
    for key, layout in doc.layouts.items():
        table = top.table("layouts").table(key)
        if any(f.startswith("/") or ".." in f.split("/") for f in layout.folders):
            raise table.fail("folders", "must be relative to site-packages")
        layouts[key] = (layout.folders, source_of(table, "source", layout.source))

    variants: dict[tuple[str, str], OfficialVariant] = {}
    for release, by_variant in doc.releases.items():
        for name, row in by_variant.items():
            table = top.table("releases").table(release).table(name)
            variants[(release, row.cuda)] = _variant(release, name, row, table, layouts, source_of)
    return OfficialFacts(
        MappingProxyType(sources), MappingProxyType(variants), MappingProxyType(doc.deliberate)
    )


def _variant(  # noqa: PLR0917 (one row, read against the tables read before it)
    release: str,
    name: str,
    row: _VariantDoc,
    table: Table,
    layouts: Mapping[str, tuple[tuple[str, ...], Source]],
    source_of: Callable[[Table, str, str], Source],
) -> OfficialVariant:
    """One official variant from its row; ``table`` names its keys in messages."""
    if row.layout not in layouts:
        raise table.fail("layout", f"unknown layout {row.layout!r}")
    for line in row.requirements:
        try:
            Requirement(line)
        except InvalidRequirement as exc:
            raise table.fail("requirements", str(exc)) from None
    env: dict[str, Setting] = {}
    env_table = table.table("env")
    for var, values in row.env.items():
        if len(values) != 2:
            raise env_table.expected(var, "[value, source]")
        env[var] = Setting(var, values[0], source_of(env_table, var, values[1]))
    unset: dict[str, Source] = {}
    for var, source in row.unset.items():
        if var in env:
            raise table.table("unset").fail(var, "is also in env")
        unset[var] = source_of(table.table("unset"), var, source)
    if set(row.needed) - set(row.libraries):
        raise table.table("needed").fail(
            sorted(set(row.needed) - set(row.libraries))[0], "is not in libraries"
        )
    folders, rpath_source = layouts[row.layout]
    return OfficialVariant(
        release=release,
        variant=name,
        cuda=row.cuda,
        in_official_matrix=row.in_official_matrix,
        rpath_folders=folders,
        rpath_source=rpath_source,
        platform=row.platform,
        bundle=row.bundle,
        library_folder=row.library_folder,
        requirements=row.requirements,
        requirements_source=source_of(table, "requirements_source", row.requirements_source),
        provided=frozenset(row.provided),
        driver=frozenset(row.driver),
        env=MappingProxyType(env),
        libraries=frozenset(row.libraries),
        unset=MappingProxyType(unset),
        host=frozenset(row.host),
        needed=MappingProxyType(dict(row.needed)),
    )


@cache
def load_official() -> OfficialFacts:
    """The packaged table (cached)."""
    raw = resources.files("archwheel.facts").joinpath(DATA_FILE).read_bytes()
    document = load_document(
        raw, origin=DATA_FILE, nesting=MAX_NESTING, toml=True, error=FactsError
    )
    return parse_official(cast("dict[str, Any]", document))  # TOML's top level is a table
