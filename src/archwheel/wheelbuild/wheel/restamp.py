"""A stripped library's build-id, made the id of the bytes it ships (binary/build_id.py says
why): the repair step calls ``restamp_build_id`` on each library it stripped of debug
information, so that two builds whose stripped libraries are equal ship equal files, wherever
their objects were compiled (a compile farm's server or this machine)."""

from __future__ import annotations

from pathlib import Path

from archwheel.binary.build_id import build_id_span, content_id


def restamp_build_id(path: Path) -> bool:
    """Replace the GNU build-id of the ELF file at ``path``, in place, by the id of its own
    content (``content_id``); False when it has none (nothing is written)."""
    span = build_id_span(path)
    if span is None:
        return False
    with path.open("r+b") as f:
        stamp = content_id(f, span)
        f.seek(span[0])
        f.write(stamp)
    return True
