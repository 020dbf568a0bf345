"""A build matrix and its plan: which cells there are, what each builds, which are skipped.

A matrix is recipes x torch versions x Python versions x arch lists, less exclusions, from a
TOML file (``[matrix]``) and/or flags (a flag replaces the file's axis). An empty torch axis
means "the recipe's own torch"; a recipe not built against torch has no torch axis. An empty
Python or arch axis means the recipe's default. Two cells that would publish one wheel file name
(one recipe, torch and Python; two arch lists) are refused: one arch list per index.

Each cell gets a **key**: the sha256 of everything that decides its wheel and that is known
before a build (the recipe file's sha256, the source digest when the caller knows it, the
torch and Python versions, the checked arch list). A cell whose key is already in the index is
skipped; a cell the recipe cannot build (a Python it does not list) is excluded with the reason.

The file format (docs/matrix.md)::

    schema_version = 1
    [matrix]
    recipes = ["example", "libtorch-ops"]
    python = ["3.11", "3.12"]
    torch = ["2.13.0", "2.14.1"]     # optional
    arch = ["9.0"]
    [[matrix.exclude]]               # every key given must match
    python = "3.12"
    torch = "2.13.0"
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from itertools import product
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from msgspec import Meta
from packaging.version import Version

from archwheel.effects.files import read_document
from archwheel.errors import UsageError
from archwheel.facts.arch import ArchList
from archwheel.facts.documents import Table
from archwheel.facts.typed import Document, decode
from archwheel.matrix.entry import IndexEntry

if TYPE_CHECKING:
    from archwheel.wheelbuild.planning.recipe_summary import RecipeSummary

MATRIX_SCHEMA_VERSION = 1
# The largest matrix file read and its deepest nesting (a real one nests 3 deep; docs/limits.md).
MAX_MATRIX_BYTES = 1 << 20
MAX_MATRIX_NESTING = 16
# The most cells one matrix may span (recipes x torch x python x arch lists, before exclusions):
# a real one has tens; a 9 KB file of 200 x 200 x 150 values would plan six
# million cells for minutes and gigabytes before saying anything.
MAX_MATRIX_CELLS = 10_000
MAX_MATRIX_EXCLUSIONS = 1000  # [[matrix.exclude]] tables and --exclude options together
AXES = ("recipe", "torch", "python", "arch")
_FILE_AXES = {"recipes": "recipe", "torch": "torch", "python": "python", "arch": "arch"}


@dataclass(frozen=True)
class Exclusion:
    """Cells matching every given key are left out."""

    values: Mapping[str, str]

    def matches(self, cell: Cell) -> bool:
        """True when ``cell`` has every axis value the exclusion names (arch lists compared in
        canonical form): the plan leaves such a cell out."""
        for axis, value in self.values.items():
            wanted = str(ArchList.parse(value)) if axis == "arch" else value
            if getattr(cell, axis) != wanted:
                return False
        return True

    def __str__(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.values.items())


@dataclass(frozen=True)
class MatrixSpec:
    """The matrix as given: axes (empty: the recipe's default) and exclusions."""

    recipes: tuple[str, ...]
    torch: tuple[str, ...] = ()
    python: tuple[str, ...] = ()
    arch: tuple[str, ...] = ()
    exclude: tuple[Exclusion, ...] = ()

    def override(self, **axes: Sequence[str]) -> MatrixSpec:
        """Flags replace the file's axis (an empty flag leaves it)."""
        values = {
            "recipes": self.recipes,
            "torch": self.torch,
            "python": self.python,
            "arch": self.arch,
        }
        for name, given in axes.items():
            if given:
                values[name] = tuple(given)
        return MatrixSpec(exclude=self.exclude, **values)


@dataclass(frozen=True)
class Cell:
    """One build of the matrix."""

    recipe: str
    torch: str | None
    python: str
    arch: str  # the checked arch list, canonical form
    # A range cell: the torch releases its one wheel is meant to serve (the recipe's
    # loads_with among the torch axis); () for a cell of one torch.
    serves: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The one-line name of the cell in plans, logs and CI jobs, e.g. ``ops torch 2.14.1 py3.11
        [8.0;9.0]``."""
        torch = f" torch {self.torch}" if self.torch else ""
        if self.serves:
            torch += f" (serves {', '.join(self.serves)})"
        return f"{self.recipe}{torch} py{self.python} [{self.arch}]"

    def to_json_dict(self) -> dict[str, Any]:
        """The cell's axes as the plan and result JSON name them."""
        return {
            "recipe": self.recipe,
            "torch": self.torch,
            "serves": list(self.serves),
            "python": self.python,
            "arch": self.arch,
        }


class Action(str, Enum):
    """What the plan does with a cell: build it, skip it (the index holds it with the same inputs),
    or leave it out."""

    BUILD = "build"
    SKIP = "skip"  # already in the index with the same inputs
    EXCLUDED = "excluded"  # by an exclusion, or the recipe cannot build it


@dataclass(frozen=True)
class PlannedCell:
    """A cell with its key (a digest of every input its build depends on), what the plan does with
    it and why, and the base its build runs on."""

    cell: Cell
    key: str
    action: Action
    reason: str = ""
    existing: tuple[str, ...] = ()  # wheels in the index with this key
    # The base image its build runs on: the one that has its Python (a bookworm recipe's 3.13
    # builds on trixie); None for a cell that is not built (a Python the recipe does not list).
    base: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        """The planned cell as ``matrix --plan --format json`` shows it (the matrix-plan schema)."""
        return {
            **self.cell.to_json_dict(),
            "base": self.base,
            "key": self.key,
            "action": self.action.value,
            "reason": self.reason,
            "existing": list(self.existing),
        }


@dataclass(frozen=True)
class MatrixPlan:
    """Every cell of a matrix with its action, and the recipe summaries it was planned from (the
    runner reads each cell's CUDA there)."""

    cells: tuple[PlannedCell, ...]
    recipes: Mapping[str, RecipeSummary] = field(default_factory=dict)

    def of(self, action: Action) -> tuple[PlannedCell, ...]:
        """The cells the plan gives ``action``, in plan order: what to build, skip or leave out."""
        return tuple(c for c in self.cells if c.action is action)

    def to_json_dict(self) -> dict[str, Any]:
        """The plan as ``matrix --plan --format json`` prints it: every cell, and how many are
        built, skipped and left out."""
        return {
            "schema_version": MATRIX_SCHEMA_VERSION,
            "cells": [c.to_json_dict() for c in self.cells],
            "build": len(self.of(Action.BUILD)),
            "skip": len(self.of(Action.SKIP)),
            "excluded": len(self.of(Action.EXCLUDED)),
        }


# -- reading a matrix file ------------------------------------------------------------------------


def parse_exclusion(text: str, where: str = "--exclude") -> Exclusion:
    """``python=3.12,arch=8.0;9.0`` (commas separate keys; an arch list keeps its own ';')."""
    values: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in AXES or not value.strip():
            raise UsageError(
                f"{where}: {part!r} is not AXIS=VALUE",
                hint=f"axes: {', '.join(AXES)}; e.g. python=3.12,arch=8.0;9.0",
            )
        values[key] = value.strip()
    return Exclusion(values)


Axis = str | tuple[str, ...]  # one value, or a list of values


class MatrixTable(Document, frozen=True, kw_only=True):
    """``[matrix]``: the values of each axis (a string or a list of strings) and the cells
    left out (``[[matrix.exclude]]``, each a table of axis values)."""

    recipes: Axis | None = None
    torch: Axis | None = None
    python: Axis | None = None
    arch: Axis | None = None
    exclude: tuple[dict[str, Any], ...] = ()


class MatrixFile(Document, frozen=True, kw_only=True):
    """A matrix file: its schema version and ``[matrix]``."""

    schema_version: Annotated[Literal[1], Meta(extra={"expected": "1"})] = 1  # the one version
    matrix: MatrixTable | None = None


def load_matrix(path: Path) -> MatrixSpec:
    """Read and validate a matrix file; every message names the file and the key."""
    document, _ = read_document(  # FIFOs, devices, /proc refused by type
        path, MAX_MATRIX_BYTES, MAX_MATRIX_NESTING, toml=True, error=UsageError, what="a matrix"
    )
    # TOML's top level is always a table
    top = Table(cast("dict[str, Any]", document), str(path), UsageError, toml=True)
    for key in top.unknown(("schema_version", "matrix")):  # a table or a key, said so
        raise top.fail(None, f"unknown table or key {key!r}", hint="known: matrix, schema_version")
    matrix = decode(top, MatrixFile).matrix  # types, unknown keys: msgspec (facts/typed.py)
    if matrix is None:
        raise top.fail(None, "no [matrix] table")
    table = top.table("matrix")
    axes: dict[str, tuple[str, ...]] = {"recipes": ()}  # none: --recipe, else refused at plan
    for key in _FILE_AXES:
        value: Axis | None = getattr(matrix, key)
        if value is not None:
            axes[key] = (value,) if isinstance(value, str) else value
    exclusions: list[Exclusion] = []
    for item in table.tables("exclude"):
        if item.unknown(AXES) or not item.data:
            raise item.fail(None, f"keys must be among {', '.join(AXES)}")
        exclusions.append(Exclusion({k: str(v) for k, v in item.data.items()}))
    return MatrixSpec(exclude=tuple(exclusions), **axes)


# -- planning -------------------------------------------------------------------------------------


def cell_key(cell: Cell, recipe: RecipeSummary) -> str:
    """sha256 of everything known before the build that decides the cell's wheel."""
    inputs = {
        "recipe": recipe.name,
        "recipe_sha256": recipe.sha256,
        "source_digest": recipe.source_digest,
        "torch": cell.torch,
        "python": cell.python,
        "arch": cell.arch,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def _axes(
    spec: MatrixSpec, facts: RecipeSummary
) -> tuple[tuple[str | None, ...], tuple[str, ...], tuple[str, ...]]:
    """The torch, Python and arch values one recipe's cells take."""
    torches: tuple[str | None, ...] = (
        (spec.torch or (facts.torch,)) if facts.torch is not None else (None,)
    )
    return torches, spec.python or facts.python_versions[:1], spec.arch or (facts.default_arch,)


def _cells(spec: MatrixSpec, recipes: Mapping[str, RecipeSummary]) -> Iterable[tuple[Cell, str]]:
    for name in spec.recipes:
        facts = recipes[name]
        torches, pythons, archs = _axes(spec, facts)
        torch_cells = _torch_cells(torches, facts, axis_given=bool(spec.torch))
        for (torch, serves), python, arch in product(torch_cells, pythons, archs):
            reason = ""
            if python not in facts.python_versions:
                reason = (
                    f"recipe {name} does not list Python {python} "
                    f"(it lists {', '.join(facts.python_versions)})"
                )
            yield Cell(name, torch, python, str(ArchList.parse(arch)), serves), reason


def _torch_cells(
    torches: Sequence[str | None], facts: RecipeSummary, *, axis_given: bool
) -> list[tuple[str | None, tuple[str, ...]]]:
    """The torch of each cell and the releases it serves: the axis's values that the recipe's
    ``loads_with`` (or its own torch) names become one cell built against its own torch; the
    others a cell each, as without ``loads_with``. Without a torch axis the range cell serves
    every release of ``loads_with``."""
    if not facts.loads_with or facts.torch is None:
        return [(t, ()) for t in torches]
    own = Version(facts.torch)
    claimable = {Version(v) for v in facts.loads_with} | {own}
    given = {Version(t) for t in torches if t is not None}
    inside = sorted((given & claimable) if axis_given else claimable)
    cells: list[tuple[str | None, tuple[str, ...]]] = []
    if inside:
        cells.append((facts.torch, tuple(str(v) for v in inside)))
    cells.extend((t, ()) for t in torches if t is None or Version(t) not in claimable)
    return cells


def make_plan(
    spec: MatrixSpec,
    recipes: Mapping[str, RecipeSummary],
    index: Sequence[IndexEntry],
    *,
    variants: bool = False,
    default_arch: str | None = None,
) -> MatrixPlan:
    """Every cell with its key and action; a cell whose key the index holds is skipped.
    With ``variants`` cells that differ only in their arch list become variants of one version
    (docs/variants.md): only the cells of ``default_arch`` (published plain) must not share a
    file name."""
    if not spec.recipes:
        raise UsageError("the matrix names no recipe", hint="matrix.recipes or --recipe NAME")
    missing = [r for r in spec.recipes if r not in recipes]
    if missing:
        raise UsageError(f"unknown recipe {missing[0]!r}")
    spanned = 0
    for name in spec.recipes:
        torches, pythons, archs = _axes(spec, recipes[name])
        spanned += len(torches) * len(pythons) * len(archs)
    if spanned > MAX_MATRIX_CELLS:
        raise UsageError(
            f"the matrix spans {spanned} cells, above the limit of {MAX_MATRIX_CELLS}",
            hint="split it into several matrices (each with its own --index), or narrow an axis",
        )
    if len(spec.exclude) > MAX_MATRIX_EXCLUSIONS:
        # Each cell is matched against each exclusion: 10000 cells x the 30000 exclusions a
        # 1 MiB file holds would be minutes of planning.
        raise UsageError(
            f"the matrix has {len(spec.exclude)} exclusions, above the limit of "
            f"{MAX_MATRIX_EXCLUSIONS}",
            hint="narrow an axis instead, or split the matrix",
        )
    published: dict[str, list[str]] = {}
    for entry in index:
        if entry.cell_key:
            published.setdefault(entry.cell_key, []).append(entry.file)
    planned: list[PlannedCell] = []
    seen: set[str] = set()
    for cell, unbuildable in _cells(spec, recipes):
        key = cell_key(cell, recipes[cell.recipe])
        if key in seen:
            continue  # the same cell spelled twice (e.g. "9.0" and "sm_90")
        seen.add(key)
        base = recipes[cell.recipe].bases.get(cell.python)
        excluded = next((e for e in spec.exclude if e.matches(cell)), None)
        if excluded is not None:
            planned.append(
                PlannedCell(cell, key, Action.EXCLUDED, f"excluded by {excluded}", base=base)
            )
        elif unbuildable:
            planned.append(PlannedCell(cell, key, Action.EXCLUDED, unbuildable))
        elif key in published:
            planned.append(
                PlannedCell(
                    cell,
                    key,
                    Action.SKIP,
                    "in the index with the same inputs",
                    tuple(sorted(published[key])),
                    base=base,
                )
            )
        else:
            planned.append(PlannedCell(cell, key, Action.BUILD, base=base))
    if variants:
        default = str(ArchList.parse(default_arch)) if default_arch else None
        _refuse_one_file_name([p for p in planned if p.cell.arch == default], recipes)
    else:
        _refuse_one_file_name(planned, recipes)
    return MatrixPlan(tuple(planned), dict(recipes))


def _refuse_one_file_name(
    planned: Sequence[PlannedCell], recipes: Mapping[str, RecipeSummary]
) -> None:
    """Two cells that would publish the same wheel file name into one index: refused.

    A wheel's name carries the recipe's version, its local label (the torch it was built
    against) and its Python tag, not its arch list; a published name never gets other bytes,
    and pip could not choose between two wheels that differ only in their device code. So each
    arch list of a recipe goes into an index of its own (as PyTorch keeps one index per CUDA)."""
    seen: dict[tuple[str, str | None, str], PlannedCell] = {}
    for item in planned:
        if item.action is Action.EXCLUDED:
            continue
        cell = item.cell
        facts = recipes[cell.recipe]
        name = (cell.recipe, cell.torch if facts.torch_in_name else None, cell.python)
        other = seen.setdefault(name, item)
        if other is item:
            continue
        axes = [a for a in ("torch", "arch") if getattr(other.cell, a) != getattr(cell, a)]
        what = " and ".join("arch list" if a == "arch" else a for a in axes)
        raise UsageError(
            f"cells {other.cell.label} and {cell.label} differ only in their {what} and would "
            "publish the same wheel file name into one index",
            hint="build each arch list into an index of its own (one matrix per --arch, each "
            "with its own --index), or exclude one of the cells",
        )
