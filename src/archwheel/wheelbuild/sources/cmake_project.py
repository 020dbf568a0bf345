"""A static read of a project's CMake files: what they do with ``CMAKE_CUDA_ARCHITECTURES``.

A CMake project decides its CUDA archs in its own files before archwheel's list can count:
it tests ``ENV{CUDAARCHS}`` or ``CMAKE_CUDA_ARCHITECTURES`` and writes a fallback list where
neither is given (``if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES) set(CMAKE_CUDA_ARCHITECTURES 70 75
80)``), or sets the list whatever is given, or sets a target's ``CUDA_ARCHITECTURES``. The plan
says in one line each what these mean for this build, with the recipe's arch route
(cmake_arch.py): archwheel defines ``CMAKE_CUDA_ARCHITECTURES`` for the ``cmake`` consumer,
so a fallback is not used, and a plain ``set()`` replaces the list. For any other consumer
archwheel defines nothing CMake reads: a project that enables CMake's CUDA language (and does
not take torch's CMake, which reads ``TORCH_CUDA_ARCH_LIST``, nor the recipe's variable) then
builds its fallback or nvcc's default, and the line says the recipe's arch variable is the
cause (the label ``arch variable``; the gate's advice names it from there).

The read is bounded by the build files it is given (``source_check.read_build_files``:
``CMakeLists.txt`` and ``*.cmake``, at most 1 MiB each) and by ``MAX_LINES``; it is a reading
of text, not CMake: a branch that never runs still counts, and what a value expands to is not
computed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from archwheel.facts.arch_consumers import CMAKE
from archwheel.wheelbuild.recipes.cmake_arch import ARCH_VARIABLE, CUDAARCHS, cmake_define

MAX_LINES = 12  # plan rows from one source
CAUSE = "arch variable"  # the label of a line that says the recipe's variable is not read
NOTE = "cmake"

# One token of a CMake file. A bracket comment, a quoted string or a bracket argument that is
# never closed runs to the end of the text (CMake refuses such a file): tried again at each of
# its characters, a hostile file of unclosed ``#[[``, ``"`` or ``[[`` was read in quadratic time.
_TOKEN = re.compile(
    r"(?P<comment>\#\[(?P<ceq>=*)\[(?:.*?\](?P=ceq)\]|.*\Z)|\#[^\n]*)"
    r'|(?P<string>"(?:\\.|[^"\\])*(?:"|\\?\Z))'
    r"|(?P<bracket>\[(?P<beq>=*)\[(?:.*?\](?P=beq)\]|.*\Z))"
    r"|(?P<open>\()|(?P<close>\))"
    r'|(?P<word>[^\s()#"]+)',
    re.DOTALL,
)
_TESTED = re.compile(r"\bCMAKE_CUDA_ARCHITECTURES\b|ENV\{CUDAARCHS\}")
_CUDA_LANGUAGE = frozenset({"project", "enable_language"})
_SET_KEYWORDS = frozenset({"CACHE", "PARENT_SCOPE", "FORCE"})


@dataclass(frozen=True)
class Command:
    """One CMake command: its name (lower case), its arguments (strings unquoted) and line."""

    name: str
    args: tuple[str, ...]
    line: int


def commands(text: str) -> Iterator[Command]:
    """The commands of a CMake file, in order (comments left out)."""
    name: str | None = None
    line = 0
    depth = 0
    args: list[str] = []
    pending: tuple[str, int] | None = None
    counted, newlines = 0, 0  # the line of a token: newlines counted once, up to it
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind == "comment":
            continue
        if depth == 0:
            if kind == "word":
                newlines += text.count("\n", counted, m.start())
                counted = m.start()
                pending = (m.group(), newlines + 1)
            elif kind == "open" and pending is not None:
                name, line = pending[0].lower(), pending[1]
                depth, args, pending = 1, [], None
            else:
                pending = None
            continue
        if kind == "open":
            depth += 1
            args.append("(")
        elif kind == "close":
            depth -= 1
            if depth == 0:
                assert name is not None
                yield Command(name, tuple(args), line)
            else:
                args.append(")")
        elif kind == "string":
            args.append(m.group()[1:-1] or '""')  # an empty string stays visible to tests
        else:
            args.append(m.group())


@dataclass
class _Branch:
    """One open ``if()``: its condition and whether the reader is in its ``else()``."""

    condition: str
    line: int
    negated: bool = False
    # the innermost open branch (this one or one around it) that tests the list, and whether
    # its condition holds where neither is given: found once, when the branch opens
    tested: _Branch | None = None
    negates: bool = False

    @classmethod
    def opened(cls, condition: str, line: int, around: _Branch | None) -> _Branch:
        """The branch of ``if(condition)`` (or an ``elseif``) inside ``around``."""
        branch = cls(condition, line)
        if _TESTED.search(condition):
            branch.tested, branch.negates = branch, _negates(condition)
        elif around is not None:
            branch.tested = around.tested
        return branch


@dataclass
class CmakeReading:
    """What the CMake files of one source do with the arch list, as plan rows."""

    rows: list[tuple[str, str]] = field(default_factory=list)
    cuda_language: str = ""  # where CMake's CUDA language is enabled (file:line)
    torch_cmake: bool = False  # find_package(Torch): torch's CMake reads TORCH_CUDA_ARCH_LIST
    reads_variable: bool = False  # the recipe's variable appears in the CMake files
    fallback: str = ""  # the first fallback list found ("70;75;80")
    # (file, line) of the lists archwheel's own list makes unused: not "hard-coded" findings
    unused: set[tuple[str, int]] = field(default_factory=set)


def _negates(condition: str) -> bool:
    """Whether a test of CMAKE_CUDA_ARCHITECTURES / CUDAARCHS is true where neither is given."""
    upper = condition.upper()
    empty = re.search(r'STREQUAL\s+""', upper) is not None
    return upper.lstrip("( ").startswith("NOT") != empty


def _set_value(args: tuple[str, ...]) -> tuple[str, bool, bool]:
    """``set(VAR v... [CACHE TYPE DOC [FORCE]])``: the value (``;``-joined), cache, force."""
    values: list[str] = []
    for arg in args[1:]:
        if arg in _SET_KEYWORDS:
            break
        values.extend(v for v in arg.split(";") if v and v != '""')
    return ";".join(values), "CACHE" in args[1:], "FORCE" in args[1:]


def _property_value(args: tuple[str, ...]) -> str | None:
    """The value a ``set_property``/``set_target_properties`` gives ``CUDA_ARCHITECTURES``."""
    if "CUDA_ARCHITECTURES" not in args:
        return None
    at = args.index("CUDA_ARCHITECTURES") + 1
    values: list[str] = []
    for arg in args[at:]:
        if arg.isupper() and arg not in ("OFF", "ON") and not arg[:1].isdigit():
            break  # the next property name or keyword
        values.extend(v for v in arg.split(";") if v)
    return ";".join(values)


def read_cmake_files(
    files: Iterable[tuple[str, str]], consumer: str, variable: str, value: str
) -> CmakeReading:
    """What the CMake files among ``files`` (``(relative path, text)``) do with the list of a
    recipe whose arch list reaches ``consumer`` as ``variable=value``: its ``rows`` are the
    plan's."""
    files = list(files)
    cmake_files = sorted(
        ((p, t) for p, t in files if PurePosixPath(p).name == "CMakeLists.txt"
         or p.endswith(".cmake")),
        key=lambda item: (item[0].count("/"), item[0]),
    )  # fmt: skip
    # a setup.py of torch.utils.cpp_extension compiles the CUDA itself (its CMake files, if
    # any, serve something else): CMake is then not why the recipe's variable goes unread
    cpp_extension = any(p.endswith(".py") and "CUDAExtension" in t for p, t in files)
    reading = CmakeReading()
    if not cmake_files:
        return reading
    defined = consumer == CMAKE
    for path, text in cmake_files:
        _read_file(reading, path, text, defined=defined, variable=variable, value=value)
    rows = reading.rows
    cause = (
        reading.cuda_language
        and not reading.torch_cmake
        and not reading.reads_variable
        and not cpp_extension
    )
    if not defined and cause:
        built = (
            f"its fallback {reading.fallback}"
            if reading.fallback
            else "nvcc's default arch (or what the project sets)"
        )
        rows.insert(
            0,
            (
                CAUSE,
                f"{reading.cuda_language} enables CMake's CUDA language, which takes its "
                f"archs from {ARCH_VARIABLE} (a -D option or {CUDAARCHS}), never from "
                f'{variable}: CMake builds {built}; set [arch] format = "cmake"',
            ),
        )
    if len(rows) > MAX_LINES:
        reading.rows = [*rows[:MAX_LINES], (NOTE, f"... and {len(rows) - MAX_LINES} more")]
    return reading


