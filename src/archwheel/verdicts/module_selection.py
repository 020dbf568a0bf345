"""Which CUDA modules a switch of the project selects, read from ``setup.py`` before any compile.

Some projects build only the extension modules named in one environment variable
(``MYEXT_OPS="scan,sort"``): each ``CUDAExtension(...)`` sits under ``if "scan" in ops:``, or a
loop over the names takes each module's sources from a dict literal (``{"scan": [...]}``). When
that is written with literals, the syntax tree (``ast``, nothing runs) says which ``.cu`` files
each module compiles, so the plan can say which ones the selection leaves out, and the gate
lets exactly those go: a deliberate selection is not a CPU fall-back. A selection built any
other way (a glob, a computed list) is not read: the gate then judges every ``.cu`` file.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import PurePosixPath

_SPLIT = re.compile(r"[,;\s]+")
SHOWN = 6


@dataclass(frozen=True)
class ModuleSelection:
    """A switch that names the modules to build, each module's CUDA sources, and the value the
    build will see (the recipe's, else the project's default; None: unset, no default)."""

    switch: str
    where: str  # "setup.py:11"
    modules: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # name -> .cu files
    value: str | None = None
    from_recipe: bool = False
    how: str = ""  # a selection by one switch per module (builder_selection): how it was read

    @property
    def selected(self) -> tuple[str, ...]:
        """The module names the value selects, in the project's spelling."""
        return tuple(n for n in _SPLIT.split(self.value or "") if n)

    def built(self) -> tuple[str, ...]:
        """The CUDA sources of the selected modules."""
        return tuple(sorted({s for n in self.selected for s in self.modules.get(n, ())}))

    def left_out(self) -> tuple[str, ...]:
        """The CUDA sources only modules the value does not select compile."""
        built = set(self.built())
        return tuple(
            sorted({s for n, srcs in self.modules.items() for s in srcs if n not in self.selected}
                   - built)
        )  # fmt: skip

    def gate_note(self) -> str:
        """What the plan's gate row adds: the sources the selection leaves out are let go."""
        left = self.left_out()
        return f" (the {len(left)} {self.switch} leaves out let go)" if left else ""

    def row(self) -> tuple[str, str]:
        """The plan's ``module selection`` row."""
        value = (
            f"the recipe sets it to {self.value!r}"
            if self.from_recipe
            else f"unset: the project's default {self.value!r}"
            if self.value
            else "unset: no module selected"
        )
        text = (
            f"{self.switch} ({self.where}) selects the modules to build "
            f"({', '.join(self.modules)}); {value}"
        )
        if self.how:
            text = (
                f"{self.how} select the modules to build ({_listed(list(self.modules))}): "
                f"{', '.join(self.selected) or 'none'}"
            )
        unknown = [n for n in self.selected if n not in self.modules]
        if unknown:
            text += f"; not a module of setup.py: {', '.join(unknown)}"
        left = self.left_out()
        if left:
            text += (
                f"; not built, on purpose: {_listed(left)} ({len(left)} CUDA sources; the gate "
                f"lets them go, as [gate] unbuilt_cuda = {_toml(left)} would)"
            )
        return ("module selection", text)


def _listed(items: Sequence[str]) -> str:
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def _toml(items: Sequence[str]) -> str:
    return "[" + ", ".join(f'"{item}"' for item in items) + "]"


def _strings(node: ast.AST) -> list[str]:
    return [
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def _is_extension(call: ast.AST) -> bool:
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return isinstance(name, str) and name.endswith("Extension")


def _cuda(strings: Iterable[str], folder: str) -> tuple[str, ...]:
    prefix = f"{folder}/" if folder not in ("", ".") else ""
    return tuple(sorted({prefix + s.removeprefix("./") for s in strings if s.endswith(".cu")}))


def _tested_names(test: ast.AST, variable: str) -> list[str]:
    """The string constants ``test`` checks membership of in ``variable`` (``"x" in ops``)."""
    found = []
    for node in ast.walk(test):
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Constant)
            and isinstance(node.left.value, str)
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.In)
            and isinstance(node.comparators[0], ast.Name)
            and node.comparators[0].id == variable
        ):
            found.append(node.left.value)
    return found


