"""Who reads an arch list: the consumers, their variables, and their tables per release.

An arch list reaches the compiler through code that parses it, and each parser has its own
grammar. This module holds what archwheel knows of each one as data: the consumer names
(``TORCH_CMAKE``, ``CMAKE_FINDCUDA``, ``CPP_EXTENSION``, ``CMAKE``, ``NVCC``, and the projects of
``arch_consumers.toml`` such as ``flash-attn``), the variable each one reads, and the tables of
the torch parsers per torch release (``TorchGrammar``) and of CMake's own FindCUDA module
(``FindCudaGrammar``), loaded once by ``load_grammars``.

The torch tables were read from the wheels' own files (named in the data file), and
``cpp_extension_tables``/``cmake_tables``/``cmake_unknown_error`` extract them again from a
shipped file's text, which the tests compare with the stored tables (the ``cmake-findcuda``
tables likewise, from the cmake wheel's FindCUDA module). What each consumer makes of a value
is ``arch_readers``; the entry points (``read``, ``render``) are ``arch_grammars``.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

from packaging.version import InvalidVersion, Version

from archwheel.errors import ArchListError, FactsError
from archwheel.facts.arch import Target
from archwheel.facts.catalog import CudaFacts, load_facts
from archwheel.facts.versions import ComputeCapability, CudaVersion

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

TORCH_CMAKE = "torch-cmake"
CPP_EXTENSION = "cpp-extension"
CMAKE = "cmake"
NVCC = "nvcc"
# CMake's own FindCUDA/select_compute_arch.cmake (the module PyTorch's copy was forked from),
# read by projects that call cuda_select_nvcc_arch_flags without find_package(Torch).
CMAKE_FINDCUDA = "cmake-findcuda"
BUILTIN_CONSUMERS = (TORCH_CMAKE, CPP_EXTENSION, CMAKE, NVCC)

DEFAULT_VARIABLE: Mapping[str, str] = MappingProxyType(
    {
        TORCH_CMAKE: "TORCH_CUDA_ARCH_LIST",
        CPP_EXTENSION: "TORCH_CUDA_ARCH_LIST",
        CMAKE: "CMAKE_CUDA_ARCHITECTURES",
        NVCC: "CUDA_GENCODE_FLAGS",
        CMAKE_FINDCUDA: "TORCH_CUDA_ARCH_LIST",
    }
)


# -- the data -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CmakeName:
    """One name of ``select_compute_arch.cmake``: the SASS it adds, and the PTX with ``+PTX``."""

    name: str
    arch_bin: tuple[str, ...]
    arch_ptx: tuple[str, ...]


# PyTorch's copy: message(SEND_ERROR "Found ... FLAGS: ${arch_name} "), its trailing blank left out
TORCH_CMAKE_UNKNOWN = "Found Unknown CUDA Architecture Name in CUDA_SELECT_NVCC_ARCH_FLAGS: {name}"


@dataclass(frozen=True)
class SelectComputeArch:
    """What one copy of ``select_compute_arch.cmake`` (PyTorch's of a release, or CMake's own)
    applies to an arch list: its numeric pattern, its names, its error for an unknown name."""

    source: str  # the file, as readings name it ("torch 2.14.1 .../select_compute_arch.cmake")
    number_regex: str
    names: tuple[CmakeName, ...]
    unknown_error: str  # "{name}" for the name


@dataclass(frozen=True)
class TorchGrammar:
    """The two torch parsers of one torch release, as read from its wheel."""

    torch: str
    cpp_extension_file: str
    cmake_file: str
    cpp_extension_names: tuple[tuple[str, str], ...]
    cpp_extension_supported: tuple[str, ...]
    cmake_number_regex: str
    cmake_names: tuple[CmakeName, ...]

    @property
    def cpp_extension_valid(self) -> tuple[str, ...]:
        """``valid_arch_strings``: the supported list, and each with ``+PTX``."""
        return self.cpp_extension_supported + tuple(
            s + "+PTX" for s in self.cpp_extension_supported
        )

    @property
    def select_compute_arch(self) -> SelectComputeArch:
        """PyTorch's ``select_compute_arch.cmake`` of this release."""
        return SelectComputeArch(
            f"torch {self.torch} {self.cmake_file}",
            self.cmake_number_regex,
            self.cmake_names,
            TORCH_CMAKE_UNKNOWN,
        )


@dataclass(frozen=True)
class ProjectEntry:
    """One entry a project's variable acts on: the SASS target it adds, from which CUDA on."""

    entry: str
    target: Target
    min_cuda: CudaVersion


