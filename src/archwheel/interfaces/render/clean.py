"""``archwheel clean``'s output: one line per leftover (text) or one JSON document."""

from __future__ import annotations

from archwheel.housekeeping import CleanReport
from archwheel.interfaces.render.common import dump_json
from archwheel.text import literal as safe


def print_clean(report: CleanReport, fmt: str) -> None:
    """The report as text lines on standard output, or (``fmt`` json) as its document."""
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