def _read_file(
    reading: CmakeReading, path: str, text: str, *, defined: bool, variable: str, value: str
) -> None:
    stack: list[_Branch] = []
    rows = reading.rows
    for command in commands(text):
        where = f"{path}:{command.line}"
        joined = " ".join(command.args)
        if variable in joined and variable not in (ARCH_VARIABLE, CUDAARCHS):
            reading.reads_variable = True
        if command.name in _CUDA_LANGUAGE and "CUDA" in command.args:
            reading.cuda_language = reading.cuda_language or where
        elif command.name == "find_package" and command.args[:1] == ("Torch",):
            reading.torch_cmake = True
        if command.name in ("if", "elseif"):
            if command.name == "if":
                stack.append(_Branch.opened(joined, command.line, stack[-1] if stack else None))
            elif stack:
                around = stack[-2] if len(stack) > 1 else None
                stack[-1] = _Branch.opened(joined, command.line, around)
            if _TESTED.search(joined):
                rows.append((NOTE, _test_line(where, joined, defined=defined, value=value)))
        elif command.name == "else" and stack:
            stack[-1].negated = True
        elif command.name == "endif" and stack:
            stack.pop()
        elif command.name == "set" and command.args[:1] == (ARCH_VARIABLE,):
            test = stack[-1].tested if stack else None  # no walk down the stack per set()
            fallback = test is not None and test.negates != test.negated
            line = _set_line(where, command.args, fallback=fallback, defined=defined, value=value)
            rows.append((NOTE, line))
            listed = _set_value(command.args)[0]
            if fallback and not reading.fallback and "$" not in listed:
                reading.fallback = listed
            if fallback and defined:
                reading.unused.add((path, command.line))
        elif command.name in ("set_property", "set_target_properties"):
            archs = _property_value(command.args)
            if archs and "$" not in archs:
                rows.append(
                    (
                        NOTE,
                        f"{where} sets its targets' CUDA_ARCHITECTURES to {archs}: those "
                        "targets build that list whatever archwheel passes (patch it: "
                        "[[source.patches]])",
                    )
                )


