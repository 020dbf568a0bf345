"""Who reads the arch list, and what each reader makes of it.

An arch list reaches the compiler through code that parses it, and each parser has its own
grammar. archwheel models six of them as data (``arch_consumers.toml``) plus pure functions:

``torch-cmake``
    PyTorch's CMake (``select_compute_arch.cmake``, ``CUDA_SELECT_NVCC_ARCH_FLAGS``), which reads
    ``TORCH_CUDA_ARCH_LIST`` when PyTorch itself or a ``find_package(Torch)`` project is built.
``cmake-findcuda``
    CMake's own FindCUDA ``select_compute_arch.cmake`` (the same function, CMake's pattern, names
    and error), which projects that call ``cuda_select_nvcc_arch_flags`` themselves read.
``cpp-extension``
    ``torch.utils.cpp_extension._get_cuda_arch_flags``, which reads ``TORCH_CUDA_ARCH_LIST`` for
    setuptools ``CUDAExtension`` builds.
``cmake``
    CMake's ``CUDA_ARCHITECTURES`` (``CMAKE_CUDA_ARCHITECTURES``): ``80``, ``90-real``, ``90a``.
``nvcc``
    plain nvcc flags: ``-gencode=arch=compute_90,code=sm_90``, ``-arch=sm_90``.
projects (``flash-attn``)
    a project's own variable in its own format (``FLASH_ATTN_CUDA_ARCHS="80;90;100;120"``).

``read(consumer, value)`` emulates the consumer on a value as written: the images it produces, or
the entries it would reject, drop, ignore or reinterpret (``Finding``), with the consumer's own
error text where it stops. ``render(consumer, archs)`` writes an ``ArchList`` in exactly what that
consumer accepts, or raises ``ArchListError`` naming the consumer's rule and the nearest list it
does accept; the rendered value is read back and must give the requested images.

The torch grammars vary by torch release; the tables were read from the wheels' own files
(named in the data file) and ``cpp_extension_tables``/``cmake_tables`` extract them again from a
shipped file's text, which the tests compare with the stored tables. The ``cmake-findcuda``
tables were read from the cmake wheel's FindCUDA module, and ``cmake_tables`` and
``cmake_unknown_error`` extract them from it the same way.
"""

from __future__ import annotations

import ast
import re
import shlex
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any, Literal

from packaging.version import InvalidVersion, Version

from archwheel.errors import ArchListError, FactsError
from archwheel.facts.arch import ArchList, ArchSpec, CodeKind, Target, Variant
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

FindingKind = Literal["reject", "drop", "ignore", "reinterpret"]

CMAKE_DOC = "CMake's CUDA_ARCHITECTURES (prop_tgt/CUDA_ARCHITECTURES)"
NVCC_DOC = "nvcc's -gencode/-arch options"


# -- the data -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CmakeName:
    """One name of ``select_compute_arch.cmake``: the SASS it adds, and the PTX with ``+PTX``."""

    name: str
    arch_bin: tuple[str, ...]
    arch_ptx: tuple[str, ...]


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


@dataclass(frozen=True)
class ProjectEntry:
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


@dataclass(frozen=True)
class Grammars:
    torch: tuple[TorchGrammar, ...]  # oldest first
    projects: Mapping[str, ProjectGrammar]
    findcuda: FindCudaGrammar | None = None

    @property
    def consumers(self) -> tuple[str, ...]:
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
        if consumer in self.projects:
            return self.projects[consumer].variable
        return DEFAULT_VARIABLE[consumer]

    def check_consumer(self, consumer: str) -> None:
        if consumer not in self.consumers:
            raise ArchListError(
                f"unknown arch consumer {consumer!r}",
                hint=f"known: {', '.join(self.consumers)}",
            )


def parse_grammars(data: Mapping[str, Any], facts: CudaFacts | None = None) -> Grammars:
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


def _cmake_regex(pattern: str) -> re.Pattern[str]:
    """A CMake regex in Python: CMake's ``$`` is the end of the text, never before a newline."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


# -- readings -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One entry a consumer would not take as meant: rejected, dropped, ignored, reinterpreted."""

    kind: FindingKind
    entry: str
    rule: str

    def sentence(self) -> str:
        verb = {
            "reject": "rejects",
            "drop": "silently drops",
            "ignore": "ignores",
            "reinterpret": "reinterprets",
        }[self.kind]
        return f"{verb} {self.entry!r}: {self.rule}"


