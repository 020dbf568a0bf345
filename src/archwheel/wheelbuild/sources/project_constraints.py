"""What the project declares about the Python and the torch it builds with, read before a build.

A recipe replaces the project's own choices: its torch pin becomes the wheel's
``Requires-Dist``, its Python the wheel's tag. Where they contradict what the project declares,
archwheel says so in the plan, one line each, and records it in the provenance:

- ``requires-python`` (``[project] requires-python``, ``setup.cfg [options] python_requires``,
  ``setup(python_requires=...)``): a Python it excludes is refused before any container
  (``UsageError``, exit 2), unless the recipe says ``[python] ignore_requires_python = true``
  (then a warning, and provenance ``project.requires_python.ignored``);
- its torch requirement (``[build-system] requires``, ``[project] dependencies``,
  ``setup.cfg [options] install_requires``/``setup_requires``, ``setup(install_requires=...,
  setup_requires=...)``): a pinned torch outside it is built anyway, as the recipe says, with
  a warning and provenance ``project.torch[].overridden``;
- the wheel's tag: a project that builds ``py3-none`` (scikit-build-core ``wheel.py-api =
  "py3"``) or ``abi3`` (``py-api = "cp39"``, ``[bdist_wheel] py_limited_api``) gets that tag,
  not ``cp311-cp311``; where the build files do not say, the tag follows the build backend.

Read statically and bounded: ``pyproject.toml``, ``setup.cfg``, ``setup.py`` and an sdist's
``PKG-INFO`` at the top of the source, each at most ``MAX_FILE_BYTES``; ``setup.py`` is parsed
(``ast``), never run: a value that is not a literal (or a name bound once to a literal) is not
read, and the plan says so. ``PKG-INFO`` (the metadata the sdist's backend computed, read as pip
reads core metadata) comes last: its ``Requires-Python`` counts where no build file declares
one, its torch ``Requires-Dist`` where no build file names torch (a ``setup.py`` that computes
them is read so), and a field it marks ``Dynamic`` (metadata 2.2) is not taken.
``read_constraints`` is pure (the files' texts in); ``read_project`` reads the files.
"""

from __future__ import annotations

import ast
import configparser
import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.markers import InvalidMarker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from archwheel.binary.coremetadata import parse_core_metadata
from archwheel.effects.files import open_regular
from archwheel.errors import UsageError
from archwheel.facts.documents import DocumentUnreadable, parse_document
from archwheel.facts.python_target import PythonTarget
from archwheel.wheelbuild.images.toolkit import TorchBuild
from archwheel.wheelbuild.recipes.recipe_model import Recipe
from archwheel.wheelbuild.sources.source import ResolvedSource

PROJECT_FILES = ("pyproject.toml", "setup.cfg", "setup.py", "PKG-INFO")
MAX_FILE_BYTES = 1 << 20
MAX_NESTING = 32
_SETUP_KEYS = ("python_requires", "install_requires", "setup_requires")
# Digits of one number in a version the build files declare (a release is a handful: 2.14.1);
# packaging parses thousands lazily, then int() refuses past 4300 when it compares them.
MAX_VERSION_DIGITS = 24
_LONG_NUMBER = re.compile(rf"[0-9]{{{MAX_VERSION_DIGITS + 1},}}")
_PROBE_VERSION = Version("3.11.0")
_BUILD_NUMBER = re.compile(r"--build-number(?:=|\s+)['\"]?(\d\w*)")


@dataclass(frozen=True)
class Declared:
    """One requirement the project declares, and where (``pyproject.toml [project]
    dependencies``)."""

    requirement: str  # ">=3.12" for requires-python; "torch>=2.0,<2.8" for torch
    origin: str


@dataclass(frozen=True)
class ProjectConstraints:
    """What the build files declare; ``unread`` names what could not be read statically."""

    requires_python: Declared | None = None
    torch: tuple[Declared, ...] = ()
    backend: str | None = None  # [build-system] build-backend
    tag: Declared | None = None  # "py3-none", "cp39-abi3": a tag the build files choose
    unread: tuple[str, ...] = ()
    files: tuple[str, ...] = ()  # the files read
    build_number: Declared | None = None  # bdist_wheel's build_number: the file name's build tag
    tag_computed: str | None = None  # "setup.py (line 40)": bdist_wheel options set by code
    own_bdist_wheel: str | None = None  # "setup.py (line 52)": cmdclass replaces bdist_wheel
    torch_computed: str | None = None  # "setup.py (line 12)": install_requires set by code


