"""Switch names a build file takes from one of the project's config files.

Some projects keep the name of an environment switch in a config file and read it in
``setup.py``: ``ENV = tomllib.load(open("build.toml", "rb"))["env_name"]``, ``json.load``,
or ``configparser`` reading ``setup.cfg`` (``cfg.read("setup.cfg")``, then
``cfg["build"]["ops_env"]`` or ``cfg.get("build", "ops_env")``). Where every step is written
with literals at the top of the build file (the file's name, the keys), the syntax tree
(``ast``, nothing runs) says which file and which keys; the file is read through the same
``read`` callback as ``switch_names`` (a project file's text by relative path) and parsed as
TOML, JSON or INI. A value that is no identifier-like string, a file the project list does not
hold, or any step built at run time, is not followed: the build computes it.
"""

from __future__ import annotations

import ast
import configparser
import json
import re
import sys
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

ReadFile = Callable[[str], str | None]
_IDENTIFIER = re.compile(r"[A-Za-z_]\w{0,99}")
_LOADERS = {("tomllib", "load"), ("tomllib", "loads"), ("tomli", "load"), ("tomli", "loads"),
            ("toml", "load"), ("toml", "loads"), ("json", "load"), ("json", "loads")}  # fmt: skip
_PARSERS = frozenset({"ConfigParser", "RawConfigParser", "SafeConfigParser"})


class _Document:
    """A config file the build file reads: where, its parsed content (nested dicts), and
    whether it is INI (``get(section, key)`` takes two keys there, one and a default else)."""

    def __init__(self, file: str, content: Any, *, ini: bool = False) -> None:
        self.file = file
        self.content = content
        self.ini = ini


