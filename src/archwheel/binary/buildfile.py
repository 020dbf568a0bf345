"""A build's own files as text: the CUDA compile steps of a ``build.ninja`` or a
``compile_commands.json``, each with the device images its nvcc command asks for.

Pure: the caller reads the files (``inspection/build_files.py``) and hands the text here; an
``include``/``subninja`` is read through the callback it passes. Linear in the text: each
logical line is looked at once, each ``$`` once, and only commands that name ``nvcc`` are split
into words.

Ninja's rules, as ninja 1.11 applies them (``manifest_parser.cc``, ``eval_env.cc``):

- ``$$`` is ``$``, ``$ `` a space, ``$:`` a colon, ``$`` at the end of a line joins the next one
  (its leading blanks dropped); ``$name`` and ``${name}`` are variables, any other ``$x`` is an
  error;
- a top-level ``name = value`` and a build's own bindings are expanded where they stand; a
  rule's bindings are expanded for each build that uses it, looking first at ``$in``/``$out``,
  then the build's bindings, then the rule's, then the file's;
- ``include`` reads a file into the same scope, ``subninja`` into a child scope.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType

from archwheel.errors import InputError

MAX_INCLUDE_DEPTH = 16  # include/subninja inside each other
MAX_INCLUDES = 256  # files read through include/subninja
MAX_EXPANSION_DEPTH = 32  # a rule variable naming another naming another ...
MAX_VALUE_CHARS = 4 << 20  # one expanded value (a command line is 10-40 kB in PyTorch's)

# $$, $<space>, $:, ${name}, $name, or an error ($ before anything else).
_DOLLAR = re.compile(r"\$(?:(\$)|( )|(:)|\{([A-Za-z0-9_.-]+)\}|([A-Za-z0-9_-]+)|(.|$))", re.S)
# A path list of a build line: `|@`, `||`, `|`, `:` are separators; a path is everything else up
# to a blank (escapes kept: expanded afterwards).
_PATH_TOKEN = re.compile(r"\|@|\|\||\||:|(?:\$.|[^\s$:|])+", re.S)
# Shell words: quoted parts, escapes and plain characters up to a blank.
_SH_WORD = re.compile(r"""(?:[^\s'"\\]+|'[^']*'|"(?:[^"\\]|\\.)*"|\\.)+""", re.S)
_SH_PART = re.compile(r"""'([^']*)'|"((?:[^"\\]|\\.)*)"|\\(.)|([^'"\\]+)""", re.S)
_SH_SPECIAL = re.compile(r"""[\s'"\\$`;&|<>()*?#~]""")
_SH_OPERATORS = frozenset({"&&", "||", ";", "|", "&"})
# nvcc options that make it compile (a step), not ask it something (nvcc --version).
_COMPILING = frozenset(
    {"-c", "--compile", "-dc", "--device-c", "-dw", "--device-w", "-dlink", "--device-link",
     "-ptx", "--ptx", "-cubin", "--cubin", "-fatbin", "--fatbin", "-lib", "--lib"}
)  # fmt: skip
_LANGUAGE_RULE = re.compile(r"^([A-Za-z]+)_COMPILER__")  # CMake's rule names per language
# CMake's link rules of a shared library or a module (a Python extension), per language
_LINK_RULE = re.compile(r"^[A-Za-z]+_(?:SHARED|MODULE)_LIBRARY_LINKER__")


@dataclasses.dataclass(frozen=True)
class CompileStep:
    """One CUDA compile step: its output, its source, its rule and the nvcc words."""

    output: str
    source: str  # the first explicit input ("" when there is none)
    rule: str
    argv: tuple[str, ...]  # from the nvcc word on (launchers before it dropped)


@dataclasses.dataclass(frozen=True)
class LinkStep:
    """One shared library's (or module's) link step: its output and CMake's LINK_LIBRARIES."""

    output: str
    libraries: tuple[str, ...]  # the words of LINK_LIBRARIES, as the linker gets them


@dataclasses.dataclass(frozen=True)
class BuildSteps:
    """What a build file asks to compile: the CUDA steps, and the other steps by language."""

    cuda: tuple[CompileStep, ...]
    languages: Mapping[str, int]  # CMake's compile rules by language (CUDA, CXX, C, ...)
    builds: int  # every build statement
    problems: tuple[str, ...] = ()  # what could not be read (a file an include names, ...)
    links: tuple[LinkStep, ...] = ()  # the shared libraries' link steps (CMake's rules)


@dataclasses.dataclass
class _Scope:
    values: dict[str, str]
    parent: _Scope | None = None

    def lookup(self, name: str) -> str:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.values:
                return scope.values[name]
            scope = scope.parent
        return ""


@dataclasses.dataclass
class _Rule:
    name: str
    bindings: dict[str, str]  # raw, expanded per build