# -- reading ------------------------------------------------------------------------------------


def read_project(root: Path, files: Iterable[str]) -> Mapping[str, str]:
    """The texts of ``PROJECT_FILES`` at the top of a resolved source (``files``: its list);
    a file too large or unreadable is left out (the build reads it, and says so)."""
    present = set(files)
    texts: dict[str, str] = {}
    for name in PROJECT_FILES:
        if name not in present:
            continue
        try:
            with open_regular(root / name) as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
        except OSError:
            continue
        if len(data) <= MAX_FILE_BYTES:
            texts[name] = data.decode("utf-8", errors="replace")
    return texts


def _is_torch(text: str) -> Requirement | None:
    try:
        req = Requirement(text)
    except InvalidRequirement:
        return None
    if canonicalize_name(req.name) != "torch":
        return None
    try:
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            return None
    except InvalidMarker:  # pragma: no cover - Requirement already parsed the marker
        return None
    return req


def _unbounded(text: str) -> str | None:
    """Why a specifier (requires-python, a torch requirement's) cannot be judged, or None: a
    number of more than ``MAX_VERSION_DIGITS`` digits, or one packaging cannot compare."""
    if _LONG_NUMBER.search(text):
        return f"a specifier with a number of more than {MAX_VERSION_DIGITS} digits"
    try:
        SpecifierSet(text).contains(_PROBE_VERSION, prereleases=True)
    except ValueError:  # InvalidSpecifier, and a version it cannot compare
        return "not a version specifier"
    return None


def _torch_among(values: object, origin: str, unread: list[str] | None = None) -> list[Declared]:
    if isinstance(values, str):
        values = values.splitlines()
    if not isinstance(values, (list, tuple)):
        return []
    found = []
    for value in values:
        if isinstance(value, str):
            text = value.split("#", 1)[0].strip()
            req = _is_torch(text)
            why = _unbounded(str(req.specifier)) if req is not None else None
            if why is not None:
                if unread is not None:
                    unread.append(f"{origin} (a torch requirement is {why})")
                continue
            if req is not None and str(req.specifier):
                # as the project wrote it (its order), without a marker that holds here
                found.append(Declared(text.split(";", 1)[0].strip(), origin))
    return found


def _pyproject(text: str, out: _Found) -> None:
    try:
        document = parse_document(text, MAX_NESTING, toml=True)
    except DocumentUnreadable as exc:
        out.unread.append(f"pyproject.toml ({exc})")
        return
    assert isinstance(document, dict)
    build = document.get("build-system")
    if isinstance(build, dict):
        out.torch += _torch_among(
            build.get("requires"), "pyproject.toml [build-system] requires", out.unread
        )
        backend = build.get("build-backend")
        out.backend = backend if isinstance(backend, str) else None
    project = document.get("project")
    if isinstance(project, dict):
        requires = project.get("requires-python")
        if isinstance(requires, str):
            out.python(requires, "pyproject.toml [project] requires-python")
        out.torch += _torch_among(
            project.get("dependencies"), "pyproject.toml [project] dependencies", out.unread
        )
    tool = document.get("tool")
    skbuild = tool.get("scikit-build") if isinstance(tool, dict) else None
    if isinstance(skbuild, dict):
        wheel = skbuild.get("wheel")
        api = wheel.get("py-api") if isinstance(wheel, dict) else skbuild.get("wheel.py-api")
        if isinstance(api, str) and api:
            origin = f'pyproject.toml [tool.scikit-build] wheel.py-api = "{api}"'
            if api.startswith("py"):
                out.tag = Declared(f"{api}-none", origin)
            elif api.startswith("cp"):
                out.tag = Declared(f"{api}-abi3", origin)


def _setup_cfg(text: str, out: _Found) -> None:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text, "setup.cfg")
    except configparser.Error as exc:
        out.unread.append(f"setup.cfg ({' '.join(str(exc).split())[:120]})")
        return
    if parser.has_section("options"):
        options = parser["options"]
        if options.get("python_requires"):
            out.python(options["python_requires"], "setup.cfg [options] python_requires")
        for key in ("install_requires", "setup_requires"):
            out.torch += _torch_among(
                options.get(key, ""), f"setup.cfg [options] {key}", out.unread
            )
    if parser.has_section("bdist_wheel"):
        limited = parser["bdist_wheel"].get("py_limited_api", "").strip()
        if limited.startswith("cp"):
            out.tag = Declared(f"{limited}-abi3", "setup.cfg [bdist_wheel] py_limited_api")
        number = parser["bdist_wheel"].get("build_number", "").strip()
        if number:
            out.build_number = Declared(number, "setup.cfg [bdist_wheel] build_number")


