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
the project's switches (``FORCE_CUDA``, ``FORCE_ONLY_CUDA``, ...): the recipe's ``[build] env``
sets them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

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
_CMAKE_ENV = re.compile(r"\$ENV\{([A-Za-z_]\w{0,99})\}")
_ARCH_NAME = re.compile(r"ARCH|GENCODE|\bSMS?\b|_SMS?$|COMPUTE_CAP", re.IGNORECASE)
# Read by the build tooling itself, not the project's own choice.
_TOOLING = frozenset({"TORCH_CUDA_ARCH_LIST", "CUDAARCHS", "CMAKE_CUDA_ARCHITECTURES"})
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
class SourceCheck:
    """What the build files of one source say about their archs and switches."""

    findings: tuple[SourceFinding, ...]
    switches: tuple[tuple[str, str], ...]  # (variable, where it is first read)
    hard_coded: tuple[str, ...]  # the literal targets found (sm_80, compute_90), sorted

    def rows(self, requested: Iterable[str]) -> list[tuple[str, str]]:
        """Plan rows: the findings, what is hard-coded but not requested, and the switches."""
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
        if self.switches:
            named = ", ".join(f"{name} ({where})" for name, where in self.switches[:30])
            more = f" and {len(self.switches) - 30} more" if len(self.switches) > 30 else ""
            rows.append(("project switches", f"{named}{more}: set them in [build] env"))
        return rows


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
) -> SourceCheck:
    """Look at each ``(relative path, text)`` of a project's build files (the top folder's
    first): one finding per file that hard-codes targets, one per own arch variable read.
    ``unused``: ``(path, line)`` of lists known not to apply to this build (a CMake fallback
    where the build defines the list), left out of the hard-coded targets."""
    findings: list[SourceFinding] = []
    switches: dict[str, str] = {}
    targets: set[str] = set()
    for path, text in sorted(files, key=lambda item: (item[0].count("/"), item[0])):
        python = _is_python(path)
        coded: dict[str, None] = {}
        coded_lines: list[int] = []
        for number, line in enumerate(text.splitlines(), 1):
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
            names = (
                [next(g for g in m.groups() if g) for m in _PY_ENV.finditer(line)]
                if python
                else [m.group(1) for m in _CMAKE_ENV.finditer(line)]
            )
            for name in names:
                if name in _GENERIC:
                    continue
                switches.setdefault(name, where)
                if (
                    _ARCH_NAME.search(name)
                    and name != arch_variable
                    and name not in _TOOLING
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
    return SourceCheck(tuple(findings), tuple(switches.items()), tuple(sorted(targets, key=_order)))


def _order(target: str) -> tuple[int, str]:
    """sm_75 before sm_100 (by number), sm_90 before sm_90a, sm_80 before compute_80."""
    kind, _, number = target.partition("_")
    digits = "".join(c for c in number if c.isdigit())
    return int(digits or 0), number + ("0" if kind == "sm" else "1")
