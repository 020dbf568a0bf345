"""The variant label of a wheel file name (PEP 825 draft): ``name-1.0-py3-none-any-sm80.whl``.

A variant wheel's name carries a label after its platform tag, ``[0-9a-z_.]`` only. Installers
without variant support (pip, packaging) take such a name for an invalid one; archwheel reads
it by taking the label off and parsing what remains as a wheel name. A name of six components
is a plain wheel with a build tag when its third component starts with a digit (a build tag
must; a Python tag never does), else a variant wheel.
"""

from __future__ import annotations

import re

_LABEL = re.compile(r"[0-9a-z_.]+")


def split_label(file: str) -> tuple[str, str | None]:
    """``(plain file name, label)`` of a wheel file name; ``(file, None)`` for a plain one."""
    if not file.endswith(".whl"):
        return file, None
    parts = file[: -len(".whl")].split("-")
    variant = len(parts) == 7 or (len(parts) == 6 and not parts[2][:1].isdigit())
    if not variant or not _LABEL.fullmatch(parts[-1]):
        return file, None
    return "-".join(parts[:-1]) + ".whl", parts[-1]


def with_label(file: str, label: str) -> str:
    """The variant file name of a plain wheel file name: the label as its last component."""
    return f"{file[: -len('.whl')]}-{label}.whl"