def _literal(node: ast.expr, names: Mapping[str, ast.expr]) -> tuple[bool, Any]:
    """The value of a literal, or of a name bound once, at the top, to a literal."""
    if isinstance(node, ast.Name) and node.id in names:
        node = names[node.id]
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


_MUTATORS = frozenset({"append", "extend", "insert", "remove", "pop", "clear", "update",
                       "setdefault", "__setitem__", "sort", "reverse"})  # fmt: skip


def _changed_names(tree: ast.AST) -> dict[str, int]:
    """Names whose value code changes after they are bound, with the first line that does
    (``REQS[0] = ...``, ``REQS.append(...)``, ``REQS += ...``, a second binding, a loop target):
    a list built as a literal and rewritten before ``setup()`` is computed, not declared."""
    bindings: dict[str, list[int]] = {}
    changed: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                        bindings.setdefault(sub.id, []).append(node.lineno)
                        if isinstance(node, (ast.AugAssign, ast.For)):
                            changed.setdefault(sub.id, node.lineno)
                    elif isinstance(sub, (ast.Subscript, ast.Attribute)):
                        base = sub.value
                        if isinstance(base, ast.Name):
                            changed.setdefault(base.id, node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MUTATORS
            and isinstance(node.func.value, ast.Name)
        ):
            changed.setdefault(node.func.value.id, node.lineno)
    for name, lines in bindings.items():
        if len(lines) > 1:
            changed[name] = min(changed.get(name, lines[1]), lines[1])
    return changed


def _computed_at(value: ast.expr, changed: Mapping[str, int]) -> int:
    """The line where code makes ``value``: where its name is rewritten, else its own."""
    if isinstance(value, ast.Name) and value.id in changed:
        return changed[value.id]
    return value.lineno