@dataclass(frozen=True)
class Reading:
    """What one consumer makes of one value."""

    consumer: str
    variable: str
    value: str | None
    source: str
    images: tuple[str, ...]  # sm_80, compute_90: what the compiler is asked for
    flags: tuple[str, ...]  # the nvcc flags as the consumer writes them
    findings: tuple[Finding, ...] = ()
    error: str | None = None  # the consumer's own words where it stops

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def fails(self) -> bool:
        """The consumer itself stops (exception, CMake error)."""
        return any(f.kind == "reject" for f in self.findings)

    def targets(self) -> ArchList | None:
        """The images as an ArchList (None when the consumer stops or names no real target)."""
        if self.fails or not self.images:
            return None
        return images_to_archs(self.images)

    def describe(self) -> str:
        if self.ok:
            return " ".join(self.images)
        return "; ".join(f.sentence() for f in self.findings)


def _reading(
    consumer: str,
    variable: str,
    value: str | None,
    source: str,
    findings: Iterable[Finding],
    *,
    images: Iterable[str] = (),
    flags: Iterable[str] = (),
    error: str | None = None,
) -> Reading:
    """What ``consumer`` makes of ``value``: the images only when nothing was found wrong."""
    found = tuple(findings)
    return Reading(
        consumer,
        variable,
        value,
        source,
        () if found else tuple(images),
        tuple(flags),
        found,
        error,
    )


def images_to_archs(images: Iterable[str]) -> ArchList:
    specs = []
    for name in images:
        kind, target = Target.from_name(name)
        specs.append(ArchSpec(target, sass=kind is CodeKind.SASS, ptx=kind is CodeKind.PTX))
    return ArchList.of(specs)


def image_names(archs: ArchList) -> tuple[str, ...]:
    out: list[str] = []
    for s in archs:
        if s.sass:
            out.append(s.target.sm)
        if s.ptx:
            out.append(s.target.compute)
    return tuple(sorted(out))


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


def read(
    consumer: str,
    value: str | None,
    *,
    torch: str | None = None,
    cuda: CudaVersion | None = None,
    cflags: Iterable[str] = (),
    variable: str | None = None,
    grammars: Grammars | None = None,
    facts: CudaFacts | None = None,
) -> Reading:
    """What ``consumer`` makes of ``value`` as written (None: the variable is unset)."""
    g, var = _grammar_of(consumer, grammars, variable)
    if consumer == TORCH_CMAKE:
        reading = read_torch_cmake(value, g.for_torch(torch), var)
    elif consumer == CMAKE_FINDCUDA:
        assert g.findcuda is not None  # check_consumer refused it otherwise
        reading = read_findcuda(value, g.findcuda, var)
    elif consumer == CPP_EXTENSION:
        reading = read_cpp_extension(value, g.for_torch(torch), tuple(cflags), var)
    elif consumer == CMAKE:
        reading = read_cmake(value, var)
    elif consumer == NVCC:
        reading = read_nvcc(value, var)
    else:
        reading = read_project(value, g.projects[consumer], cuda, var)
    return _check_real(reading, facts or load_facts())


def _grammar_of(
    consumer: str, grammars: Grammars | None, variable: str | None
) -> tuple[Grammars, str]:
    """The grammars (loaded unless given), checked to know ``consumer``, and its variable."""
    g = grammars or load_grammars()
    g.check_consumer(consumer)
    return g, variable or g.variable(consumer)


def _check_real(reading: Reading, facts: CudaFacts) -> Reading:
    """An image of a compute capability no GPU has is a compile error waiting to happen."""
    if reading.fails:
        return reading
    extra: list[Finding] = []
    for name in reading.images:
        try:
            _, target = Target.from_name(name)
        except ArchListError:
            extra.append(Finding("reject", name, "nvcc has no such target"))
            continue
        if not facts.is_known(target.cc):
            extra.append(
                Finding("reject", name, f"no GPU has compute capability {target.cc}; nvcc fails")
            )
    if not extra:
        return reading
    return replace(reading, images=(), findings=reading.findings + tuple(extra))


# PyTorch's CMake ------------------------------------------------------------------------------