def _file_name(node: ast.AST) -> str | None:
    """The file an ``open(...)`` / ``Path(...)`` expression names: its last string literal
    (``os.path.join(HERE, "build.toml")``, ``Path(__file__).parent / "build.toml"``)."""
    names = [
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    files = [n for n in names if "." in n or "/" in n]
    return files[-1] if files else None


def _parse(file: str, text: str, *, ini: bool) -> Any:
    """The file's content as nested dicts: INI (``ini``), else TOML or JSON by its suffix; None
    when it cannot be read."""
    suffix = PurePosixPath(file).suffix
    try:
        if not ini and suffix == ".toml":
            return tomllib.loads(text)
        if not ini:
            return json.loads(text) if suffix == ".json" else None
        parser = configparser.RawConfigParser()
        parser.read_string(text, source=file)
        return {s: dict(parser.items(s)) for s in parser.sections()}
    except (ValueError, configparser.Error):
        return None


def _call_name(node: ast.AST) -> tuple[str, str] | None:
    """``("tomllib", "load")`` for ``tomllib.load(...)``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        owner = node.func.value
        if isinstance(owner, ast.Name):
            return owner.id, node.func.attr
    return None


class ConfigNames:
    """The module-level names of one build file bound to a string of a project config file."""

    def __init__(self, path: str, text: str, read: ReadFile) -> None:
        self._folder = PurePosixPath(path).parent
        self._read = read
        self._documents: dict[str, _Document] = {}
        self.found: dict[str, tuple[str, str]] = {}  # name -> (value, where it is defined)
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return
        for statement in tree.body:
            self._statement(statement, path)

    def _statement(self, node: ast.stmt, path: str) -> None:
        if isinstance(node, ast.With | ast.If | ast.Try):  # `with open(...) as f: X = load(f)`
            handles = {}
            if isinstance(node, ast.With):
                for item in node.items:
                    if isinstance(item.optional_vars, ast.Name):
                        handles[item.optional_vars.id] = item.context_expr
            for inner in node.body:
                swapped = _substituted(inner, handles) if isinstance(inner, ast.Assign) else inner
                self._statement(swapped, path)
            return
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            self._parser_read(node.value)
            return
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            return
        name = node.targets[0].id
        value = node.value
        func = value.func if isinstance(value, ast.Call) else None
        if func is not None and getattr(func, "id", getattr(func, "attr", "")) in _PARSERS:
            self._documents[name] = _Document("", None, ini=True)  # its .read("file") fills it
            return
        document = self._loaded(value)
        if document is not None:
            self._documents[name] = document
            return
        found = self._lookup(value)
        if found is not None:
            document, keys, string = found
            if _IDENTIFIER.fullmatch(string):
                keys_shown = "".join(f"[{k!r}]" for k in keys)
                where = f"{document.file}{keys_shown} via {path}:{node.lineno}"
                self.found.setdefault(name, (string, where))

    def _parser_read(self, call: ast.Call) -> None:
        """``cfg.read("setup.cfg")`` on a name bound to a ``ConfigParser()``."""
        func = call.func
        if not (
            isinstance(func, ast.Attribute)
            and func.attr == "read"
            and isinstance(func.value, ast.Name)
            and func.value.id in self._documents
            and call.args
        ):
            return
        file = _file_name(call.args[0])
        if file is not None:
            document = self._document(file, ini=True)
            if document is not None:
                self._documents[func.value.id] = document

    def _document(self, file: str, *, ini: bool = False) -> _Document | None:
        relative = str(self._folder / file).removeprefix("./")
        text = self._read(relative)
        if text is None:
            return None
        content = _parse(relative, text, ini=ini)
        return _Document(relative, content, ini=ini) if isinstance(content, dict) else None

    def _loaded(self, value: ast.AST) -> _Document | None:
        """The document of ``tomllib.load(open("build.toml", "rb"))``,
        ``json.loads(Path("x.json").read_text())``; None for any other expression."""
        called = _call_name(value)
        if called not in _LOADERS or not isinstance(value, ast.Call) or not value.args:
            return None
        file = _file_name(value.args[0])
        return self._document(file) if file is not None else None

    def _lookup(self, value: ast.AST) -> tuple[_Document, list[str], str] | None:
        """The string ``value`` takes from a document: ``doc["a"]["b"]``, ``doc.get("a")``,
        ``cfg.get("section", "key")``, ``tomllib.load(open(...))["key"]``."""
        keys: list[str] = []
        node = value
        while True:
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                keys.insert(0, str(node.slice.value))
                node = node.value
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and node.args
                and all(isinstance(a, ast.Constant) for a in node.args)
            ):
                given = [str(a.value) for a in node.args if isinstance(a, ast.Constant)]
                node = node.func.value
                owner = self._documents.get(node.id) if isinstance(node, ast.Name) else None
                keys[:0] = given[:2] if owner is not None and owner.ini else given[:1]
            else:
                break
        if not keys:
            return None
        document = (
            self._documents.get(node.id) if isinstance(node, ast.Name) else self._loaded(node)
        )
        if document is None:
            return None
        content: Any = document.content
        for key in keys:
            if not isinstance(content, dict) or key not in content:
                return None
            content = content[key]
        return (document, keys, content) if isinstance(content, str) else None


def _substituted(node: ast.Assign, handles: dict[str, ast.expr]) -> ast.Assign:
    """``X = tomllib.load(f)`` inside ``with open("f") as f``: the open in place of ``f``."""
    if not handles:
        return node

    class _Swap(ast.NodeTransformer):
        def visit_Name(self, name: ast.Name) -> ast.AST:
            return handles.get(name.id, name)

    swapped = _Swap().visit(ast.Assign(targets=node.targets, value=node.value, lineno=node.lineno))
    return swapped if isinstance(swapped, ast.Assign) else node


def config_constants(path: str, text: str, read: ReadFile) -> dict[str, tuple[str, str]]:
    """The module-level names of ``path`` bound to a string read from a project config file:
    ``{"ENV": ("MYEXT_OPS", "build.toml['env_name'] via setup.py:4")}``."""
    return ConfigNames(path, text, read).found
