"""What a recipe's ``[build.env]`` may set in the build container, against what archwheel sets.

Every variable archwheel sets itself is either refused in ``[build.env]`` or honoured, never
replaced silently. Refused when the recipe is read: ``recipe_model.RESERVED_ENV``, the arch and
jobs variables (``recipe.py``), and nvcc's ``--time`` anywhere (``sets_nvcc_time``: the
per-source gate reads archwheel's own ``--time`` record, nvcc_record.py). Refused when the plan
is made: any other recipe value the plan's environment does not keep (``refuse_replaced``,
checked on the environment the plan made, so that a variable added to plan.py without a line
in ``RESERVED_ENV`` is still refused, never replaced). Honoured: the compiler launchers, the
parallel variables (a recipe's own value wins), ``NVCC_APPEND_FLAGS`` and, for
``format = "cmake"``, ``CMAKE_ARGS`` (cmake_arch.py), to which archwheel appends its flags after
the recipe's own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from archwheel.errors import RecipeError
from archwheel.wheelbuild.recipes.recipe_model import Recipe

APPENDED = frozenset({"NVCC_APPEND_FLAGS", "CMAKE_ARGS"})
"""The variables whose recipe value archwheel keeps in front of the flags it appends."""
PREFIXED = frozenset({"PYTHONPATH"})
"""The search paths whose recipe value archwheel keeps behind the folder it puts first (the
extension spread's hook, compile/parallel.py)."""

# nvcc's --time (also -time, --time=FILE, -time=FILE) as a word of a value or of the command:
# not --timeout, --time-limit, /usr/bin/time or a variable named TIME.
_NVCC_TIME = re.compile(r"""(?:^|[\s"'=;])--?time(?:$|[\s"'=;])""")


OWN_TIME = "gives nvcc its own --time, which would move the record the per-source gate reads"
OWN_TIME_HINT = "remove it: archwheel records every nvcc compile with --time itself"


def sets_nvcc_time(text: str) -> bool:
    """Whether ``text`` (a ``[build.env]`` value or the build command) gives nvcc ``--time``,
    which would move nvcc's record away from the file archwheel's per-source gate reads."""
    return _NVCC_TIME.search(text) is not None


def _kept(name: str, own: str, value: str | None) -> bool:
    if value == own:
        return True
    if value is not None and name in PREFIXED:
        return value.endswith(":" + own)
    if value is None or name not in APPENDED:
        return False
    words = own.split()
    return value.split()[: len(words)] == words


def refuse_replaced(recipe: Recipe, env: Mapping[str, str]) -> None:
    """A ``RecipeError`` naming the first ``[build.env]`` variable of ``recipe`` that ``env``
    (the build's environment, as the plan made it) does not keep: archwheel set it itself. The
    value is not shown (a remote cache URL may hold a password)."""
    for name, own in sorted(recipe.build.env.items()):
        if not _kept(name, own, env.get(name)):
            raise RecipeError(
                f"{recipe.path}: [build] env.{name}: is set by archwheel itself for this build "
                "and cannot be overridden here",
                hint=f"remove {name} from [build.env]",
            )