def _cmake_false(value: str) -> bool:
    """CMake's false constants (``if(NOT var)``): 0, OFF, NO, FALSE, N, IGNORE, *-NOTFOUND."""
    upper = value.upper()
    return upper in ("", "0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND") or upper.endswith(
        "-NOTFOUND"
    )


# PyTorch's copy: message(SEND_ERROR "Found ... FLAGS: ${arch_name} "), its trailing blank left out
TORCH_CMAKE_UNKNOWN = "Found Unknown CUDA Architecture Name in CUDA_SELECT_NVCC_ARCH_FLAGS: {name}"


def read_torch_cmake(value: str | None, g: TorchGrammar, variable: str) -> Reading:
    """``torch_cuda_get_nvcc_gencode_flag`` -> ``CUDA_SELECT_NVCC_ARCH_FLAGS``, step by step."""
    src = f"torch {g.torch} {g.cmake_file}"
    return _select_compute_arch(
        value,
        g.cmake_number_regex,
        g.cmake_names,
        variable,
        consumer=TORCH_CMAKE,
        src=src,
        unknown_error=TORCH_CMAKE_UNKNOWN,
    )


def read_findcuda(value: str | None, g: FindCudaGrammar, variable: str) -> Reading:
    """CMake's own ``CUDA_SELECT_NVCC_ARCH_FLAGS``: the same steps, CMake's pattern and names."""
    src = f"CMake {g.cmake} {g.file}"
    return _select_compute_arch(
        value,
        g.number_regex,
        g.names,
        variable,
        consumer=CMAKE_FINDCUDA,
        src=src,
        unknown_error=g.unknown_error,
    )


def _select_compute_arch(
    value: str | None,
    number_regex: str,
    cmake_names: tuple[CmakeName, ...],
    variable: str,
    *,
    consumer: str,
    src: str,
    unknown_error: str,
) -> Reading:
    # set(TORCH_CUDA_ARCH_LIST $ENV{...}); cuda_select_nvcc_arch_flags(v ${TORCH_CUDA_ARCH_LIST}):
    # the unquoted expansion splits on ';' and drops empty elements.
    argn = ";".join(p for p in (value or "").split(";") if p)
    if argn in ("", "Auto", "All", "Common"):
        rule = (
            "empty means Auto: the build machine's GPUs, and with none visible (a build "
            "container) the 'Common' list, which depends on the CUDA version"
            if argn in ("", "Auto")
            else f"'{argn}' is a list of its own that depends on the CUDA version "
            "(select_compute_arch.cmake); name the targets instead"
        )
        finding = Finding("reinterpret", argn or "(empty)", rule)
        return _reading(consumer, variable, value, src, [finding])
    items = _dedupe(p for p in re.sub(r"[ \t]+", ";", argn).split(";") if p)
    if not items:
        finding = Finding(
            "ignore",
            argn,
            "only blanks: no architecture, so CUDA_SELECT_NVCC_ARCH_FLAGS adds no flag and nvcc "
            "builds its own default target",
        )
        return _reading(consumer, variable, value, src, [finding])
    number = _cmake_regex(number_regex)
    names = {n.name: n for n in cmake_names}
    bins: list[str] = []
    ptxs: list[str] = []
    findings: list[Finding] = []
    error: str | None = None
    for item in items:
        arch_name = item
        add_ptx = False
        m = re.fullmatch(r"(.*)\+PTX", arch_name, re.DOTALL)
        if m:
            add_ptx = True
            arch_name = m.group(1)
        if number.search(arch_name):
            arch_bin: tuple[str, ...] = (arch_name,)
            arch_ptx: tuple[str, ...] = (arch_name,)
        elif arch_name in names:
            arch_bin, arch_ptx = names[arch_name].arch_bin, names[arch_name].arch_ptx
        elif not arch_name:
            # if(${arch_name} STREQUAL "<first name>") with nothing to expand: if() itself fails
            findings.append(
                Finding(
                    "reject",
                    item,
                    "'+PTX' needs a number or a name right before it (a blank splits it off); "
                    "CMake stops with 'Unknown arguments specified'",
                )
            )
            first = cmake_names[0].name
            error = error or (
                f'if given arguments: "STREQUAL" "{first}" Unknown arguments specified'
            )
            continue
        else:
            rule = _cmake_unknown_rule(arch_name, names)
            if consumer == CMAKE_FINDCUDA:
                rule = rule.replace("X.Y, X.Ya, X.Yf, X.Y(X.Y)", "X.Y (one-digit X), X.Y(X.Y)")
            findings.append(Finding("reject", item, rule))
            error = error or unknown_error.replace("{name}", arch_name)
            continue
        bins.extend(arch_bin)
        if add_ptx:
            ptxs.extend(arch_ptx or arch_bin)
    # remove dots and convert to lists, exactly as the CMake code does
    bin_list = _dedupe(re.findall(r"[0-9()]+[af]?", ";".join(bins).replace(".", "")))
    ptx_list = _dedupe(re.findall(r"[0-9]+[af]?", ";".join(ptxs).replace(".", "")))
    flags: list[str] = []
    images: list[str] = []
    for arch in bin_list:
        pair = re.search(r"([0-9]+)\(([0-9]+)\)", arch)
        if pair:
            flags += ["-gencode", f"arch=compute_{pair.group(2)},code=sm_{pair.group(1)}"]
            images.append(f"sm_{pair.group(1)}")
        else:
            flags += ["-gencode", f"arch=compute_{arch},code=sm_{arch}"]
            images.append(f"sm_{arch}")
    for arch in ptx_list:
        flags += ["-gencode", f"arch=compute_{arch},code=compute_{arch}"]
        images.append(f"compute_{arch}")
    bad_images = [i for i in images if not re.fullmatch(r"(sm|compute)_[0-9]+[af]?", i)]
    for image in bad_images:
        findings.append(Finding("reject", image, "the CMake code writes an nvcc flag nvcc refuses"))
    return _reading(
        consumer, variable, value, src, findings, images=images, flags=flags, error=error
    )


