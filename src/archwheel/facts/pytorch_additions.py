"""The device images PyTorch's CMake adds to single CUDA sources (``pytorch_additions.toml``).

PyTorch compiles a few GEMM sources for an arch-specific target beyond the requested list
(``RowwiseScaledMM.cu`` gets ``sm_90a`` when 9.0 is listed and nvcc is 12.0 or newer). A proof
that every compile step carries exactly the requested archs names these as additions with their
rule; each rule names the PyTorch releases it was read for and the file and lines it comes from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Annotated, Any, cast

from msgspec import Meta
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from archwheel.errors import FactsError
from archwheel.facts.documents import Table, load_document
from archwheel.facts.typed import Document, NonBlank, decode

DATA_FILE = "pytorch_additions.toml"
SCHEMA_VERSION = 1
MAX_NESTING = 8
_IMAGE = re.compile(r"(sm|compute)_[0-9]{2,3}[af]?")


@dataclass(frozen=True)
class Addition:
    """One rule: ``file`` gets ``adds`` when the gencode flags name ``when`` and nvcc is at
    least ``nvcc_min``, in the PyTorch releases ``torch``."""

    id: str
    file: str  # relative to PyTorch's source root
    adds: frozenset[str]  # image names: sm_90a
    when: str  # a substring of the gencode flags CMake made (compute_90)
    nvcc_min: Version
    torch: SpecifierSet
    source: str  # file:lines (release)
    text: str

    def matches(self, path: str) -> bool:
        """Whether a step's source (absolute, or relative to a build folder) is this file."""
        return path == self.file or path.endswith("/" + self.file)

    def applies(self, flags: str, nvcc: Version | None, torch: Version | None) -> bool:
        """Whether CMake adds it: the flags name ``when``, nvcc is new enough and the release
        is in range (an unknown nvcc or release: judged by the flags alone)."""
        if self.when not in flags:
            return False
        if nvcc is not None and nvcc < self.nvcc_min:
            return False
        return torch is None or self.torch.contains(torch, prereleases=True)


class _AdditionDoc(Document, frozen=True, kw_only=True):
    """One ``[[addition]]`` row."""

    id: NonBlank
    file: NonBlank
    adds: tuple[str, ...]
    when: NonBlank
    nvcc_min: NonBlank
    torch: NonBlank
    source: NonBlank
    text: NonBlank


class _AdditionsDoc(Document, frozen=True, kw_only=True):
    """The data file: its schema version and the rules."""

    schema_version: Annotated[int, Meta(ge=1)]
    addition: tuple[_AdditionDoc, ...]


def parse_additions(data: dict[str, Any]) -> tuple[Addition, ...]:
    """The rules, checked (``FactsError`` naming the key)."""
    top = Table(data, DATA_FILE, FactsError, toml=True)
    doc = decode(top, _AdditionsDoc)
    if doc.schema_version != SCHEMA_VERSION:
        raise top.fail("schema_version", f"{doc.schema_version} is not {SCHEMA_VERSION}")
    rules: list[Addition] = []
    for table, row in zip(top.tables("addition"), doc.addition, strict=True):
        bad = [a for a in row.adds if not _IMAGE.fullmatch(a)]
        if bad or not row.adds:
            raise table.fail("adds", f"{bad or row.adds!r}: expected image names such as sm_90a")
        try:
            nvcc = Version(row.nvcc_min)
        except InvalidVersion:
            raise table.fail("nvcc_min", f"{row.nvcc_min!r} is not a version") from None
        try:
            torch = SpecifierSet(row.torch)
        except InvalidSpecifier:
            raise table.fail("torch", f"{row.torch!r} is not a version range") from None
        if any(r.id == row.id for r in rules):
            raise table.fail("id", f"{row.id!r} is listed twice")
        rules.append(
            Addition(row.id, row.file, frozenset(row.adds), row.when, nvcc, torch, row.source,
                     row.text)
        )  # fmt: skip
    return tuple(rules)


@cache
def load_additions() -> tuple[Addition, ...]:
    """The packaged rules (read once)."""
    raw = resources.files("archwheel.facts").joinpath(DATA_FILE).read_bytes()
    document = load_document(
        raw, origin=DATA_FILE, nesting=MAX_NESTING, toml=True, error=FactsError
    )
    return parse_additions(cast("dict[str, Any]", document))
