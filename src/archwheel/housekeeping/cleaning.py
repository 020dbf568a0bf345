"""``archwheel clean`` as one call: find what dead runs left, remove it (unless a dry run), and
say what was found and done.

An index's unfinished publishes are the matrix's (``matrix.layout``), a floor above this one:
the caller hands its reader in (``unfinished_trees``, ``matrix.unfinished_publishes``), so that
this floor knows no index layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from archwheel.effects.engine import ContainerEngine, EngineSettings
from archwheel.effects.settings import Settings
from archwheel.errors import ToolError
from archwheel.housekeeping.leftovers import Leftover, find_leftovers, remove_leftovers
from archwheel.verdicts.document import document_header

CLEAN_SCHEMA_VERSION = 1


class UnfinishedTrees(Protocol):
    """The trees of ``index`` that publishes killed before their swap left (relative to it),
    removed when ``remove``; a ``UsageError`` for an index whose layout is not archwheel's."""

    def __call__(self, index: Path, *, remove: bool) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class CleanRequest:
    """What to clean: the engine's containers (``engine`` None: docker when it answers, skipped
    with a note when it does not; "none": no containers), the temporary folders under each of
    ``temp_roots`` (None: the system's), and each index's unfinished publishes."""

    engine: str | None = None
    temp_roots: tuple[Path | None, ...] = (None,)
    indexes: tuple[Path, ...] = ()
    dry_run: bool = False
    settings: Settings = field(default_factory=Settings)
    # volume -> what it was: volumes archwheel no longer writes, named in a note with the
    # command that frees them where they still exist (clean never removes a volume itself:
    # a volume holds no leftover of a run)
    retired_volumes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CleanReport:
    """What ``clean`` found and did: containers and folders, each index's unfinished trees."""

    leftovers: tuple[Leftover, ...]
    index_trees: Mapping[str, tuple[str, ...]]
    dry_run: bool
    notes: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        """0 when everything found was removed (or nothing was to be: a dry run), else 1."""
        if self.dry_run:
            return 0
        return 1 if any(not item.removed for item in self.leftovers) else 0

    def to_json_dict(self) -> dict[str, object]:
        """The ``clean`` JSON document."""
        return {
            **document_header(CLEAN_SCHEMA_VERSION, "clean"),
            "dry_run": self.dry_run,
            "leftovers": [item.to_json_dict() for item in self.leftovers],
            "index_trees": {index: list(trees) for index, trees in self.index_trees.items()},
            "notes": list(self.notes),
            "exit_code": self.exit_code,
        }


class VolumeLookup(Protocol):
    """What ``retired_volume_notes`` asks of an engine (``effects.ContainerEngine``)."""

    @property
    def name(self) -> str:
        """``docker`` or ``podman``, for the command the note gives."""
        ...

    def volume_exists(self, name: str) -> bool:
        """Whether the named volume exists."""
        ...


def retired_volume_notes(engine: VolumeLookup, retired: Mapping[str, str]) -> list[str]:
    """A line for each of the ``retired`` volumes (name -> what it was) that still exists on
    ``engine``, with the command that frees it: archwheel never writes such a volume again, and
    leaves its removal to the user."""
    return [
        f"volume {name} is {what}: `{engine.name} volume rm {name}` frees it"
        for name, what in retired.items()
        if engine.volume_exists(name)
    ]


def _no_index(index: Path, *, remove: bool) -> tuple[str, ...]:
    raise ValueError(f"clean was given the index {index} and no reader of its layout")


def clean(request: CleanRequest, *, unfinished_trees: UnfinishedTrees = _no_index) -> CleanReport:
    """Find (and unless ``request.dry_run``, remove) what dead runs left. The indexes are read
    first: one whose layout is not archwheel's ends the call before anything is removed
    anywhere. An engine named in the request that does not answer is a ``ToolError``."""
    notes: list[str] = []
    engine = None
    if request.engine != "none":
        name = request.engine or "docker"
        candidate = ContainerEngine(EngineSettings.create(name, request.settings), echo=None)
        try:
            candidate.version()
            engine = candidate
        except ToolError as exc:
            if request.engine is not None:
                raise
            notes.append(f"containers not checked: {exc.message}")
    if engine is not None:
        notes.extend(retired_volume_notes(engine, request.retired_volumes))
    trees = {str(index): unfinished_trees(index, remove=False) for index in request.indexes}
    found = find_leftovers(engine, request.temp_roots)
    items = found if request.dry_run else remove_leftovers(engine, found)
    if not request.dry_run:
        trees = {str(index): unfinished_trees(index, remove=True) for index in request.indexes}
    return CleanReport(tuple(items), trees, request.dry_run, tuple(notes))