def _cmake_unknown_rule(arch_name: str, names: Mapping[str, CmakeName]) -> str:
    rule = (
        "not X.Y, X.Ya, X.Yf, X.Y(X.Y), a name, or one of these with a trailing '+PTX'; "
        "CMake stops with 'Unknown CUDA Architecture Name'"
    )
    lower = {n.lower(): n for n in names}
    if arch_name.lower() in lower:
        return f"names are case-sensitive: write {lower[arch_name.lower()]!r}; " + rule
    if arch_name.lower().endswith("+ptx"):
        return "the suffix is '+PTX', in capitals; " + rule
    if "," in arch_name:
        return "',' is not a separator (only ';', blanks and tabs); " + rule
    return rule


# torch.utils.cpp_extension -----------------------------------------------------------------------


def read_cpp_extension(
    value: str | None, g: TorchGrammar, cflags: tuple[str, ...], variable: str
) -> Reading:
    """``_get_cuda_arch_flags(cflags)`` with TORCH_CUDA_ARCH_LIST set to ``value``."""
    src = f"torch {g.torch} {g.cpp_extension_file}"
    for flag in cflags:
        if "TORCH_EXTENSION_NAME" in flag:
            continue
        if "arch" in flag:
            finding = Finding(
                "ignore",
                value or "(unset)",
                f"the extension's own nvcc flag {flag!r} contains 'arch', so "
                "_get_cuda_arch_flags returns no flags and TORCH_CUDA_ARCH_LIST is "
                "ignored entirely",
            )
            return _reading(CPP_EXTENSION, variable, value, src, [finding])
    if not value or value == "native":
        finding = Finding(
            "reject",
            value or "(unset)",
            "unset, empty or 'native' means the visible GPUs; with none visible (a build "
            "container) _get_cuda_arch_flags fails",
        )
        return _reading(
            CPP_EXTENSION,
            variable,
            value,
            src,
            [finding],
            error="IndexError: list index out of range",
        )
    text = value.replace(" ", ";")
    for name, expansion in g.cpp_extension_names:
        text = text.replace(name, expansion)
    valid = set(g.cpp_extension_valid)
    flags: list[str] = []
    findings: list[Finding] = []
    error: str | None = None
    for arch in text.split(";"):
        if arch not in valid:
            findings.append(Finding("reject", arch, _cpp_extension_rule(arch, value, g)))
            error = error or f"ValueError: Unknown CUDA arch ({arch}) or GPU not supported"
            continue
        version = arch.split("+")[0]
        major, minor = version.split(".")
        num = f"{major}{minor}"
        flags.append(f"-gencode=arch=compute_{num},code=sm_{num}")
        if arch.endswith("+PTX"):
            flags.append(f"-gencode=arch=compute_{num},code=compute_{num}")
    flags = sorted(set(flags))
    images = sorted({f.rsplit("code=", 1)[1] for f in flags})
    kept_flags = () if findings else flags
    return _reading(
        CPP_EXTENSION, variable, value, src, findings, images=images, flags=kept_flags, error=error
    )