def _bdist_wheel_keys(node: ast.AST) -> int | None:
    """The line of a ``"bdist_wheel"`` key in a dict literal or a subscript store under
    ``node`` (a ``cmdclass``: the project brings its own bdist_wheel)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Dict):
            for key in sub.keys:
                if isinstance(key, ast.Constant) and key.value == "bdist_wheel":
                    return key.lineno
    return None


def _own_bdist_wheel(tree: ast.AST, setup_call: ast.Call) -> int | None:
    """Where the project replaces bdist_wheel: ``cmdclass={"bdist_wheel": ...}`` (through a
    name too) or ``cmdclass["bdist_wheel"] = ...`` anywhere (an environment switch may do it)."""
    for keyword in setup_call.keywords:
        if keyword.arg == "cmdclass":
            found = _bdist_wheel_keys(keyword.value)
            if found is not None:
                return found
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.slice, ast.Constant)
                    and target.slice.value == "bdist_wheel"
                ):
                    return node.lineno
            if any(isinstance(t, ast.Name) and "cmdclass" in t.id.lower() for t in node.targets):
                found = _bdist_wheel_keys(node.value)
                if found is not None:
                    return found
    return None


def _setup_py(text: str, out: _Found) -> None:
    try:
        tree = ast.parse(text, "setup.py")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        out.unread.append(f"setup.py (not parsed: {type(exc).__name__})")
        return
    changed = _changed_names(tree)
    names: dict[str, ast.expr] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Name) and target.id not in changed:
                names.setdefault(target.id, statement.value)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if called != "setup":
            continue
        own = _own_bdist_wheel(tree, node)
        if own is not None:
            out.own_bdist_wheel = f"setup.py (line {own})"
        for keyword in node.keywords:
            if keyword.arg in _SETUP_KEYS:
                read, value = _literal(keyword.value, names)
                origin = f"setup.py setup({keyword.arg}=...)"
                if not read:
                    line = _computed_at(keyword.value, changed)
                    out.unread.append(f"{origin}: computed by setup.py (line {line})")
                    if keyword.arg != "python_requires":
                        out.torch_computed = out.torch_computed or f"setup.py (line {line})"
                elif keyword.arg == "python_requires" and isinstance(value, str):
                    out.python(value, origin)
                else:
                    out.torch += _torch_among(value, origin, out.unread)
            elif keyword.arg == "options":
                _options(keyword.value, names, changed, out)


def _options(node: ast.expr, names: Mapping[str, ast.expr], changed: Mapping[str, int],
             out: _Found) -> None:  # fmt: skip
    """``setup(options={"bdist_wheel": {...}})``: ``py_limited_api`` and ``build_number`` when
    written as literals; else the line of the code that makes them."""
    read, value = _literal(node, names)
    if not read:
        out.tag_computed = f"setup.py (line {_computed_at(node, changed)})"
        return
    wheel = value.get("bdist_wheel") if isinstance(value, dict) else None
    if not isinstance(wheel, dict):
        return
    limited = wheel.get("py_limited_api")
    if isinstance(limited, str) and limited.startswith("cp"):
        origin = "setup.py setup(options={'bdist_wheel': {'py_limited_api': ...}})"
        out.tag = Declared(f"{limited}-abi3", origin)
    number = wheel.get("build_number")
    if isinstance(number, (str, int)) and str(number):
        origin = "setup.py setup(options={'bdist_wheel': {'build_number': ...}})"
        out.build_number = Declared(str(number), origin)


def _pkg_info(text: str, out: _Found) -> None:
    metadata = parse_core_metadata(text)
    dynamic = {value.strip().lower() for value in metadata.get_all("Dynamic")}
    python = metadata.get("Requires-Python")
    if python is not None and python.strip() and "requires-python" not in dynamic:
        out.python(python.strip(), "PKG-INFO Requires-Python")
    if not out.torch and "requires-dist" not in dynamic:
        values = [value.strip() for value in metadata.get_all("Requires-Dist")]
        origin = "PKG-INFO Requires-Dist" + (
            f", what {out.torch_computed} computed when the sdist was made"
            if out.torch_computed
            else ""
        )
        out.torch.extend(_torch_among(values, origin, out.unread))


class _Found:
    """What the readers collect; the first file to declare requires-python wins (pyproject.toml,
    then setup.cfg, then setup.py: the order in which the backends let them override)."""

    def __init__(self) -> None:
        self.requires_python: Declared | None = None
        self.torch: list[Declared] = []
        self.backend: str | None = None
        self.tag: Declared | None = None
        self.unread: list[str] = []
        self.build_number: Declared | None = None
        self.tag_computed: str | None = None
        self.own_bdist_wheel: str | None = None
        self.torch_computed: str | None = None

    def python(self, text: str, origin: str) -> None:
        if self.requires_python is not None:
            return
        why = _unbounded(text)
        if why is not None:
            shown = text if len(text) <= 60 else text[:57] + "..."
            self.unread.append(f"{origin} ({shown!r} is {why})")
            return
        self.requires_python = Declared(text.strip(), origin)


def read_constraints(texts: Mapping[str, str]) -> ProjectConstraints:
    """What ``pyproject.toml``, ``setup.cfg``, ``setup.py`` and ``PKG-INFO`` (their texts, by
    name) declare."""
    found = _Found()
    readers = {
        "pyproject.toml": _pyproject,
        "setup.cfg": _setup_cfg,
        "setup.py": _setup_py,
        "PKG-INFO": _pkg_info,
    }
    for name in PROJECT_FILES:
        if name in texts:
            readers[name](texts[name], found)
    return ProjectConstraints(
        requires_python=found.requires_python,
        torch=tuple(found.torch),
        backend=found.backend,
        tag=found.tag,
        unread=tuple(found.unread),
        files=tuple(name for name in PROJECT_FILES if name in texts),
        build_number=found.build_number,
        tag_computed=found.tag_computed,
        own_bdist_wheel=found.own_bdist_wheel,
        torch_computed=found.torch_computed,
    )


# -- judging ------------------------------------------------------------------------------------


def python_excluded(requires: str, python: str) -> bool:
    """Whether ``requires`` (a requires-python specifier) admits no release of ``python``
    (``3.11``, ``3.14t``): neither its first nor a late patch release."""
    spec = SpecifierSet(requires)
    version = PythonTarget.parse(python).version
    return not any(
        spec.contains(Version(f"{version}.{patch}"), prereleases=True) for patch in (0, 99)
    )


@dataclass(frozen=True)
class TorchVerdict:
    """A torch requirement of the project against the recipe's pin."""

    declared: Declared
    pinned: str
    overridden: bool  # the pin is outside the project's range

    def line(self, requires_dist: str | None) -> str:
        """One line: the project's torch requirement, and whether the pin meets or overrides it."""
        said = f"the project requires {self.declared.requirement} ({self.declared.origin})"
        if not self.overridden:
            return f"{said}: torch {self.pinned} meets it"
        wheel = (
            f"the wheel's Requires-Dist says {requires_dist}"
            if requires_dist
            else "the wheel keeps the project's own requirement, which excludes the torch it "
            "is built against"
        )
        return f"{said}; the recipe pins torch {self.pinned}: overridden ({wheel})"


