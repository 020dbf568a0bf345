"""``archwheel clean``'s output: one line per leftover (text) or one JSON document."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from archwheel.housekeeping import Leftover
from archwheel.interfaces.render.common import dump_json
from archwheel.text import literal as safe
from archwheel.verdicts.document import document_header

CLEAN_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class CleanReport:
    """What ``clean`` found and did: containers and folders, each index's unfinished trees."""

    leftovers: tuple[Leftover, ...]
    index_trees: Mapping[str, tuple[str, ...]]
    dry_run: bool
    notes: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        if self.dry_run:
            return 0
        return 1 if any(not item.removed for item in self.leftovers) else 0

    def to_json_dict(self) -> dict[str, object]:
        return {
            **document_header(CLEAN_SCHEMA_VERSION, "clean"),
            "dry_run": self.dry_run,
            "leftovers": [item.to_json_dict() for item in self.leftovers],
            "index_trees": {index: list(trees) for index, trees in self.index_trees.items()},
            "notes": list(self.notes),
            "exit_code": self.exit_code,
        }


def print_clean(report: CleanReport, fmt: str) -> None:
    if fmt == "json":
        dump_json(report.to_json_dict())
        return
    for note in report.notes:
        print(f"note: {safe(note)}")
    for item in report.leftovers:
        if report.dry_run:
            verb = "would remove"
        else:
            verb = "removed" if item.removed else "could not remove"
        owner = f" (left by {safe(item.owner)})" if item.owner else ""
        print(f"{verb} {item.kind} {safe(item.name)}{owner}")
    for index, trees in report.index_trees.items():
        verb = "would remove" if report.dry_run else "removed"
        for tree in trees:
            print(f"{verb} {safe(index)}/{safe(tree)} (a publish that did not finish)")
    if not report.leftovers and not any(report.index_trees.values()):
        print("nothing to clean: no run that ended left anything archwheel can prove it made")
