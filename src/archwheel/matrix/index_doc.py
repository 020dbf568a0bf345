"""The head of an index manifest (``INDEX/trees/<id>/index.json``) as a typed msgspec Struct.

An index folder is input too (restored from a CI cache, shared on a volume): before any entry
of its manifest is believed, its version and the type of its entry list are checked here, in
the one message shape of every document (``facts/typed.py``). Each entry is then read by
``IndexEntry.from_json_dict``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from archwheel.errors import InputError
from archwheel.facts.documents import Table
from archwheel.facts.typed import decode, missing_or_not

INDEX_SCHEMA_VERSION = 1


class _IndexManifest(msgspec.Struct, frozen=True, kw_only=True):
    """What an index manifest must say before its entries are read (other keys are kept)."""

    schema_version: Annotated[int, Meta(ge=INDEX_SCHEMA_VERSION, le=INDEX_SCHEMA_VERSION)]
    entries: Annotated[list[Any], missing_or_not("list")]


def check_index_manifest(document: dict[str, Any], path: Path) -> None:
    """``document`` (the index manifest at ``path``) is of this archwheel's version and has a
    list of entries; else one ``InputError`` naming the file and the key (1e999, 99 and
    "banana" as its version were taken when 'entries' was empty)."""
    decode(Table(document, str(path), InputError), _IndexManifest)
