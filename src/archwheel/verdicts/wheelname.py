"""Whether a wheel's METADATA says the name and version its file name says.

pip finds a wheel on an index by its file name, then reads its METADATA and refuses one whose
``Name`` or ``Version`` is another ("inconsistent name/version": to the user, "No matching
distribution"). Such a wheel must not reach an index (``publish`` refuses it) nor a manifest,
and an audit says so (an error: exit 3). Names are compared canonically and versions as PEP 440
versions, as pip compares them.
"""

from __future__ import annotations

import re

from archwheel.binary.variantname import split_label
from archwheel.text import literal

_SHOWN = 80  # characters of a METADATA value quoted in a message


def _quoted(text: str) -> str:
    return repr(literal(text, _SHOWN))


def name_version_disagreement(filename: str, name: str, version: str) -> str | None:
    """What a wheel's METADATA ``name`` and ``version`` say against its file name
    ``filename``'s, naming both values; None when they agree (or the file name is not a
    wheel's: refused elsewhere)."""
    if _same_as_written(filename, name, version):
        return None  # what packaging would say too, without importing it (every audit asks)
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
    from packaging.version import InvalidVersion, Version

    try:
        file_project, file_version, _build, _tags = parse_wheel_filename(split_label(filename)[0])
    except InvalidWheelFilename:
        return None
    found = []
    if canonicalize_name(name) != canonicalize_name(file_project):
        written = filename.split("-", 1)[0]  # as the file name writes it
        found.append(f"METADATA Name {_quoted(name)} is not the file name's {_quoted(written)}")
    try:
        same = Version(version) == file_version
    except InvalidVersion:
        same = False
    if not same:
        found.append(
            f"METADATA Version {_quoted(version)} is not the file name's "
            f"{_quoted(str(file_version))}"
        )
    if not found:
        return None
    return "; ".join(found) + ": pip cannot install it from an index"


def _same_as_written(filename: str, name: str, version: str) -> bool:
    """Whether the file name writes ``name`` (compared canonically: runs of ``-_.`` as one
    ``-``, lower case) and ``version`` exactly, the common case. Then the full comparison
    agrees: the same name canonically, and the same string is the same version (or the file
    name is not a valid wheel's, which says nothing either)."""
    parts = filename.removesuffix(".whl").split("-")
    if not filename.endswith(".whl") or len(parts) not in (5, 6):
        return False
    return parts[1] == version and _canonical(parts[0]) == _canonical(name)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


HINT = "rebuild the wheel, or give it the file name its METADATA says"