def _cpp_extension_rule(arch: str, value: str, g: TorchGrammar) -> str:
    listed = "every entry must be one of " + " ".join(g.cpp_extension_supported) + " (+PTX)"
    if arch == "":
        return "an empty entry (a doubled or trailing ';')"
    if "," in arch:
        return "',' is not a separator (only ';' and ' ')"
    if "+PTX+PTX" in arch:
        named = [(n, e) for n, e in g.cpp_extension_names if n + "+PTX" in value]
        how = f" ({named[0][0]} becomes {named[0][1]})" if named else ""
        return "names are replaced as substrings, so NAME+PTX becomes X.Y+PTX+PTX" + how
    if re.fullmatch(r"[0-9]+\.[0-9]+f(\+PTX)?", arch):
        return "family-specific 'f' targets are not accepted"
    if arch.lower().endswith("+ptx") and not arch.endswith("+PTX"):
        return "the suffix is '+PTX', in capitals"
    if any(arch.lower() == n.lower() for n, _ in g.cpp_extension_names):
        return "names are case-sensitive"
    return f"not in torch {g.torch}'s supported list; {listed}"


# CMake CUDA_ARCHITECTURES ------------------------------------------------------------------------

_CMAKE_ARCH = re.compile(r"([0-9]+[af]?)(?:-(real|virtual))?")


def read_cmake(value: str | None, variable: str) -> Reading:
    items = [p for p in (value or "").split(";") if p]
    if not items:
        finding = Finding(
            "reject",
            "(empty)",
            "CUDA_ARCHITECTURES must be non-empty on targets that compile CUDA (policy CMP0104)",
        )
        return _reading(CMAKE, variable, value, CMAKE_DOC, [finding], error="CMP0104")
    if len(items) == 1 and items[0] in ("all", "all-major", "native"):
        finding = Finding(
            "reinterpret",
            items[0],
            f"'{items[0]}' depends on the CMake and CUDA versions or on the build machine's GPUs; "
            "name the targets instead",
        )
        return _reading(CMAKE, variable, value, CMAKE_DOC, [finding])
    if len(items) == 1 and _cmake_false(items[0]):
        finding = Finding(
            "ignore",
            items[0],
            "a false value disables CMake's arch flags: nvcc then builds its own default target",
        )
        return _reading(CMAKE, variable, value, CMAKE_DOC, [finding])
    images: list[str] = []
    flags: list[str] = []
    findings: list[Finding] = []
    for item in items:
        m = _CMAKE_ARCH.fullmatch(item)
        if not m:
            findings.append(
                Finding(
                    "reject",
                    item,
                    "entries are NN, NN-real or NN-virtual (NN may end in a or f), separated "
                    "by ';'; CMake stops on anything else",
                )
            )
            continue
        arch, kind = m.group(1), m.group(2)
        codes = {
            None: [f"compute_{arch}", f"sm_{arch}"],
            "real": [f"sm_{arch}"],
            "virtual": [f"compute_{arch}"],
        }[kind]
        images.extend(codes)
        flags.append(f"--generate-code=arch=compute_{arch},code=[{','.join(codes)}]")
    error = f"CUDA_ARCHITECTURES contains {findings[0].entry!r}" if findings else None
    return _reading(
        CMAKE,
        variable,
        value,
        CMAKE_DOC,
        findings,
        images=sorted(set(images)),
        flags=flags,
        error=error,
    )


# nvcc flags ------------------------------------------------------------------------------------

_GENCODE = re.compile(r"arch=(compute_[0-9]+[af]?),code=(.+)")
_CODE = re.compile(r"(sm|compute)_[0-9]+[af]?")


