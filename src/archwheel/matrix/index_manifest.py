"""The manifest of an index tree (``index.json``): every entry, and what the publish that made
the tree did.

``publish`` says which wheels that publish added and which it kept from the tree before
(hard-linked, their bytes and provenance untouched): after a matrix grows an axis, the index
itself records which cells were built and which were reused, beside each entry's own
``published_at`` and cell key. Readers of a manifest read ``entries`` (``index.read_index``);
``publish`` is a record for people and tools, never trusted for anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archwheel.matrix.index_doc import INDEX_SCHEMA_VERSION

if TYPE_CHECKING:
    from archwheel.matrix.entry import IndexEntry


def manifest_document(
    entries: Sequence[IndexEntry], added: Sequence[IndexEntry], previous: Path | None
) -> dict[str, Any]:
    """The manifest of a tree holding ``entries``, of which this publish added ``added`` (the
    rest kept from the tree ``previous``, None for the first)."""
    fresh = {e.file for e in added}
    return {
        "schema_version": INDEX_SCHEMA_VERSION,
        "entries": [e.to_json_dict() for e in sorted(entries, key=lambda e: e.file)],
        "publish": {
            "at": max((e.published_at for e in added), default=""),
            "from_tree": previous.name if previous is not None else None,
            "added": sorted(fresh),
            "kept": sorted(e.file for e in entries if e.file not in fresh),
        },
    }