@dataclass(frozen=True)
class ProjectGrammar:
    """A project's own variable: listed entries add SASS, everything else is dropped."""

    name: str
    variable: str
    source: str
    separator: str
    default: str
    entries: tuple[ProjectEntry, ...]


@dataclass(frozen=True)
class FindCudaGrammar:
    """CMake's own ``select_compute_arch.cmake``: PyTorch's algorithm, its own pattern and names."""

    cmake: str  # the CMake release whose module was read
    file: str
    number_regex: str
    names: tuple[CmakeName, ...]
    unknown_error: str  # its SEND_ERROR for an unknown name, "{name}" for the name

    @property
    def select_compute_arch(self) -> SelectComputeArch:
        """CMake's ``select_compute_arch.cmake`` of this release."""
        return SelectComputeArch(
            f"CMake {self.cmake} {self.file}", self.number_regex, self.names, self.unknown_error
        )


@dataclass(frozen=True)
class Grammars:
    """Every arch-list grammar archwheel knows: torch's per release, the projects', CMake's
    FindCUDA; made once by ``load_grammars``, read by ``arch_grammars`` and ``arch_readers``."""

    torch: tuple[TorchGrammar, ...]  # oldest first
    projects: Mapping[str, ProjectGrammar]
    findcuda: FindCudaGrammar | None = None

    @property
    def consumers(self) -> tuple[str, ...]:
        """Every consumer name known: the built-in ones, FindCUDA's, then the projects'."""
        own = (CMAKE_FINDCUDA,) if self.findcuda is not None else ()
        return BUILTIN_CONSUMERS + own + tuple(self.projects)

    def for_torch(self, version: str | None) -> TorchGrammar:
        """The grammar of ``version``: the newest stored release not newer than it."""
        if version is None:
            return self.torch[-1]
        try:
            wanted = Version(version)
        except InvalidVersion:
            raise ArchListError(
                f"invalid torch version {version!r}", hint="write it as X.Y.Z, e.g. 2.14.1"
            ) from None
        base = Version(wanted.base_version)
        older = [g for g in self.torch if Version(g.torch) <= base]
        return older[-1] if older else self.torch[0]

    def variable(self, consumer: str) -> str:
        """The variable ``consumer`` reads its arch list from (``TORCH_CUDA_ARCH_LIST`` ...)."""
        if consumer in self.projects:
            return self.projects[consumer].variable
        return DEFAULT_VARIABLE[consumer]

    def check_consumer(self, consumer: str) -> None:
        """Raise ``ArchListError`` listing the known consumers when ``consumer`` is not one."""
        if consumer not in self.consumers:
            raise ArchListError(
                f"unknown arch consumer {consumer!r}",
                hint=f"known: {', '.join(self.consumers)}",
            )