def read_nvcc(value: str | None, variable: str) -> Reading:
    try:
        tokens = shlex.split(value or "")
    except ValueError as exc:
        finding = Finding("reject", value or "", f"not a shell word list ({exc})")
        return _reading(NVCC, variable, value, NVCC_DOC, [finding], error=str(exc))
    images: list[str] = []
    findings: list[Finding] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        arg: str | None = None
        option = token.split("=", 1)[0]
        if option in ("-gencode", "--generate-code", "-arch", "--gpu-architecture"):
            if "=" in token:
                arg = token.split("=", 1)[1]
            elif i + 1 < len(tokens):
                i += 1
                arg = tokens[i]
        if arg is None:
            findings.append(
                Finding(
                    "reject", token, "only -gencode and -arch flags belong in the arch variable"
                )
            )
            i += 1
            continue
        if option in ("-arch", "--gpu-architecture"):
            m = _CODE.fullmatch(arg)
            if not m:
                findings.append(
                    Finding(
                        "reinterpret" if arg in ("native", "all", "all-major") else "reject",
                        token,
                        "-arch takes sm_NN or compute_NN here ('native', 'all' and 'all-major' "
                        "depend on the machine or the toolkit)",
                    )
                )
            elif m.group(1) == "sm":
                images += [arg, arg.replace("sm_", "compute_")]
            else:
                images.append(arg)
        else:
            g = _GENCODE.fullmatch(arg)
            codes = g.group(2).strip("[]\"'").split(",") if g else []
            if not g or not codes or not all(_CODE.fullmatch(c) for c in codes):
                findings.append(
                    Finding("reject", arg, "-gencode takes arch=compute_NN,code=sm_NN|compute_NN")
                )
            else:
                images.extend(codes)
        i += 1
    if not tokens:
        findings.append(
            Finding("ignore", "(empty)", "no flags: nvcc builds its own default target")
        )
    return _reading(
        NVCC, variable, value, NVCC_DOC, findings, images=sorted(set(images)), flags=tokens
    )


# projects ---------------------------------------------------------------------------------------


def read_project(
    value: str | None, p: ProjectGrammar, cuda: CudaVersion | None, variable: str
) -> Reading:
    text = p.default if value is None else value
    items = text.split(p.separator)
    by_entry = {e.entry: e for e in p.entries}
    findings: list[Finding] = []
    for item in items:
        entry = by_entry.get(item)
        if entry is None:
            listed = p.separator.join(e.entry for e in p.entries)
            findings.append(
                Finding(
                    "drop",
                    item,
                    f"{p.name} acts only on the entries {listed}, SASS only; "
                    "anything else adds nothing",
                )
            )
        elif cuda is not None and cuda < entry.min_cuda:
            findings.append(
                Finding("drop", item, f"{p.name} adds {entry.target.sm} only with CUDA >= "
                        f"{entry.min_cuda}")
            )  # fmt: skip
    chosen = [e for e in p.entries if e.entry in items and (cuda is None or cuda >= e.min_cuda)]
    flags = tuple(
        f
        for e in chosen
        for f in ("-gencode", f"arch=compute_{e.target.number},code={e.target.sm}")
    )
    if not chosen:
        findings.append(
            Finding(
                "reject",
                text,
                f"no entry selected: {p.name} adds no -gencode flag, and cpp_extension then "
                "falls back to TORCH_CUDA_ARCH_LIST",
            )
        )
    images = sorted(e.target.sm for e in chosen)
    return _reading(p.name, variable, value, p.source, findings, images=images, flags=flags)


# -- rendering -----------------------------------------------------------------------------------


def nearest(
    consumer: str,
    archs: ArchList,
    *,
    torch: str | None = None,
    cuda: CudaVersion | None = None,
    grammars: Grammars | None = None,
) -> ArchList:
    """The closest list ``consumer`` accepts: PTX-only becomes SASS+PTX, 'f' the plain target,
    and targets it cannot take at all are left out."""
    g = grammars or load_grammars()
    out: list[ArchSpec] = []
    if consumer in (CMAKE, NVCC):
        return archs
    if consumer == CMAKE_FINDCUDA and g.findcuda is not None:
        number = _cmake_regex(g.findcuda.number_regex)
        for s in archs:
            plain = Target(s.target.cc)
            if number.search(plain.dotted):
                out.append(ArchSpec(plain, sass=True, ptx=s.ptx or not s.sass))
        return ArchList.of(out)
    if consumer in g.projects:
        p = g.projects[consumer]
        allowed = {e.target for e in p.entries if cuda is None or cuda >= e.min_cuda}
        for s in archs:
            plain = Target(s.target.cc)
            if plain in allowed:
                out.append(ArchSpec(plain, sass=True, ptx=False))
        return ArchList.of(out)
    tg = g.for_torch(torch)
    supported = set(tg.cpp_extension_supported)
    for s in archs:
        target = s.target
        spec = ArchSpec(target, sass=True, ptx=s.ptx or not s.sass)
        if consumer == CPP_EXTENSION:
            if target.variant is Variant.FAMILY_SPECIFIC:
                target = Target(target.cc)
                spec = ArchSpec(target, sass=True, ptx=spec.ptx)
            if target.dotted not in supported:
                continue
        out.append(spec)
    return ArchList.of(out)


