"""A wheel's ``.dist-info/variant.json`` (PEP 825 draft), read from the archive or from an
installed distribution's files, so that its claims can be judged against the device code.

Whoever wrote it (archwheel's ``publish --variants``, another tool, a hand), the file is
untrusted input: it is read with a size bound and parsed by the one bounded JSON loader; a file
that cannot be read or parsed is a ``VariantFile`` with a one-line ``problem``, never an
exception. Only a ``variant.json`` directly in a top-level ``*.dist-info`` folder counts (one
found deeper belongs to a vendored package, not to this wheel).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from archwheel.binary.model import VariantFile
from archwheel.binary.zipmember import MemberError
from archwheel.binary.zipread import WheelReader
from archwheel.effects.files import ZIP_MEMBER_ERRORS, FileTooLarge, read_regular
from archwheel.errors import ArchwheelError
from archwheel.facts.documents import DocumentUnreadable, parse_document

VARIANT_MEMBER = ".dist-info/variant.json"
MAX_VARIANT_JSON_BYTES = 1 << 20  # archwheel writes about 400 bytes; a variants index ~ 10 KB
MAX_VARIANT_JSON_NESTING = 16  # it nests 4 deep (variants, label, namespace, feature)
_UNREAD: tuple[type[Exception], ...] = (MemberError, ArchwheelError, *ZIP_MEMBER_ERRORS)


def _is_variant_member(name: str) -> bool:
    return name.count("/") == 1 and name.endswith(VARIANT_MEMBER)


def _parsed(where: str, data: bytes) -> VariantFile:
    if len(data) > MAX_VARIANT_JSON_BYTES:
        return VariantFile(where, problem=f"larger than {MAX_VARIANT_JSON_BYTES} bytes")
    try:
        return VariantFile(where, parse_document(data, MAX_VARIANT_JSON_NESTING))
    except DocumentUnreadable as exc:
        return VariantFile(where, problem=str(exc))


def wheel_variant_json(reader: WheelReader) -> VariantFile | None:
    """The wheel's ``*.dist-info/variant.json`` (None: it has none). Several such members are a
    problem (an installer could read either)."""
    found = [m for m in reader.members if _is_variant_member(m.name)]
    if not found:
        return None
    if len(found) > 1:
        names = ", ".join(m.name for m in found[:3])
        return VariantFile(found[0].name, problem=f"{len(found)} variant.json members: {names}")
    member = found[0]
    if member.size > MAX_VARIANT_JSON_BYTES:
        return VariantFile(member.name, problem=f"larger than {MAX_VARIANT_JSON_BYTES} bytes")
    try:
        data = b"".join(reader.chunks(member))
    except _UNREAD as exc:
        return VariantFile(member.name, problem=f"cannot be read: {' '.join(str(exc).split())}")
    return _parsed(member.name, data)


def installed_variant_json(files: Sequence[Path]) -> VariantFile | None:
    """The ``variant.json`` of an installed distribution's ``.dist-info`` folder, among the
    files its RECORD lists (None: it lists none)."""
    found = [f for f in files if f.name == "variant.json" and f.parent.name.endswith(".dist-info")]
    if not found:
        return None
    where = str(found[0])
    try:
        data = read_regular(found[0], MAX_VARIANT_JSON_BYTES)
    except FileTooLarge:
        return VariantFile(where, problem=f"larger than {MAX_VARIANT_JSON_BYTES} bytes")
    except OSError as exc:
        return VariantFile(where, problem=f"cannot be read: {exc.strerror or exc}")
    return _parsed(where, data)