def parse_grammars(data: Mapping[str, Any], facts: CudaFacts | None = None) -> Grammars:
    """The grammars of a parsed ``arch_consumers.toml``, torch's sorted oldest first;
    ``FactsError`` when the data is malformed or has no torch grammar."""
    facts = facts or load_facts()
    try:
        torch = tuple(
            TorchGrammar(
                torch=str(t["torch"]),
                cpp_extension_file=str(t["cpp_extension_file"]),
                cmake_file=str(t["cmake_file"]),
                cpp_extension_names=tuple((str(a), str(b)) for a, b in t["cpp_extension_names"]),
                cpp_extension_supported=tuple(str(s) for s in t["cpp_extension_supported"]),
                cmake_number_regex=str(t["cmake_number_regex"]),
                cmake_names=tuple(
                    CmakeName(str(n), tuple(str(b).split()), tuple(str(p).split()))
                    for n, b, p in t["cmake_names"]
                ),
            )
            for t in data["torch"]
        )
        projects = {
            str(name): ProjectGrammar(
                name=str(name),
                variable=str(p["variable"]),
                source=str(p["source"]),
                separator=str(p["separator"]),
                default=str(p["default"]),
                entries=tuple(
                    ProjectEntry(str(e), _plain_target(str(t)), CudaVersion.parse(str(c)))
                    for e, t, c in p["entries"]
                ),
            )
            for name, p in dict(data.get("projects", {})).items()
        }
        f = data.get("findcuda")
        findcuda = (
            FindCudaGrammar(
                cmake=str(f["cmake"]),
                file=str(f["file"]),
                number_regex=str(f["number_regex"]),
                names=tuple(
                    CmakeName(str(n), tuple(str(b).split()), tuple(str(p).split()))
                    for n, b, p in f["names"]
                ),
                unknown_error=str(f["unknown_error"]),
            )
            if f is not None
            else None
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise FactsError(f"arch_consumers.toml: malformed ({exc})") from None
    ordered = tuple(sorted(torch, key=lambda g: Version(g.torch)))
    if not ordered:
        raise FactsError("arch_consumers.toml: no [[torch]] grammar")
    return Grammars(ordered, MappingProxyType(projects), findcuda)


@cache
def load_grammars() -> Grammars:
    """The grammars of the ``arch_consumers.toml`` shipped with archwheel, read once."""
    text = resources.files("archwheel.facts").joinpath("arch_consumers.toml").read_text("utf-8")
    return parse_grammars(tomllib.loads(text))


def _plain_target(dotted: str) -> Target:
    major, minor = dotted.split(".")
    return Target(ComputeCapability(int(major), int(minor)))


# -- reading the tables from the shipped files ---------------------------------------------------


def cpp_extension_tables(source: str) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """``named_arches`` and ``supported_arches`` of ``_get_cuda_arch_flags`` in cpp_extension.py."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "_get_cuda_arch_flags":
            names: tuple[tuple[str, str], ...] | None = None
            supported: tuple[str, ...] | None = None
            for stmt in ast.walk(node):
                if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
                    continue
                target = stmt.targets[0]
                if not isinstance(target, ast.Name):
                    continue
                if target.id == "named_arches" and isinstance(stmt.value, ast.Call):
                    pairs = ast.literal_eval(stmt.value.args[0])
                    names = tuple((str(a), str(b)) for a, b in pairs)
                elif target.id == "supported_arches":
                    supported = tuple(str(s) for s in ast.literal_eval(stmt.value))
            if names is None or supported is None:
                raise ValueError("_get_cuda_arch_flags has no named_arches/supported_arches")
            return names, supported
    raise ValueError("no _get_cuda_arch_flags in this file")


# a set() argument list: unquoted words and quoted ones, which may hold parentheses ("2.1(2.0)")
_CMAKE_ARGS = r'(?:[^()"]|"[^"]*")*'
_CMAKE_NAME_BLOCK = re.compile(
    r'if\(\$\{arch_name\} STREQUAL "([^"]+)"\)((?:\s*set\(arch_(?:bin|ptx)' + _CMAKE_ARGS + r"\))+)"
)
_CMAKE_SET = re.compile(r"set\(arch_(bin|ptx)(" + _CMAKE_ARGS + r")\)")
_CMAKE_WORD = re.compile(r'"([^"]*)"|([^\s"]+)')
_CMAKE_NUMBER = re.compile(r'if\(arch_name MATCHES "(\^\(\[0-9\][^"]*)"\)')
_CMAKE_UNKNOWN = re.compile(r'message\(SEND_ERROR "([^"]*Unknown CUDA Architecture Name[^"]*)"\)')


def _cmake_words(args: str) -> tuple[str, ...]:
    return tuple(quoted or bare for quoted, bare in _CMAKE_WORD.findall(args))


def cmake_tables(source: str) -> tuple[str, tuple[CmakeName, ...]]:
    """The numeric regex and the names of ``CUDA_SELECT_NVCC_ARCH_FLAGS``."""
    m = _CMAKE_NUMBER.search(source)
    if not m:
        raise ValueError("no numeric arch regex in this file")
    regex = m.group(1).replace("\\\\", "\\")
    names: list[CmakeName] = []
    for block in _CMAKE_NAME_BLOCK.finditer(source):
        bins: tuple[str, ...] = ()
        ptxs: tuple[str, ...] = ()
        for kind, values in _CMAKE_SET.findall(block.group(2)):
            if kind == "bin":
                bins = _cmake_words(values)
            else:
                ptxs = _cmake_words(values)
        names.append(CmakeName(block.group(1), bins, ptxs))
    if not names:
        raise ValueError("no architecture names in this file")
    return regex, tuple(names)


def cmake_unknown_error(source: str) -> str:
    """The message ``CUDA_SELECT_NVCC_ARCH_FLAGS`` stops with on an unknown name ({name})."""
    m = _CMAKE_UNKNOWN.search(source)
    if not m:
        raise ValueError("no 'Unknown CUDA Architecture Name' error in this file")
    return m.group(1).replace("${arch_name}", "{name}")


def cmake_regex(pattern: str) -> re.Pattern[str]:
    """A CMake regex in Python: CMake's ``$`` is the end of the text, never before a newline."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)
