"""A static look at a project's build files, before any compile: does it hard-code its archs or
read an arch variable of its own, and which environment switches does it read?

Kernel projects often write their ``-gencode`` list into ``setup.py`` (flash-attn style:
``cc_flag.append("arch=compute_80,code=sm_80")``) or a CMake ``CUDA_ARCHITECTURES`` of literal
numbers, and ignore ``TORCH_CUDA_ARCH_LIST``; others read a variable of their own
(``<PROJECT>_CUDA_ARCHS``). Either way the requested list costs a compile it does not steer.
What is found here is a warning in the plan (it cannot be proved from text: a hard-coded list
may sit in a branch that never runs); the gate judges what was built.

Only literals count: ``f"arch=compute_{cc},code=sm_{cc}"`` is built from a value and is not a
hard-coded list. The names of environment variables a build file reads (``os.getenv("X")``,
``os.environ["X"]``, ``"X" in os.environ``, a helper named for the environment given a name
in capitals as DeepSpeed's ``is_env_set("DS_BUILD_OPS")``, CMake's ``$ENV{X}``) are listed as
the project's switches (``FORCE_CUDA``, ``FORCE_ONLY_CUDA``, ...), and so is a name the read
gives through a constant of the project (``os.environ.get(OPS_ENV)`` with ``OPS_ENV`` defined
here or in another module: ``switch_names``). Each switch is said with what becomes of it: set
by the recipe (to what), set by archwheel itself (never advised), not set, and whether its value
reaches the version string or the wheel tag.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from archwheel.verdicts.switch_names import NameResolver, ReadFile

# A literal nvcc target inside a build file: `arch=compute_80,code=sm_80` (one string or after
# -gencode), `-arch=sm_90`, `--gpu-architecture=compute_90`.
_GENCODE = re.compile(r"arch=compute_(\d{2,3}[af]?)\s*,\s*code=\[?(?:sm|compute)_(\d{2,3}[af]?)")
_ARCH_FLAG = re.compile(r"(?:-arch|--gpu-architecture)(?:=|\s+)(?:sm|compute)_(\d{2,3}[af]?)\b")
# CMake: CUDA_ARCHITECTURES followed by literal numbers ("80;90", 80 90, 90a-real).
_CMAKE_ARCHS = re.compile(
    r"CUDA_ARCHITECTURES\s*[\"']?\s*((?:\d{2,3}[af]?(?:-(?:real|virtual))?[;\s\"']*)+)"
)
_PY_ENV = re.compile(
    r"os\.(?:environ\.get|getenv)\(\s*['\"]([A-Za-z_]\w{0,99})['\"]"
    r"|os\.environ\[\s*['\"]([A-Za-z_]\w{0,99})['\"]\s*\]"
    r"|['\"]([A-Za-z_]\w{0,99})['\"]\s+(?:not\s+)?in\s+os\.environ"
    # a project's own helper named for the environment, given a variable's name in capitals:
    # DeepSpeed's is_env_set("DS_BUILD_OPS"), get_env_if_set('DS_BUILD_STRING', ...)
    r"|\b(?i:[a-z_][a-z0-9_]*env[a-z0-9_]*)\(\s*['\"]([A-Z][A-Z0-9_]{1,99})['\"]"
)
# The same reads given a name, not a literal: os.environ.get(OPS_ENV), config.ENV in os.environ.
_NAME = r"([A-Za-z_][\w.]{0,99})"
_PY_ENV_NAMED = re.compile(
    rf"os\.(?:environ\.get|getenv)\(\s*{_NAME}\s*[,)]"
    rf"|os\.environ\[\s*{_NAME}\s*\]"
    rf"|(?<![\w.'\"]){_NAME}\s+(?:not\s+)?in\s+os\.environ"
    rf"|\b(?i:[a-z_][a-z0-9_]*env[a-z0-9_]*)\(\s*{_NAME}\s*[,)]"
)
# What a value may change beyond the build: the version string, the wheel tag.
# the value given to `version` / `__version__` (an assignment, setup's keyword, an append)
_VERSION_WORDS = re.compile(r"\b(?:__version__|version)\s*(?:\+=|=(?!=))", re.IGNORECASE)
_TAG_WORDS = re.compile(
    r"py_limited_api|bdist_wheel|plat_name|python_tag|build_number|abi3|limited_api",
    re.IGNORECASE,
)
_DEF = re.compile(r"^(\s*)def\s+(\w+)")
_ASSIGNED = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]+)?=[^=]")
_CMAKE_ENV = re.compile(r"\$ENV\{([A-Za-z_]\w{0,99})\}")
_ARCH_NAME = re.compile(r"ARCH|GENCODE|\bSMS?\b|_SMS?$|COMPUTE_CAP", re.IGNORECASE)
# Read by the build tooling itself, not the project's own choice.
_TOOLING = frozenset({"TORCH_CUDA_ARCH_LIST", "CUDAARCHS", "CMAKE_CUDA_ARCHITECTURES"})
# Another platform's arch list (AMD's, Intel's, Apple's), never an NVIDIA one: PyTorch reads
# PYTORCH_ROCM_ARCH, TORCH_XPU_ARCH_LIST and CMAKE_OSX_ARCHITECTURES beside its CUDA list.
_OTHER_PLATFORM = re.compile(r"ROCM|HIP|XPU|SYCL|OSX|AMDGPU|GFX|MPS", re.IGNORECASE)
# Read by many build files, and not a switch of the project's.
_GENERIC = frozenset({"HOME", "PATH", "USERPROFILE", "HOMEPATH", "PWD", "USER", "TMPDIR",
                      "LD_LIBRARY_PATH", "PYTHONPATH"})  # fmt: skip
MAX_LINES_SHOWN = 6
MAX_FINDINGS = 20


@dataclass(frozen=True)
class SourceFinding:
    """One thing a build file does that the arch list may not steer."""

    kind: str  # "hard-coded" or "own-variable"
    where: str  # "setup.py:57"
    detail: str

    def line(self) -> str:
        """The finding as the report prints it: where, then what."""
        return f"{self.where} {self.detail}"


@dataclass(frozen=True)
class Switch:
    """One environment variable a build file reads: where, where its name is defined when the
    read gives it through a constant (``via``), and what its value may change beyond the
    build (``changes``: "the version string", "the wheel tag")."""

    name: str
    where: str  # "setup.py:12"
    via: str = ""  # "myext/config.py:3"
    changes: tuple[str, ...] = ()

    def shown(self) -> str:
        """``NAME (setup.py:12)``, with where its name comes from."""
        via = f", its name from {self.via}" if self.via else ""
        return f"{self.name} ({self.where}{via})"


@dataclass(frozen=True)
class SourceCheck:
    """What the build files of one source say about their archs and switches."""

    findings: tuple[SourceFinding, ...]
    switches: tuple[tuple[str, str], ...]  # (variable, where it is first read)
    hard_coded: tuple[str, ...]  # the literal targets found (sm_80, compute_90), sorted
    switch_details: tuple[Switch, ...] = ()  # the switches, with where their names come from

    def rows(self, requested: Iterable[str], *, switches: bool = True) -> list[tuple[str, str]]:
        """Plan rows: the findings, what is hard-coded but not requested, and the switches
        (``switches``: as if neither the recipe nor archwheel set any; see ``switch_row``)."""
        rows: list[tuple[str, str]] = []
        wanted = set(requested)
        for finding in self.findings[:MAX_FINDINGS]:
            rows.append(("source check", finding.line()))
        if len(self.findings) > MAX_FINDINGS:
            rows.append(("source check", f"... and {len(self.findings) - MAX_FINDINGS} more"))
        extra = [t for t in self.hard_coded if t.startswith("sm_") and t not in wanted]
        if extra:
            rows.append(
                (
                    "source check",
                    f"hard-coded targets not requested: {' '.join(extra)} (compiled anyway if "
                    "that code runs; patch the list or use the project's own switch)",
                )
            )
        switch_row = self.switch_row({}, ()) if switches else None
        if switch_row:
            rows.append(switch_row)
        return rows

    def switch_row(
        self, recipe_env: Mapping[str, str], archwheel_env: Collection[str]
    ) -> tuple[str, str] | None:
        """The ``project switches`` row: each switch the build files read, grouped by what
        becomes of it (``recipe_env``: the recipe's ``[build] env``; ``archwheel_env``: the
        variables archwheel sets itself, never advised)."""
        details = self.switch_details or tuple(Switch(n, w) for n, w in self.switches)
        if not details:
            return None
        by_recipe = [s for s in details if s.name in recipe_env]
        by_archwheel = [s for s in details if s.name in archwheel_env and s not in by_recipe]
        changing = [s for s in details if s.changes and s not in by_archwheel]
        unset = [s for s in details if s not in (*by_recipe, *by_archwheel, *changing)]
        parts = []
        if by_recipe:
            shown = (
                f"{s.name}={recipe_env[s.name]!r} ({s.shown()[len(s.name) + 2 :]}"
                for s in by_recipe
            )
            parts.append("set by the recipe: " + _listed(shown))
        if unset:
            parts.append(
                "not set: "
                + _listed(s.shown() for s in unset)
                + ": set in [build] env the one that selects or turns on what you build"
            )
        if by_archwheel:
            parts.append(
                "set by archwheel itself (leave them to it): "
                + _listed(s.shown() for s in by_archwheel)
            )
        for s in changing:
            parts.append(
                f"{s.shown()} changes {' and '.join(s.changes)}"
                + (
                    f": the recipe sets it to {recipe_env[s.name]!r}"
                    if s in by_recipe
                    else ": leave it out of [build] env unless that is meant"
                )
            )
        return ("project switches", "; ".join(parts))


def _listed(items: Iterable[str], most: int = 30) -> str:
    shown = list(items)
    more = f" and {len(shown) - most} more" if len(shown) > most else ""
    return ", ".join(shown[:most]) + more


def _is_python(name: str) -> bool:
    return name.endswith(".py")


def _lines(numbers: list[int]) -> str:
    shown = ",".join(str(n) for n in numbers[:MAX_LINES_SHOWN])
    return shown + (",..." if len(numbers) > MAX_LINES_SHOWN else "")


def check_build_files(
    files: Iterable[tuple[str, str]],
    arch_variable: str,
    *,
    unused: frozenset[tuple[str, int]] = frozenset(),
    read: ReadFile | None = None,
) -> SourceCheck:
    """Look at each ``(relative path, text)`` of a project's build files (the top folder's
    first): one finding per file that hard-codes targets, one per own arch variable read.
    ``unused``: ``(path, line)`` of lists known not to apply to this build (a CMake fallback
    where the build defines the list), left out of the hard-coded targets. ``read``: a project
    file's text by relative path, to follow a switch name defined in another module."""
    findings: list[SourceFinding] = []
    switches: dict[str, Switch] = {}
    targets: set[str] = set()
    for path, text in sorted(files, key=lambda item: (item[0].count("/"), item[0])):
        python = _is_python(path)
        resolver = NameResolver(path, text, read or (lambda _path: None)) if python else None
        lines = text.splitlines()
        coded: dict[str, None] = {}
        coded_lines: list[int] = []
        for number, line in enumerate(lines, 1):
            where = f"{path}:{number}"
            stripped = line.lstrip()
            if stripped.startswith("#"):
                continue
            found = [f"sm_{m.group(2)}" if "code=sm" in m.group(0) or "code=[sm" in m.group(0)
                     else f"compute_{m.group(2)}" for m in _GENCODE.finditer(line)]  # fmt: skip
            found += [f"sm_{m.group(1)}" for m in _ARCH_FLAG.finditer(line)]
            for m in _CMAKE_ARCHS.finditer(line):
                for item in re.findall(r"\d{2,3}[af]?", m.group(1)):
                    found.append(f"sm_{item}")
            if found and (path, number) not in unused:
                targets.update(found)
                coded.update(dict.fromkeys(found))
                coded_lines.append(number)
            names: list[tuple[str, str]] = (
                [(next(g for g in m.groups() if g), "") for m in _PY_ENV.finditer(line)]
                if python
                else [(m.group(1), "") for m in _CMAKE_ENV.finditer(line)]
            )
            if resolver is not None:
                for m in _PY_ENV_NAMED.finditer(line):
                    bound = resolver.resolve(next(g for g in m.groups() if g))
                    if bound is not None:
                        names.append((bound.value, bound.defined))
            for name, via in names:
                if name in _GENERIC:
                    continue
                if name not in switches:
                    changes = _changes(lines, number) if python else ()
                    switches[name] = Switch(name, where, via, changes)
                if (
                    _ARCH_NAME.search(name)
                    and name != arch_variable
                    and name not in _TOOLING
                    and not _OTHER_PLATFORM.search(name)
                    and not name.startswith("ARCHWHEEL_")
                ):
                    findings.append(
                        SourceFinding(
                            "own-variable",
                            where,
                            f"reads its own arch variable {name} (the recipe sets "
                            f"{arch_variable}): set [arch] variable = {name!r} if it is the one",
                        )
                    )
        if coded:
            findings.append(
                SourceFinding(
                    "hard-coded",
                    f"{path}:{_lines(coded_lines)}",
                    f"hard-codes {' '.join(coded)}: the project may build its own list "
                    f"whatever {arch_variable} says",
                )
            )
    return SourceCheck(
        tuple(findings),
        tuple((name, s.where) for name, s in switches.items()),
        tuple(sorted(targets, key=_order)),
        tuple(switches.values()),
    )


