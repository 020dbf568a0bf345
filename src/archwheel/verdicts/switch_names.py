"""Where a build file's switch name comes from when it is not a literal at the read.

``os.environ.get(ENV_NAME)`` reads a switch whose name is a constant of the project: defined in
the same file (``ENV_NAME = "MYEXT_OPS"``), imported from another module of the project
(``from .config import ENV_NAME``, ``from myext.build_config import ENV_NAME as OPS``) or read
through one (``import config; config.ENV_NAME``). This module follows such a name to the
string it is bound to, one import deep (or, ``config_names``, into a TOML/JSON/INI file of the
project whose key holds it), through a ``read`` callback that gives a project
file's text by its relative path (None: no such file), so it stays pure. A name bound to
anything but a string literal is not followed: the build computes it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from archwheel.verdicts.config_names import config_constants

ReadFile = Callable[[str], str | None]

_CONSTANT = re.compile(
    r"^([A-Za-z_]\w*)\s*(?::[^=\n]+)?=\s*[rbuRBU]?['\"]([A-Za-z_]\w{0,99})['\"]\s*(?:#.*)?$",
    re.MULTILINE,
)
_FROM_IMPORT = re.compile(r"^\s*from\s+(\.*)([\w.]*)\s+import\s+\(?([^)\n#]+)\)?", re.MULTILINE)
_IMPORT = re.compile(r"^\s*import\s+([\w.]+)(?:\s+as\s+(\w+))?\s*$", re.MULTILINE)
SOURCE_ROOTS = ("", "src/")  # where an absolute import of the project is looked for


@dataclass(frozen=True)
class BoundName:
    """A switch name found through a constant: the variable's name and where it is defined."""

    value: str
    defined: str  # "myext/config.py:3"


def constants(path: str, text: str) -> dict[str, BoundName]:
    """The module-level ``NAME = "VALUE"`` bindings of one file (the first of each name)."""
    found: dict[str, BoundName] = {}
    for match in _CONSTANT.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        found.setdefault(match.group(1), BoundName(match.group(2), f"{path}:{line}"))
    return found


def _module_files(path: str, dots: str, module: str) -> list[str]:
    """The project files ``module`` may be, imported from ``path`` (``dots``: relative)."""
    parts = [p for p in module.split(".") if p]
    if dots:
        base = PurePosixPath(path).parent
        for _ in range(len(dots) - 1):
            base = base.parent
        stems = [str(base.joinpath(*parts)) if parts else str(base)]
    else:
        folder = str(PurePosixPath(path).parent)
        prefixes = [*SOURCE_ROOTS, *([folder + "/"] if folder not in ("", ".") else [])]
        stems = [prefix + "/".join(parts) for prefix in prefixes if parts]
    files = []
    for stem in (s.removeprefix("./") for s in stems):
        files += [f"{stem}.py", f"{stem}/__init__.py"]
    return files


def _read_module(path: str, dots: str, module: str, read: ReadFile) -> tuple[str, str] | None:
    for candidate in _module_files(path, dots, module):
        text = read(candidate)
        if text is not None:
            return candidate, text
    return None


class NameResolver:
    """Follows the switch names of one build file to the strings they are bound to."""

    def __init__(self, path: str, text: str, read: ReadFile) -> None:
        self._path = path
        self._local = constants(path, text)
        self._text = text
        self._config: dict[str, BoundName] | None = None  # read at the first name not local
        self._read = read
        # name -> (dots, module, name there); alias -> (dots, module)
        self._from: dict[str, tuple[str, str, str]] = {}
        self._modules: dict[str, tuple[str, str]] = {}
        for match in _FROM_IMPORT.finditer(text):
            dots, module = match.group(1), match.group(2)
            for item in match.group(3).split(","):
                name, _, alias = item.strip().partition(" as ")
                if name.strip().isidentifier():
                    self._from[(alias or name).strip()] = (dots, module, name.strip())
        for match in _IMPORT.finditer(text):
            module = match.group(1)
            self._modules[match.group(2) or module] = ("", module)

    def resolve(self, expression: str) -> BoundName | None:
        """The string ``expression`` (``NAME`` or ``module.NAME``) is bound to, or None."""
        if "." not in expression:
            if expression in self._local:
                return self._local[expression]
            if self._config is None:
                self._config = {
                    name: BoundName(value, where)
                    for name, (value, where) in config_constants(
                        self._path, self._text, self._read
                    ).items()
                }
            if expression in self._config:
                return self._config[expression]
            imported = self._from.get(expression)
            if imported is None:
                return None
            dots, module, name = imported
            found = self._constant_of(dots, module, name)
            if found is None:  # `from . import config` then config.NAME is handled below
                return None
            return found
        owner, _, name = expression.rpartition(".")
        if owner in self._modules:
            return self._constant_of(*self._modules[owner], name)
        if owner in self._from:  # from . import config; config.NAME
            dots, module, sub = self._from[owner]
            return self._constant_of(dots, f"{module}.{sub}" if module else sub, name)
        return None

    def _constant_of(self, dots: str, module: str, name: str) -> BoundName | None:
        found = _read_module(self._path, dots, module, self._read)
        if found is None:
            return None
        file, text = found
        return constants(file, text).get(name)