def render(
    consumer: str,
    archs: ArchList,
    *,
    torch: str | None = None,
    cuda: CudaVersion | None = None,
    variable: str | None = None,
    grammars: Grammars | None = None,
    facts: CudaFacts | None = None,
) -> str:
    """``archs`` written for ``consumer``; raises ``ArchListError`` with the nearest it accepts."""
    g, var = _grammar_of(consumer, grammars, variable)
    problem = _render_problem(consumer, archs, g, torch, cuda)
    value = problem[1] if problem[0] is None else ""
    if problem[0] is None:
        reading = read(
            consumer, value, torch=torch, cuda=cuda, variable=var, grammars=g, facts=facts
        )
        if reading.ok and tuple(sorted(reading.images)) == image_names(archs):
            return value
        why = reading.describe() if not reading.ok else f"it would build {reading.describe()}"
        problem = (f"{value!r}: {why}", "")
    near = nearest(consumer, archs, torch=torch, cuda=cuda, grammars=g)
    near_text = _render_problem(consumer, near, g, torch, cuda)[1] if len(near) else ""
    rule_source = _source_of(consumer, g, torch)
    raise ArchListError(
        f"{consumer} ({var}, {rule_source}) cannot take {archs}: {problem[0]}",
        hint=(
            f"nearest list it accepts: {near}"
            + (f" ({var}={near_text})" if near_text and near_text != str(near) else "")
            if len(near)
            else f"it accepts none of these targets; {_accepts(consumer, g, torch)}"
        ),
    )


def _source_of(consumer: str, g: Grammars, torch: str | None) -> str:
    if consumer == CMAKE_FINDCUDA and g.findcuda is not None:
        return f"CMake {g.findcuda.cmake} FindCUDA select_compute_arch.cmake"
    if consumer == TORCH_CMAKE:
        tg = g.for_torch(torch)
        return f"torch {tg.torch} select_compute_arch.cmake"
    if consumer == CPP_EXTENSION:
        tg = g.for_torch(torch)
        return f"torch {tg.torch} cpp_extension._get_cuda_arch_flags"
    if consumer in g.projects:
        return g.projects[consumer].source.split(":")[0]
    return CMAKE_DOC if consumer == CMAKE else NVCC_DOC


def _accepts(consumer: str, g: Grammars, torch: str | None) -> str:
    if consumer == CPP_EXTENSION:
        return "it accepts " + " ".join(g.for_torch(torch).cpp_extension_supported) + " (+PTX)"
    if consumer in g.projects:
        p = g.projects[consumer]
        return "it accepts " + p.separator.join(e.entry for e in p.entries)
    if consumer == CMAKE_FINDCUDA:
        return "it accepts X.Y with a one-digit major (+PTX), e.g. 8.0;9.0"
    return "see docs/building-extensions.md"