def _test_line(where: str, condition: str, *, defined: bool, value: str) -> str:
    names = sorted({m.group() for m in _TESTED.finditer(condition)})
    tested = " and ".join(names)
    if defined:
        return (
            f"{where} tests {tested}: archwheel defines it ({cmake_define(value)} in "
            f"CMAKE_ARGS; {CUDAARCHS}={value})"
        )
    return f"{where} tests {tested}: archwheel sets neither (the recipe's format is not cmake)"


def _set_line(
    where: str, args: tuple[str, ...], *, fallback: bool, defined: bool, value: str
) -> str:
    listed, cache, force = _set_value(args)
    head = f"{where} sets {ARCH_VARIABLE} to {listed or 'nothing'}"
    if "$ENV{CUDAARCHS}" in listed:
        return f"{where} sets {ARCH_VARIABLE} from {CUDAARCHS}" + (
            f": archwheel sets {CUDAARCHS}={value}" if defined else ": archwheel does not set it"
        )
    if "$" in listed:
        return f"{head}" + (f": check that it keeps archwheel's {value}" if defined else "")
    if fallback:
        if defined:
            return f"{head} when it is not defined: archwheel defines it, so {listed} is not used"
        return (
            f"{head} when it is not defined: archwheel does not define it (the recipe's format "
            f"is not cmake), so CMake's CUDA targets get {listed}"
        )
    if cache and not force:
        if defined:
            return (
                f"{head} as a cache entry where none is given: {cmake_define(value)} in "
                f"CMAKE_ARGS wins; {CUDAARCHS} alone does not (a plain cmake command needs "
                "$CMAKE_ARGS)"
            )
        return f"{head} as a cache entry where none is given: CMake's CUDA targets get {listed}"
    return (
        f"{head} whatever is given: it replaces "
        + (f"archwheel's {value}" if defined else "any list")
        + " (patch it: [[source.patches]])"
    )
