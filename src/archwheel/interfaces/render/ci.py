"""CI workflow files as YAML: a small writer for the plain documents of ``matrix/export.py``.

Mappings and sequences in block style, every string double-quoted with JSON's escapes (a valid
YAML double-quoted scalar, so no value is ever read back as a number, a boolean or null), and
keys bare where YAML reads them as the same string.
"""

from __future__ import annotations

import json
import re
from typing import Any

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*\Z")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def _key(key: str) -> str:
    if _PLAIN_KEY.match(key) and key.lower() not in _YAML_WORDS:
        return key
    return json.dumps(key)


def _scalar(value: Any) -> str:
    """A scalar, or an empty mapping or sequence, on one line."""
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if value is None:
        return "null"
    return json.dumps(str(value))


def _lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                out.append(f"{pad}{_key(str(key))}:")
                out.extend(_lines(item, indent + 2))
            else:
                out.append(f"{pad}{_key(str(key))}: {_scalar(item)}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)) and item:
                nested = _lines(item, indent + 2)
                out.append(f"{pad}- {nested[0].lstrip()}")
                out.extend(nested[1:])
            else:
                out.append(f"{pad}- {_scalar(item)}")
    else:
        out.append(pad + _scalar(value))
    return out


def to_yaml(document: dict[str, Any], *, header: str = "") -> str:
    """``document`` as YAML, ``header`` as its leading comment: the workflow ``matrix --export``
    writes."""
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return comment + "\n".join(_lines(document, 0)) + "\n"
