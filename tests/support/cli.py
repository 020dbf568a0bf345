"""The type of the ``cli_run`` fixture (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable

# ``cli_run(*argv)`` runs ``archwheel.interfaces.cli.main`` in-process: (code, stdout, stderr).
CliRun = Callable[..., tuple[int, str, str]]
