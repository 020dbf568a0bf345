"""Modules selected one switch each, through builder classes (DeepSpeed's op builders).

Some projects describe each CUDA module as a class in a package of their own, beside
``setup.py``: the switch that builds it (``BUILD_VAR = "DS_BUILD_FUSED_ADAM"``), its name
(``NAME = "fused_adam"``) and its sources (``def sources(self): return ["csrc/adam/x.cu"]``);
``setup.py`` imports the package and reads each class's ``BUILD_VAR`` with a default that is
another switch (``get_env_if_set(env_var, BUILD_OP_DEFAULT)`` with ``BUILD_OP_DEFAULT =
int(get_env_if_set('DS_BUILD_OPS', ...))``). Where those are written with literals, the syntax
tree (nothing runs) gives each module's switch and ``.cu`` files, and a value of the recipe's
selects: a module is built when its own switch, else the default switch, is an integer other
than 0, as such projects read them. Only a recipe that sets the default switch or a module's
switch is read: the project's own default is computed (per platform) and not followed, and a
module whose ``is_compatible()`` says no at build time is not known here (the gate judges it).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import PurePosixPath

from archwheel.verdicts.module_selection import ModuleSelection

ReadFile = Callable[[str], str | None]
_FROM = re.compile(r"^\s*from\s+(\w+)(?:\.[\w.]+)?\s+import\b", re.MULTILINE)
MAX_BUILDER_FILES = 100


def _literal(body: Iterable[ast.stmt], name: str) -> str | None:
    for node in body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == name
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return None


def _builders(path: str, text: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """``(NAME, BUILD_VAR, .cu sources)`` of each builder class of one file."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    found = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        switch, name = _literal(node.body, "BUILD_VAR"), _literal(node.body, "NAME")
        method = next(
            (f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "sources"), None
        )
        if switch is None or name is None or method is None:
            continue
        cuda = [
            n.value
            for n in ast.walk(method)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith(".cu")
        ]
        found.append((name, switch, tuple(cuda)))
    return found


def _place(source: str, listed: frozenset[str], by_tail: Mapping[str, list[str]]) -> str | None:
    """The project file a builder's source names: as written, else the one listed file that
    ends with it (``inference/v2/...`` is ``deepspeed/inference/v2/...``)."""
    if source in listed:
        return source
    candidates = by_tail.get(source.removeprefix("./"), [])
    return candidates[0] if len(candidates) == 1 else None


def _default_switch(tree: ast.Module, switches: Iterable[str]) -> str | None:
    """The switch whose value is the default of the per-module reads: ``N = ...('S', ...)`` at
    the top, N then given as the second argument of a call whose first is not a literal."""
    names = set(switches)
    bound: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            read = [
                n.value
                for n in ast.walk(node.value)
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names
            ]
            if isinstance(target, ast.Name) and len(read) == 1:
                bound[target.id] = read[0]
    for call in ast.walk(tree):
        if (
            isinstance(call, ast.Call)
            and len(call.args) == 2
            and isinstance(call.args[0], ast.Name)
            and isinstance(call.args[1], ast.Name)
            and call.args[1].id in bound
        ):
            return bound[call.args[1].id]
    return None


def _on(value: str | None) -> bool | None:
    """``int(value) != 0`` as such projects read a switch; None for an unset one."""
    if value is None:
        return None
    try:
        return int(value.strip()) != 0
    except ValueError:
        return None


def read_builder_selection(
    path: str,
    text: str,
    *,
    files: Sequence[str],
    read: ReadFile,
    switches: Iterable[tuple[str, str]],
    recipe_env: Mapping[str, str],
) -> ModuleSelection | None:
    """The modules ``recipe_env`` selects among the builder classes ``setup.py`` (``path``)
    reads (see the module doc); None when it reads none, or the recipe sets none of their
    switches."""
    if "BUILD_VAR" not in text:
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    folder = PurePosixPath(path).parent
    listed = frozenset(files)
    packages = {m.group(1) for m in _FROM.finditer(text)}
    candidates = [
        f
        for f in files
        if f.endswith(".py")
        and PurePosixPath(f).parent.name in packages
        and PurePosixPath(f).parent.parent == folder
    ][:MAX_BUILDER_FILES]
    by_tail: dict[str, list[str]] = {}
    for file in files:
        parts = PurePosixPath(file).parts
        for cut in range(1, len(parts)):
            by_tail.setdefault("/".join(parts[cut:]), []).append(file)
    modules: dict[str, tuple[str, ...]] = {}
    per_module: dict[str, str] = {}
    for file in sorted(candidates):
        source = read(file)
        for name, switch, cuda in _builders(file, source or ""):
            placed = tuple(p for s in cuda if (p := _place(s, listed, by_tail)) is not None)
            modules[name] = tuple(sorted(set(placed)))
            per_module[name] = switch
    if not modules:
        return None
    pairs = list(switches)
    default = _default_switch(tree, [n for n, _ in pairs])
    where = next((w for n, w in pairs if n == default), path)
    default_value = recipe_env.get(default) if default else None
    if default_value is None and not any(s in recipe_env for s in per_module.values()):
        return None
    selected = []
    for name, switch in per_module.items():
        on = _on(recipe_env.get(switch))
        if on is None:
            on = _on(default_value)
        if on:
            selected.append(name)
    label = f"{default} and each module's own switch" if default else "each module's own switch"
    given = ", ".join(
        f"{s}={recipe_env[s]}" for s in [default or "", *per_module.values()] if s in recipe_env
    )
    return ModuleSelection(
        switch=default or next(iter(per_module.values())),
        where=where,
        modules=modules,
        value=",".join(selected),
        from_recipe=True,
        how=f"{label} (BUILD_VAR of {len(modules)} builder classes); the recipe sets {given}",
    )
