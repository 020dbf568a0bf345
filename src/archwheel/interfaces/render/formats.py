"""The output formats of the commands: the one piece of rendering a parser needs.

Apart from ``common`` (which imports rich and the facts) so that the command line can define
its options without importing either (its start is measured: ``nox -s bench -- cli``);
``common`` re-exports it.
"""

from __future__ import annotations

# The --format choices every command with a table offers (audit adds html).
FORMATS = ("table", "json", "markdown")
