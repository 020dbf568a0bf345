"""The output formats of the commands, and the JSON writer: what a parser and a JSON answer need.

Apart from ``common`` (which imports rich and the facts) so that the command line can define
its options, and write JSON, without importing either (its start is measured: ``nox -s bench
-- cli``, and so is ``archwheel audit --format json``); ``common`` re-exports both.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

# The --format choices every command with a table offers (audit adds html).
FORMATS = ("table", "json", "markdown")


def dump_json(document: Any, stream: TextIO | None = None) -> None:
    """``document`` as indented JSON, with a final newline, on ``stream`` (default stdout)."""
    out = stream or sys.stdout
    json.dump(document, out, indent=2, sort_keys=False)
    out.write("\n")
