"""Which CPython each base image offers, known before any container runs.

A build's Python has to exist in its base image: the builder image makes its virtual
environment from it (``docker/provision.sh``). archwheel's own Debian bases
(``archwheel/debian:SUITE``) offer exactly the one CPython their Debian release packages;
images with ``/opt/python`` (manylinux, PyTorch's builders) offer what they carry there, which
only the image itself can say. The data, with where each value was read, is
``base_pythons.toml``; ``load_base_pythons`` reads it once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Annotated, Any, cast

from msgspec import Meta

from archwheel.errors import FactsError
from archwheel.facts.documents import Table, load_document
from archwheel.facts.python_target import PythonTarget
from archwheel.facts.typed import Document, NonBlank, decode

DATA_FILE = "base_pythons.toml"
SCHEMA_VERSION = 1
MAX_NESTING = 8
# The images ``archwheel base-image --suite SUITE`` makes are tagged DEBIAN_REPOSITORY:SUITE.
DEBIAN_REPOSITORY = "archwheel/debian"


@dataclass(frozen=True)
class DebianSuite:
    """One Debian release as an archwheel base: its CPython and its glibc, and their source."""

    suite: str  # bookworm
    release: str  # 12
    python: str  # 3.11
    glibc: tuple[int, int]
    source: str
    gcc: int | None = None  # the major of the suite's default gcc (gcc-defaults)

    @property
    def image(self) -> str:
        """The base image archwheel makes for it: ``archwheel/debian:bookworm``."""
        return f"{DEBIAN_REPOSITORY}:{self.suite}"

    def describe(self) -> str:
        """``Debian 12 bookworm (python3.11, glibc 2.36)``."""
        return (
            f"Debian {self.release} {self.suite} "
            f"(python{self.python}, glibc {self.glibc[0]}.{self.glibc[1]})"
        )


@dataclass(frozen=True)
class BasePythons:
    """The table: archwheel's Debian suites, and the images that keep CPythons in /opt/python."""

    debian: tuple[DebianSuite, ...]
    opt_python_prefixes: tuple[str, ...]
    opt_python_source: str

    def suite(self, name: str) -> DebianSuite | None:
        """The suite called ``name``; None when the table does not know it."""
        return next((s for s in self.debian if s.suite == name), None)

    def suite_for(self, python: str) -> DebianSuite | None:
        """The Debian suite whose CPython is ``python`` (``3.13``); None for a version no suite
        packages, and for a free-threaded one (``3.13t``: Debian's python3 is built with the
        GIL)."""
        target = PythonTarget.parse(python)
        if target.free_threaded:
            return None
        return next((s for s in self.debian if s.python == target.version), None)

    def has_opt_python(self, image: str) -> bool:
        """Whether ``image`` is of a family that keeps its CPythons in /opt/python."""
        return image.startswith(self.opt_python_prefixes)

    def debian_offers(self) -> str:
        """``3.9 (bullseye), 3.11 (bookworm), 3.13 (trixie), 3.14 (sid)``: for messages."""
        return ", ".join(f"{s.python} ({s.suite})" for s in self.debian)


class _DebianDoc(Document, frozen=True, kw_only=True):
    """One ``[[debian]]`` row: a suite, its release, its CPython and glibc, and their source."""

    suite: NonBlank
    release: NonBlank
    python: NonBlank
    glibc: NonBlank
    source: NonBlank
    gcc: Annotated[int, Meta(ge=4, le=99)] | None = None


class _OptPythonDoc(Document, frozen=True, kw_only=True):
    """``[opt_python]``: the image names that keep their CPythons in /opt/python."""

    prefixes: tuple[str, ...] = ()
    source: NonBlank


class _BasePythonsDoc(Document, frozen=True, kw_only=True):
    """The data file: its schema version, the Debian suites and ``[opt_python]``."""

    schema_version: Annotated[int, Meta(ge=1)]
    debian: tuple[_DebianDoc, ...]
    opt_python: _OptPythonDoc


def _glibc(table: Table, text: str) -> tuple[int, int]:
    major, sep, minor = text.partition(".")
    if not (sep and major == "2" and minor.isdigit()):
        raise table.fail("glibc", f"{text!r} is not a glibc version such as 2.36")
    return 2, int(minor)


def parse_base_pythons(data: dict[str, Any]) -> BasePythons:
    """The parsed table, checked: every value present and well-formed (``FactsError``)."""
    top = Table(data, DATA_FILE, FactsError, toml=True)
    doc = decode(top, _BasePythonsDoc)  # types, required and unknown keys (facts/typed.py)
    if doc.schema_version != SCHEMA_VERSION:
        raise top.fail("schema_version", f"{doc.schema_version} is not {SCHEMA_VERSION}")
    suites: list[DebianSuite] = []
    for table, row in zip(top.tables("debian"), doc.debian, strict=True):
        try:
            target = PythonTarget.parse(row.python)
        except ValueError as exc:
            raise table.fail("python", str(exc)) from None
        if target.free_threaded:
            raise table.fail("python", "a Debian suite's python3 is built with the GIL")
        suite = DebianSuite(
            row.suite, row.release, row.python, _glibc(table, row.glibc), row.source, row.gcc
        )
        if any(s.suite == suite.suite for s in suites):
            raise table.fail("suite", f"{suite.suite!r} is listed twice")
        suites.append(suite)
    return BasePythons(tuple(suites), doc.opt_python.prefixes, doc.opt_python.source)


@cache
def load_base_pythons() -> BasePythons:
    """The packaged table (read once)."""
    raw = resources.files("archwheel.facts").joinpath(DATA_FILE).read_bytes()
    document = load_document(
        raw, origin=DATA_FILE, nesting=MAX_NESTING, toml=True, error=FactsError
    )
    return parse_base_pythons(cast("dict[str, Any]", document))  # TOML's top level is a table