@dataclasses.dataclass
class _Build:
    outputs: list[str]
    rule: str
    inputs: list[str]
    bindings: dict[str, str]  # expanded
    scope: _Scope
    where: str
    implicit: list[str] = dataclasses.field(default_factory=list)  # after `|`
    order_only: list[str] = dataclasses.field(default_factory=list)  # after `||`
    implicit_outputs: list[str] = dataclasses.field(default_factory=list)


class NinjaError(InputError):
    """A build.ninja archwheel cannot read (a bad ``$`` escape, a rule never declared)."""


def expand(raw: str, lookup: Callable[[str], str], where: str = "build.ninja") -> str:
    """``raw`` with ninja's escapes and variables replaced (``lookup`` answers a variable)."""
    if "$" not in raw:
        return raw

    def one(m: re.Match[str]) -> str:
        dollar, space, colon, braced, name, bad = m.groups()
        if dollar:
            return "$"
        if space:
            return " "
        if colon:
            return ":"
        if braced or name:
            return lookup(braced or name)
        raise NinjaError(f"{where}: bad $-escape {('$' + (bad or ''))!r} (literal $ is $$)")

    value = _DOLLAR.sub(one, raw)
    if len(value) > MAX_VALUE_CHARS:
        raise NinjaError(f"{where}: a value expands past {MAX_VALUE_CHARS} characters")
    return value


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, line) with ``$``-newline continuations joined, comments dropped."""
    lines: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, physical in enumerate(text.split("\n"), 1):
        line = physical.removesuffix("\r")
        if pending:
            line = line.lstrip(" ")
        else:
            start = number
            if line.lstrip(" ").startswith("#"):
                continue
        trailing = len(line) - len(line.rstrip("$"))
        if trailing % 2:  # an odd run of $ at the end: the last one joins the next line
            pending.append(line[:-1])
            continue
        pending.append(line)
        joined = "".join(pending)
        pending = []
        if joined.strip():
            lines.append((start, joined))
    if pending and "".join(pending).strip():
        lines.append((start, "".join(pending)))
    return lines


def shell_quote(path: str) -> str:
    """A path as ninja writes it into ``$in``/``$out`` (single-quoted when it needs it)."""
    if not path or _SH_SPECIAL.search(path):
        return "'" + path.replace("'", "'\\''") + "'"
    return path


def shell_words(command: str) -> tuple[str, ...]:
    """The words ``/bin/sh`` makes of a command (quotes and backslashes removed; ``&&``, ``;``
    and ``|`` stay words of their own when they stand alone)."""
    words: list[str] = []
    for m in _SH_WORD.finditer(command):
        word = m.group(0)
        if "'" not in word and '"' not in word and "\\" not in word:
            words.append(word)
            continue
        parts: list[str] = []
        for p in _SH_PART.finditer(word):
            single, double, escaped, plain = p.groups()
            if single is not None:
                parts.append(single)
            elif double is not None:
                parts.append(re.sub(r'\\([\\"$`])', r"\1", double))
            elif escaped is not None:
                parts.append(escaped)
            else:
                parts.append(plain or "")
        words.append("".join(parts))
    return tuple(words)


def nvcc_words(argv: tuple[str, ...]) -> tuple[str, ...] | None:
    """The words from an ``nvcc`` program on, up to the next shell operator, when they compile
    (``-c``, ``-dc``, ``-dlink`` ...); None when the command runs no compiling nvcc."""
    for i, word in enumerate(argv):
        base = word.rsplit("/", 1)[-1]
        if base not in ("nvcc", "nvcc.exe"):
            continue
        end = i + 1
        while end < len(argv) and argv[end] not in _SH_OPERATORS:
            end += 1
        words = argv[i:end]
        if any(w in _COMPILING for w in words):
            return words
    return None


class _Reader:
    def __init__(self, read_included: Callable[[str], str | None] | None) -> None:
        self.read_included = read_included
        self.rules: dict[str, _Rule] = {"phony": _Rule("phony", {})}
        self.builds: list[_Build] = []
        self.problems: list[str] = []
        self.defaults: list[str] = []
        self.files = 0

    def parse(self, text: str, name: str, scope: _Scope, depth: int) -> None:
        lines = _logical_lines(text)
        i = 0
        while i < len(lines):
            number, line = lines[i]
            where = f"{name}:{number}"
            i += 1
            block: dict[str, str] = {}
            while i < len(lines) and lines[i][1][:1] in (" ", "\t"):
                key, _, value = lines[i][1].strip().partition("=")
                block[key.strip()] = value.lstrip(" ")
                i += 1
            keyword, _, rest = line.partition(" ")
            if line[:1] in (" ", "\t"):
                raise NinjaError(f"{where}: an indented line outside a rule or build")
            if keyword == "rule":
                self.rules[rest.strip()] = _Rule(rest.strip(), block)
            elif keyword == "build":
                self._build(rest, block, scope, where)
            elif keyword in ("include", "subninja"):
                target = expand(rest.strip(), scope.lookup, where)
                child = scope if keyword == "include" else _Scope({}, scope)
                self._include(target, child, depth, where)
            elif keyword == "default":
                self.defaults.extend(
                    expand(t, scope.lookup, where) for t in _PATH_TOKEN.findall(rest)
                )
            elif keyword == "pool":
                continue
            elif "=" in line:
                key, _, value = line.partition("=")
                scope.values[key.strip()] = expand(value.lstrip(" "), scope.lookup, where)
            else:
                raise NinjaError(f"{where}: not a ninja statement: {line[:80]!r}")

    def _include(self, target: str, scope: _Scope, depth: int, where: str) -> None:
        if depth >= MAX_INCLUDE_DEPTH or self.files >= MAX_INCLUDES:
            raise NinjaError(f"{where}: includes nested past {MAX_INCLUDE_DEPTH} or past "
                             f"{MAX_INCLUDES} files")  # fmt: skip
        self.files += 1
        text = self.read_included(target) if self.read_included else None
        if text is None:
            self.problems.append(f"{where}: {target} was not read")
            return
        self.parse(text, target, scope, depth + 1)

    def _build(self, rest: str, block: dict[str, str], scope: _Scope, where: str) -> None:
        tokens = _PATH_TOKEN.findall(rest)
        try:
            colon = tokens.index(":")
        except ValueError:
            raise NinjaError(f"{where}: a build line without ':'") from None
        head = tokens[:colon]
        outputs = head[: head.index("|")] if "|" in head else head
        extra_outputs = head[head.index("|") + 1 :] if "|" in head else []
        after = tokens[colon + 1 :]
        if not after or after[0] in ("|", "||", "|@", ":"):
            raise NinjaError(f"{where}: a build line without a rule")
        rule = after[0]
        lists: dict[str, list[str]] = {"": [], "|": [], "||": [], "|@": []}
        current = ""
        for t in after[1:]:
            if t == ":":
                break
            if t in lists:
                current = t
                continue
            lists[current].append(t)
        look = scope.lookup
        # the build's own bindings are expanded in the file's scope, its paths in the build's
        bindings = {k: expand(v, look, where) for k, v in block.items()}

        def local(name: str) -> str:
            return bindings[name] if name in bindings else look(name)

        def paths(raw: list[str]) -> list[str]:
            return [expand(p, local, where) for p in raw]

        self.builds.append(
            _Build(
                paths(outputs),
                rule,
                paths(lists[""]),
                bindings,
                scope,
                where,
                paths(lists["|"]),
                paths(lists["||"]),
                paths(extra_outputs),
            )
        )

    def command(self, build: _Build) -> str:
        rule = self.rules.get(build.rule)
        if rule is None:
            raise NinjaError(f"{build.where}: unknown build rule {build.rule!r}")
        active: set[str] = set()

        def lookup(name: str) -> str:
            if name == "in":
                return " ".join(shell_quote(p) for p in build.inputs)
            if name == "in_newline":
                return "\n".join(shell_quote(p) for p in build.inputs)
            if name == "out":
                return " ".join(shell_quote(p) for p in build.outputs)
            if name in build.bindings:
                return build.bindings[name]
            if name in rule.bindings:
                if name in active or len(active) >= MAX_EXPANSION_DEPTH:
                    raise NinjaError(f"{build.where}: rule variable {name!r} refers to itself")
                active.add(name)
                try:
                    return expand(rule.bindings[name], lookup, build.where)
                finally:
                    active.discard(name)
            return build.scope.lookup(name)

        return lookup("command")


def read_ninja(
    text: str,
    read_included: Callable[[str], str | None] | None = None,
    name: str = "build.ninja",
) -> BuildSteps:
    """The CUDA compile steps of a ``build.ninja`` (``read_included`` reads the files its
    ``include``/``subninja`` lines name, relative to the build folder: CMake's
    ``CMakeFiles/rules.ninja``)."""
    reader = _Reader(read_included)
    reader.parse(text, name, _Scope({}), 0)
    languages: dict[str, int] = {}
    cuda: list[CompileStep] = []
    links: list[LinkStep] = []
    for build in reader.builds:
        m = _LANGUAGE_RULE.match(build.rule)
        if m:
            languages[m.group(1)] = languages.get(m.group(1), 0) + 1
        if build.rule == "phony":
            continue
        if _LINK_RULE.match(build.rule):
            linked = shell_words(build.bindings.get("LINK_LIBRARIES", ""))
            links.append(LinkStep(" ".join(build.outputs), linked))
        command = reader.command(build)
        if "nvcc" not in command:  # the cheap test first: C++ and codegen steps are most
            continue
        words = nvcc_words(shell_words(command))
        if words is not None:
            source = build.inputs[0] if build.inputs else ""
            cuda.append(CompileStep(" ".join(build.outputs), source, build.rule, words))
    return BuildSteps(
        tuple(cuda), MappingProxyType(languages), len(reader.builds), tuple(reader.problems),
        tuple(links),
    )  # fmt: skip


def read_compile_commands(document: object) -> BuildSteps:
    """The CUDA compile steps of a ``compile_commands.json`` already loaded (a list of
    ``{directory, file, command | arguments, output}``)."""
    if not isinstance(document, list):
        raise InputError("compile_commands.json: expected a list of entries")
    cuda: list[CompileStep] = []
    for index, entry in enumerate(document):
        if not isinstance(entry, dict):
            raise InputError(f"compile_commands.json: entry {index} is not an object")
        arguments = entry.get("arguments")
        if isinstance(arguments, list) and all(isinstance(a, str) for a in arguments):
            argv = tuple(arguments)
        elif isinstance(entry.get("command"), str):
            argv = shell_words(entry["command"])
        else:
            raise InputError(f"compile_commands.json: entry {index} has no command")
        words = nvcc_words(argv)
        if words is not None:
            source, output = entry.get("file", ""), entry.get("output", "")
            cuda.append(
                CompileStep(
                    output if isinstance(output, str) else "",
                    source if isinstance(source, str) else "",
                    "",
                    words,
                )
            )
    return BuildSteps(tuple(cuda), MappingProxyType({}), len(document))


@dataclasses.dataclass(frozen=True)
class StepImages:
    """The device images one nvcc command asks for: ``sm_80``, ``compute_90``, ``lto_90a``."""

    images: frozenset[str]
    problems: tuple[str, ...] = ()  # "-arch=native": not a list that can be proved


_IMAGE = re.compile(r"(sm|compute|lto)_([0-9]{2,3}[af]?)")
# -gencode's value: arch=compute_80,code=sm_80 (code: one name or a [list]; quotes removed)
_GENCODE = re.compile(r"arch=([^,]*)(?:,code=(.*))?", re.S)


def _option(words: tuple[str, ...], i: int, names: tuple[str, ...]) -> tuple[str | None, int]:
    """The value of option ``words[i]`` when it is one of ``names`` (``-x=v`` or ``-x v``)."""
    word = words[i]
    for name in names:
        if word == name:
            return (words[i + 1] if i + 1 < len(words) else ""), i + 2
        if word.startswith(name + "="):
            return word[len(name) + 1 :], i + 1
    return None, i + 1


def nvcc_images(words: tuple[str, ...]) -> StepImages:
    """What an nvcc command compiles for: each ``-gencode arch=A,code=C`` (``code`` a name or a
    ``[list]``), and ``-arch``/``-code`` as nvcc reads them (``-arch=sm_80`` alone is
    ``sm_80`` + ``compute_80``; ``-arch=compute_80`` alone is ``compute_80``)."""
    images: set[str] = set()
    problems: list[str] = []
    archs: list[str] = []
    codes: list[str] = []
    gencodes = 0
    i = 1
    while i < len(words):
        value, after = _option(words, i, ("-gencode", "--generate-code"))
        if value is not None:
            gencodes += 1
            m = _GENCODE.fullmatch(value.replace('"', "").replace("'", ""))
            code = (m.group(2) or m.group(1)) if m else ""
            found = [c.strip() for c in code.strip("[]").split(",") if c.strip()] or [value]
            for c in found:
                (images if _IMAGE.fullmatch(c) else _bad(problems, "-gencode", value)).add(c)
            i = after
            continue
        value, after = _option(words, i, ("-arch", "--gpu-architecture"))
        if value is not None:
            archs.extend(v for v in value.split(",") if v)
            i = after
            continue
        value, after = _option(words, i, ("-code", "--gpu-code"))
        if value is not None:
            codes.extend(v for v in value.split(",") if v)
        i = after
    for arch in archs:
        if codes:
            continue
        m = _IMAGE.fullmatch(arch)
        if m is None:
            problems.append(f"-arch={arch}: not a list of targets that can be proved")
        elif m.group(1) == "sm":
            images.update({arch, f"compute_{m.group(2)}"})
        else:
            images.add(arch)
    for code in codes:
        (images if _IMAGE.fullmatch(code) else _bad(problems, "-code", code)).add(code)
    if not archs and not codes and not gencodes:
        problems.append("no -gencode, -arch or -code: nvcc's default arch")
    return StepImages(frozenset(images), tuple(problems))


def _bad(problems: list[str], option: str, value: str) -> set[str]:
    problems.append(f"{option} {value}: not a target")
    return set()