def _default(value: ast.AST) -> str | None:
    """The default of the env read in ``value`` (``os.environ.get(X, "a,b")``), if literal."""
    for node in ast.walk(value):
        if isinstance(node, ast.Call) and len(node.args) == 2:
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("get", "getenv"):
                default = node.args[1]
                if isinstance(default, ast.Constant) and isinstance(default.value, str):
                    return default.value
    return None


def read_selection(
    path: str,
    text: str,
    switches: Iterable[tuple[str, str]],
    recipe_env: Mapping[str, str],
) -> ModuleSelection | None:
    """The module selection of one ``setup.py`` (``switches``: (name, "setup.py:N") of the env
    reads found there), or None when no switch selects modules in a way written with literals."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    folder = str(PurePosixPath(path).parent)
    assigned: dict[int, tuple[str, ast.AST]] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            assigned[node.lineno] = (node.targets[0].id, node.value)
    dicts = {target: value for target, value in assigned.values() if isinstance(value, ast.Dict)}
    for name, where in switches:
        if not where.startswith(f"{path}:"):
            continue
        found = assigned.get(int(where.rsplit(":", 1)[1]))
        if found is None:
            continue
        variable, value = found
        modules = _if_modules(tree, variable, folder) or _loop_modules(
            tree, variable, dicts, folder
        )
        if modules:
            given = recipe_env.get(name)
            return ModuleSelection(
                name,
                where,
                modules,
                given if given is not None else _default(value),
                from_recipe=given is not None,
            )
    return None


def _if_modules(tree: ast.AST, variable: str, folder: str) -> dict[str, tuple[str, ...]]:
    modules: dict[str, tuple[str, ...]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        names = _tested_names(node.test, variable)
        calls = [c for stmt in node.body for c in ast.walk(stmt) if _is_extension(c)]
        if len(names) == 1 and calls:
            modules[names[0]] = _cuda((s for c in calls for s in _strings(c)), folder)
    return modules


def _loop_modules(
    tree: ast.AST, variable: str, dicts: Mapping[str, ast.Dict], folder: str
) -> dict[str, tuple[str, ...]]:
    """``for op in ops: ...Extension(..., SOURCES[op])`` with ``SOURCES`` a dict literal."""
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.For)
            and isinstance(node.iter, ast.Name)
            and node.iter.id == variable
            and isinstance(node.target, ast.Name)
        ):
            continue
        loop = node.target.id
        for sub in ast.walk(node):
            if (
                isinstance(sub, ast.Subscript)
                and isinstance(sub.value, ast.Name)
                and sub.value.id in dicts
                and isinstance(sub.slice, ast.Name)
                and sub.slice.id == loop
            ):
                table = dicts[sub.value.id]
                return {
                    key.value: _cuda(_strings(value), folder)
                    for key, value in zip(table.keys, table.values, strict=True)
                    if isinstance(key, ast.Constant) and isinstance(key.value, str)
                }
    return {}


def proposed_unbuilt(missing: Sequence[str], built: Iterable[str]) -> tuple[str, ...]:
    """What ``[gate] unbuilt_cuda`` could say for ``missing``: ``folder/*.cu`` where that glob
    covers no file of ``built`` (the sources the build compiles), else the files themselves;
    so a proposal never lets go of a source the build compiles."""
    compiled = list(built)
    proposal: list[str] = []
    for folder in sorted({str(PurePosixPath(m).parent) for m in missing}):
        pattern = f"{folder}/*.cu" if folder != "." else "*.cu"
        if any(fnmatchcase(b, pattern) for b in compiled):
            proposal += [m for m in missing if str(PurePosixPath(m).parent) == folder]
        else:
            proposal.append(pattern)
    return tuple(proposal)