def _render_problem(
    consumer: str,
    archs: ArchList,
    g: Grammars,
    torch: str | None,
    cuda: CudaVersion | None,
) -> tuple[str | None, str]:
    """(why not, "") or (None, the value)."""
    if consumer == CMAKE:
        return None, archs.to_cmake()
    if consumer == NVCC:
        return None, " ".join(archs.to_gencode())
    if consumer in g.projects:
        p = g.projects[consumer]
        by_target = {e.target: e for e in p.entries}
        parts: list[str] = []
        for s in archs:
            entry = by_target.get(s.target)
            if s.ptx or not s.sass:
                return f"{p.name} adds no PTX ({s.render()})", ""
            if entry is None:
                return (
                    f"{p.name} has no entry for {s.target.sm} (it acts on "
                    f"{p.separator.join(e.entry for e in p.entries)} only; others are dropped)",
                    "",
                )
            if cuda is not None and cuda < entry.min_cuda:
                return f"{p.name} adds {s.target.sm} only with CUDA >= {entry.min_cuda}", ""
            parts.append(entry.entry)
        return None, p.separator.join(parts)
    tg = g.for_torch(torch)
    parts = []
    for s in archs:
        if not s.sass:
            return f"TORCH_CUDA_ARCH_LIST cannot ask for PTX without SASS ({s.render()})", ""
        findcuda = g.findcuda if consumer == CMAKE_FINDCUDA else None
        if findcuda is not None and not _cmake_regex(findcuda.number_regex).search(s.target.dotted):
            return (
                f"{s.target.dotted} does not match CMake {findcuda.cmake}'s pattern "
                f"{findcuda.number_regex} (one-digit majors, no 'a'/'f'); CMake stops "
                "with 'Unknown CUDA Architecture Name'",
                "",
            )
        if consumer == CPP_EXTENSION:
            if s.target.variant is Variant.FAMILY_SPECIFIC:
                return (
                    f"family-specific 'f' targets are not in its supported list ({s.render()})",
                    "",
                )
            if s.target.dotted not in tg.cpp_extension_supported:
                return f"{s.target.dotted} is not in torch {tg.torch}'s supported list", ""
        parts.append(s.render())
    return None, ";".join(parts)


# -- one list, every consumer ---------------------------------------------------------------------


def parse_arch_list(
    text: str, *, torch: str | None = None, facts: CudaFacts | None = None
) -> ArchList:
    """``ArchList.parse``, and where it refuses, what PyTorch's CMake accepts (``Ampere+PTX``)."""
    try:
        return ArchList.parse(text, facts)
    except ArchListError as exc:
        reading = read(TORCH_CMAKE, text, torch=torch, facts=facts)
        targets = reading.targets() if reading.ok else None
        if targets is None:
            raise exc from None
        return targets


@dataclass(frozen=True)
class ConsumerView:
    """What to set for one consumer, and what it makes of the list as the user wrote it."""

    consumer: str
    variable: str
    source: str
    value: str | None  # the canonical list rendered for this consumer
    refusal: str | None  # why it cannot take the list, with the nearest list it takes
    as_written: Reading | None  # TORCH_CUDA_ARCH_LIST readers: the text itself
    as_written_matches: bool | None  # the text gives exactly the canonical images

    def to_json_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "consumer": self.consumer,
            "variable": self.variable,
            "source": self.source,
            "value": self.value,
            "refusal": self.refusal,
        }
        if self.as_written is not None:
            doc["as_written"] = {
                "value": self.as_written.value,
                "ok": self.as_written.ok,
                "images": list(self.as_written.images),
                "findings": [
                    {"kind": f.kind, "entry": f.entry, "rule": f.rule}
                    for f in self.as_written.findings
                ],
                "error": self.as_written.error,
                "matches_canonical": self.as_written_matches,
            }
        return doc


def consumer_views(
    text: str | None,
    archs: ArchList,
    *,
    torch: str | None = None,
    cuda: CudaVersion | None = None,
    facts: CudaFacts | None = None,
) -> tuple[ConsumerView, ...]:
    g = load_grammars()
    views: list[ConsumerView] = []
    wanted = image_names(archs)
    for consumer in g.consumers:
        variable = g.variable(consumer)
        try:
            value: str | None = render(consumer, archs, torch=torch, cuda=cuda, facts=facts)
            refusal = None
        except ArchListError as exc:
            value, refusal = None, exc.one_line()
        as_written: Reading | None = None
        matches: bool | None = None
        if text is not None and consumer in (TORCH_CMAKE, CPP_EXTENSION):
            as_written = read(consumer, text, torch=torch, cuda=cuda, facts=facts)
            matches = as_written.ok and tuple(sorted(as_written.images)) == wanted
            if as_written.ok and not matches:
                got = " ".join(as_written.images)
                finding = Finding("reinterpret", text, f"it builds {got}, not {' '.join(wanted)}")
                as_written = replace(as_written, findings=(finding,), error=None)
        views.append(
            ConsumerView(
                consumer,
                variable,
                _source_of(consumer, g, torch),
                value,
                refusal,
                as_written,
                matches,
            )
        )
    return tuple(views)