@dataclass(frozen=True)
class ProjectCheck:
    """The project's constraints judged against one build: the plan's rows, the warnings,
    and the provenance record."""

    constraints: ProjectConstraints
    python: str
    python_ignored: bool  # requires-python excludes the Python; the recipe overrides it
    torch: tuple[TorchVerdict, ...]
    requires_dist: str | None  # what the wheel will say of torch

    def warnings(self) -> list[str]:
        """One line per contradiction the build goes on with."""
        out = []
        declared = self.constraints.requires_python
        if self.python_ignored and declared is not None:
            out.append(
                f"the project requires Python {declared.requirement} ({declared.origin}); the "
                f"build targets Python {self.python}: built anyway ([python] "
                "ignore_requires_python = true)"
            )
        out += [v.line(self.requires_dist) for v in self.torch if v.overridden]
        return out

    def rows(self) -> list[tuple[str, str]]:
        """The plan's ``project`` rows: each constraint and what the build does with it."""
        c = self.constraints
        if not c.files:
            return [("project", "no pyproject.toml, setup.cfg or setup.py at the source's top")]
        rows = []
        if c.requires_python is not None and not self.python_ignored:
            rows.append(
                (
                    "project",
                    f"requires Python {c.requires_python.requirement} "
                    f"({c.requires_python.origin}): {self.python} meets it",
                )
            )
        rows += [("project", line) for line in self.warnings()]
        rows += [("project", v.line(self.requires_dist)) for v in self.torch if not v.overridden]
        if c.requires_python is None:
            rows.append(("project", f"declares no requires-python (read: {', '.join(c.files)})"))
        rows += [("project", f"not read statically: {what}") for what in c.unread]
        if c.torch_computed and self.requires_dist:
            rows.append(
                (
                    "project",
                    f"its requirements are computed by {c.torch_computed}: the wheel's "
                    f"Requires-Dist says {self.requires_dist}",
                )
            )
        return rows

    def predictions(self) -> dict[str, str | None]:
        """What the plan expects the built wheel to say: its interpreter-ABI tag, build
        number, Requires-Python and torch requirement (None: not known before the build)."""
        c = self.constraints
        python = c.requires_python
        return {
            "tag": self.predicted_tag(),
            "build": None
            if c.own_bdist_wheel or c.tag_computed
            else c.build_number.requirement
            if c.build_number is not None
            else "",
            "requires_python": python.requirement if python else None,
            "torch": self.requires_dist,
        }

    def predicted_tag(self) -> str | None:
        """The interpreter-ABI part of the tag the plan expects (``cp311-cp311``); None where
        code decides it (options computed, a bdist_wheel of the project's own)."""
        c = self.constraints
        if c.tag_computed or c.own_bdist_wheel:
            return c.tag.requirement if c.tag is not None and not c.tag_computed else None
        if c.tag is not None:
            return c.tag.requirement
        backend = c.backend or ("setuptools" if "setup.py" in c.files else "")
        if backend.split(".")[0] in ("setuptools", "scikit_build_core"):
            return PythonTarget.parse(self.python).wheel_tag
        return None  # another backend chooses its own tag

    def wheel_tag(self) -> str:
        """The interpreter-ABI part of the tag the wheel will carry, and why."""
        said = self._wheel_tag()
        c = self.constraints
        if c.own_bdist_wheel:
            said += f"; the project brings its own bdist_wheel ({c.own_bdist_wheel}): its tag"
        if c.build_number is not None:
            said += f"; build number {c.build_number.requirement} ({c.build_number.origin})"
        return said

    def _wheel_tag(self) -> str:
        target = PythonTarget.parse(self.python)
        tag = self.constraints.tag
        if self.constraints.tag_computed:
            return f"computed by {self.constraints.tag_computed} (bdist_wheel options)"
        if tag is not None:
            return f"{tag.requirement} ({tag.origin})"
        backend = self.constraints.backend
        if backend is None and "setup.py" in self.constraints.files:
            backend = "setuptools"
        if backend is not None and backend.split(".")[0] in ("setuptools", "scikit_build_core"):
            return f"{target.wheel_tag} ({backend}'s tag for an extension module)"
        return (
            f"{target.wheel_tag} if the build backend ({backend or 'not declared'}) tags it for "
            "the CPython: the tag follows the backend"
        )

    def python_row(self) -> str:
        """The plan's ``python`` row: the version, GIL or free-threaded, and the wheel tag."""
        target = PythonTarget.parse(self.python)
        kind = "free-threaded" if target.free_threaded else "with the GIL"
        return f"{target} ({kind}; wheel tag {self.wheel_tag()})"

    def to_json_dict(self) -> dict[str, object]:
        """The check as the provenance's and the plan JSON's ``project`` entry."""
        c = self.constraints
        return {
            "files": list(c.files),
            "requires_python": (
                {
                    "requirement": c.requires_python.requirement,
                    "origin": c.requires_python.origin,
                    "python": self.python,
                    "ignored": self.python_ignored,
                }
                if c.requires_python is not None
                else None
            ),
            "torch": [
                {
                    "requirement": v.declared.requirement,
                    "origin": v.declared.origin,
                    "pinned": v.pinned,
                    "overridden": v.overridden,
                }
                for v in self.torch
            ],
            "tag": {"tag": c.tag.requirement, "origin": c.tag.origin} if c.tag else None,
            "tag_computed": c.tag_computed,
            "own_bdist_wheel": c.own_bdist_wheel,
            "build_number": (
                {"number": c.build_number.requirement, "origin": c.build_number.origin}
                if c.build_number
                else None
            ),
            "requirements_computed": c.torch_computed,
            "unread": list(c.unread),
        }


