"""The envelope every JSON document of archwheel opens with, written in one place.

``schema_version`` (of that document's schema in ``interfaces/schema/``), ``kind`` where the
document names its kind, ``tool`` (``{"name": "archwheel", "version": ...}``) and, for the
documents judged against the facts file, ``facts_version``: in that order, before the fields of
the document itself (``{**document_header(...), "gpus": ...}``).
"""

from __future__ import annotations

from typing import Any

from archwheel._version import __version__


def document_header(
    schema_version: int, kind: str | None = None, *, facts_version: str | None = None
) -> dict[str, Any]:
    """The opening fields of a JSON document (``kind`` and ``facts_version`` where given)."""
    header: dict[str, Any] = {"schema_version": schema_version}
    if kind is not None:
        header["kind"] = kind
    header["tool"] = {"name": "archwheel", "version": __version__}
    if facts_version is not None:
        header["facts_version"] = facts_version
    return header