def _changes(lines: list[str], number: int) -> tuple[str, ...]:
    """What the value read at line ``number`` may change beyond the build: where the read's
    own line, or a line using the name the value is assigned to, gives it to ``version`` or to a
    wheel-tag setting (``py_limited_api``, ``bdist_wheel`` options, ``plat_name``)."""
    line = lines[number - 1]
    uses: list[tuple[str, re.Pattern[str] | None]] = [(line, None)]
    assigned = _ASSIGNED.match(line)
    if assigned:
        word = re.compile(rf"\b{re.escape(assigned.group(1))}\b")
        uses += [(other, word) for i, other in enumerate(lines, 1) if i != number]
    found = []
    for what, pattern in (("the version string", _VERSION_WORDS), ("the wheel tag", _TAG_WORDS)):
        if any(_feeds(text, word, pattern) for text, word in uses):
            found.append(what)
    if assigned and "the version string" not in found and _returned_as_version(lines, number):
        found.insert(0, "the version string")
    return tuple(found)


def _returned_as_version(lines: list[str], number: int) -> bool:
    """Whether the value read at ``number`` inside a function named for the version
    (causal-conv1d's ``get_package_version``) is part of what it returns."""
    assigned = _ASSIGNED.match(lines[number - 1])
    indent = len(lines[number - 1]) - len(lines[number - 1].lstrip())
    function = next(
        (
            m
            for line in reversed(lines[: number - 1])
            if (m := _DEF.match(line)) and len(m.group(1)) < indent
        ),
        None,
    )
    if assigned is None or function is None or "version" not in function.group(2).lower():
        return False
    word = re.compile(rf"\b{re.escape(assigned.group(1))}\b")
    for line in lines[number:]:
        if line.strip() and len(line) - len(line.lstrip()) <= len(function.group(1)):
            return False  # the function ended
        if line.lstrip().startswith("return") and word.search(line):
            return True
    return False


def _feeds(text: str, word: re.Pattern[str] | None, pattern: re.Pattern[str]) -> bool:
    """Whether ``text`` gives ``word`` (None: the env read on it) to what ``pattern`` names:
    in the expression after the match, up to the next comma."""
    if text.lstrip().startswith("#"):
        return False
    for match in pattern.finditer(text):
        after = text[match.end() :].split(",", 1)[0]
        if word is None and (match.start() < text.find("os.") or "os." in after):
            return True
        if word is not None and word.search(after):
            return True
    return False


def _order(target: str) -> tuple[int, str]:
    """sm_75 before sm_100 (by number), sm_90 before sm_90a, sm_80 before compute_80."""
    kind, _, number = target.partition("_")
    digits = "".join(c for c in number if c.isdigit())
    return int(digits or 0), number + ("0" if kind == "sm" else "1")