def _admits(requirement: str, version: Version) -> bool:
    return Requirement(requirement).specifier.contains(version, prereleases=True)


def check_project(
    constraints: ProjectConstraints,
    *,
    python: str,
    torch: str | None,
    requires_dist: str | None,
    ignore_requires_python: bool,
    recipe: Path,
    recipe_pythons: Sequence[str] = (),
) -> ProjectCheck:
    """The project's constraints against the build: ``UsageError`` (exit 2) for a Python its
    requires-python excludes, unless ``ignore_requires_python``. ``torch``: the pinned
    release (None: no pin); ``requires_dist``: what the wheel will require of torch."""
    declared = constraints.requires_python
    excluded = declared is not None and python_excluded(declared.requirement, python)
    if excluded and not ignore_requires_python:
        assert declared is not None
        allowed = [v for v in recipe_pythons if not python_excluded(declared.requirement, v)]
        raise UsageError(
            f"the project requires Python {declared.requirement} ({declared.origin}); the build "
            f"targets Python {python}, which it excludes: its wheel could not be installed",
            hint=(
                f"build for {' or '.join(allowed)} (--python), "
                if allowed
                else f"add a Python it allows to [python] versions in {recipe}, "
            )
            + "or set [python] ignore_requires_python = true there to build anyway (recorded "
            "in the provenance)",
        )
    verdicts: tuple[TorchVerdict, ...] = ()
    if torch is not None:
        pinned = Version(torch)
        verdicts = tuple(
            TorchVerdict(d, pinned.public, not _admits(d.requirement, pinned))
            for d in constraints.torch
        )
    return ProjectCheck(constraints, python, excluded, verdicts, requires_dist)


def project_check(
    recipe: Recipe, source: ResolvedSource, python: str, torch: TorchBuild | None
) -> ProjectCheck:
    """``check_project`` for a build: the resolved source's files, the recipe's Python and
    override, and its pinned torch (with the ``Requires-Dist`` the wheel will get)."""
    constraints = read_constraints(read_project(source.root, source.files))
    number = _BUILD_NUMBER.search(recipe.build.command)
    if number is not None:  # the command's own --build-number wins over the project's
        given = Declared(number.group(1), "the recipe's build command --build-number")
        constraints = dataclasses.replace(constraints, build_number=given)
    pinned = (
        torch.wheel.version
        if torch is not None
        else recipe.torch.pin.public
        if recipe.torch.pin is not None
        else None
    )
    return check_project(
        constraints,
        python=python,
        torch=pinned,
        requires_dist=torch.pin_requirement if torch is not None else None,
        ignore_requires_python=recipe.ignore_requires_python,
        recipe=recipe.path,
        recipe_pythons=recipe.python_versions,
    )
