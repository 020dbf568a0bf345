"""PyTorch's official Linux CUDA wheels, per release and CUDA variant (``pytorch_official.toml``).

What the repair step needs to make a wheel like the official one (the RPATH folders of the
nvidia-* wheels, the system libraries bundled, the platform tag, the ``Requires-Dist`` pins) and
the official build environment the ``--compare-official`` report checks recipes against. Every
value carries the key of its source (a pipeline file and commit, or the official wheel itself).
A malformed data file is a ``FactsError`` naming the key.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from archwheel.errors import FactsError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

DATA_FILE = "pytorch_official.toml"
SCHEMA_VERSION = 1


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


def _strs(where: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise FactsError(f"{DATA_FILE}: {where} must be a list of strings")
    return tuple(value)


def _text(where: str, table: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = table.get(key, default)
    if not isinstance(value, str):
        raise FactsError(f"{DATA_FILE}: {where}.{key} must be a string")
    return value


def parse_official(data: Mapping[str, Any]) -> OfficialFacts:
    """Validate the parsed data file."""
    if data.get("schema_version") != SCHEMA_VERSION:
        raise FactsError(f"{DATA_FILE}: schema_version must be {SCHEMA_VERSION}")
    sources: dict[str, Source] = {}
    for key, table in dict(data.get("sources", {})).items():
        where = f"sources.{key}"
        if not isinstance(table, dict):
            raise FactsError(f"{DATA_FILE}: {where} must be a table")
        source = Source(
            key,
            _text(where, table, "file"),
            _text(where, table, "commit", ""),
            _text(where, table, "sha256", ""),
            _text(where, table, "note", ""),
        )
        if not source.commit and not source.sha256:
            raise FactsError(f"{DATA_FILE}: {where} needs a commit or a sha256")
        sources[key] = source

    def source_of(where: str, key: object) -> Source:
        if not isinstance(key, str) or key not in sources:
            raise FactsError(f"{DATA_FILE}: {where}: unknown source {key!r}")
        return sources[key]

    layouts: dict[str, tuple[tuple[str, ...], Source]] = {}
    for key, table in dict(data.get("layouts", {})).items():
        where = f"layouts.{key}"
        folders = _strs(f"{where}.folders", table.get("folders"))
        if any(f.startswith("/") or ".." in f.split("/") for f in folders):
            raise FactsError(f"{DATA_FILE}: {where}.folders must be relative to site-packages")
        layouts[key] = (folders, source_of(where, table.get("source")))

    variants: dict[tuple[str, str], OfficialVariant] = {}
    for release, by_variant in dict(data.get("releases", {})).items():
        for name, table in dict(by_variant).items():
            where = f"releases.{release}.{name}"
            cuda = _text(where, table, "cuda")
            layout = _text(where, table, "layout")
            if layout not in layouts:
                raise FactsError(f"{DATA_FILE}: {where}.layout: unknown layout {layout!r}")
            requirements = _strs(f"{where}.requirements", table.get("requirements", []))
            for line in requirements:
                try:
                    Requirement(line)
                except InvalidRequirement as exc:
                    raise FactsError(f"{DATA_FILE}: {where}.requirements: {exc}") from None
            env: dict[str, Setting] = {}
            for var, pair in dict(table.get("env", {})).items():
                values = _strs(f"{where}.env.{var}", pair)
                if len(values) != 2:
                    raise FactsError(f"{DATA_FILE}: {where}.env.{var} must be [value, source]")
                env[var] = Setting(var, values[0], source_of(f"{where}.env.{var}", values[1]))
            unset: dict[str, Source] = {}
            for var, key in dict(table.get("unset", {})).items():
                if var in env:
                    raise FactsError(f"{DATA_FILE}: {where}.unset.{var} is also in env")
                unset[var] = source_of(f"{where}.unset.{var}", key)
            flag = table.get("in_official_matrix", True)
            if not isinstance(flag, bool):
                raise FactsError(f"{DATA_FILE}: {where}.in_official_matrix must be true or false")
            variants[(release, cuda)] = OfficialVariant(
                release=release,
                variant=name,
                cuda=cuda,
                in_official_matrix=flag,
                rpath_folders=layouts[layout][0],
                rpath_source=layouts[layout][1],
                platform=_text(where, table, "platform"),
                bundle=_strs(f"{where}.bundle", table.get("bundle", [])),
                library_folder=_text(where, table, "library_folder"),
                requirements=requirements,
                requirements_source=source_of(where, table.get("requirements_source")),
                provided=frozenset(_strs(f"{where}.provided", table.get("provided", []))),
                driver=frozenset(_strs(f"{where}.driver", table.get("driver", []))),
                env=MappingProxyType(env),
                libraries=frozenset(_strs(f"{where}.libraries", table.get("libraries", []))),
                unset=MappingProxyType(unset),
                host=frozenset(_strs(f"{where}.host", table.get("host", []))),
            )
    deliberate = dict(data.get("deliberate", {}))
    for var, why in deliberate.items():
        if not isinstance(why, str):
            raise FactsError(f"{DATA_FILE}: deliberate.{var} must be a string")
    return OfficialFacts(
        MappingProxyType(sources), MappingProxyType(variants), MappingProxyType(deliberate)
    )


@cache
def load_official() -> OfficialFacts:
    """The packaged table (cached)."""
    text = resources.files("archwheel.facts").joinpath(DATA_FILE).read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FactsError(f"{DATA_FILE}: invalid TOML: {exc}") from None
    return parse_official(data)
