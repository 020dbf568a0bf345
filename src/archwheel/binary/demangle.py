"""C++ symbol names made readable: ``_ZN5torch8autograd13_wrap_outputs...`` ->
``torch::autograd::_wrap_outputs(...)``, through binutils' ``c++filt`` (one call for all names).

Where ``c++filt`` is missing or misbehaves the names stay mangled: a demangled name is an aid
to the reader, never needed for a verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

from archwheel.effects.process import run_program
from archwheel.errors import ToolError


def demangle(names: Sequence[str]) -> dict[str, str]:
    """Mangled -> demangled through c++filt; empty where it is missing or fails."""
    if not names:
        return {}
    try:
        result = run_program(
            ["c++filt"], input_bytes="\n".join(names).encode(), echo=None, check=False, timeout=60
        )
    except ToolError:
        return {}
    lines = result.stdout.splitlines()
    if result.returncode != 0 or len(lines) != len(names):
        return {}
    return dict(zip(names, lines, strict=True))
