"""Why a compile failed, read from its output: a cause archwheel knows, and its fix.

A failed build command ends with its last line ("error: command '/usr/bin/g++' failed with exit
code 1", "ninja: build stopped: subcommand failed."), which says nothing of why. The compiler
said it further up. ``classify_compile_failure`` reads the lines a build printed and finds the
first one that matches a cause in ``CAUSES`` (the earliest error is the one the others follow
from), and says, in one sentence each, what went wrong and what to change in the recipe:

- ``c++-standard``: torch's headers refuse a C++ standard older than theirs (``#error C++20 or
  later compatible compiler is required to use ATen.``), named with the ``-std=`` flag the
  compile command passed when the log shows it (a project forcing ``-std=c++17``);
- ``out-of-memory``: a compiler killed (``Killed signal terminated program cc1plus``), or one
  that could not allocate (``virtual memory exhausted``, nvcc's ``out of memory``);
- ``missing-cuda-header``: a header of a CUDA component the toolkit of the build lacks
  (``fatal error: cusparse.h: No such file or directory``), named with the component, its
  ``cuda-toolkit`` extra and its wheel;
- ``host-compiler``: nvcc refuses a host gcc newer than it supports (``#error -- unsupported
  GNU version! gcc versions later than 15 are not supported!``, nvcc 13.0 on sid's gcc 16);
- ``glibc-math``: glibc 2.42 and later declare ``rsqrt`` noexcept, which the math headers of
  nvcc before 13.2 contradict (``exception specification is incompatible with that of previous
  function "rsqrt"``, nvcc 13.0 on sid's glibc 2.43);
- ``nvcc-not-found``: the build looked for nvcc where it is not (``nvcc: not found``, CMake's
  ``No CMAKE_CUDA_COMPILER could be found``, a Python ``FileNotFoundError`` naming nvcc).

Pure: a function of the lines and a ``FailureContext`` (the recipe's toolchain source, its CUDA
major, the torch built against); no file is read. The lines in tests/unit/verdicts/
test_compile_failure.py are real g++, nvcc, sh, bash, CMake and Python output.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

CPP_STANDARD = "c++-standard"
OUT_OF_MEMORY = "out-of-memory"
MISSING_CUDA_HEADER = "missing-cuda-header"
NVCC_NOT_FOUND = "nvcc-not-found"
HOST_COMPILER = "host-compiler"
GLIBC_MATH = "glibc-math"

# Where archwheel's build container has nvcc (plan.py: CUDA_HOME=/usr/local/cuda, on PATH).
CONTAINER_NVCC = "/usr/local/cuda/bin/nvcc"


@dataclass(frozen=True)
class FailureContext:
    """What the fix depends on: how the recipe gets its toolkit and which one."""

    toolchain: str = "pypi"  # the recipe's [toolchain] source: "pypi" or "image"
    cuda_major: int | None = None
    torch: str | None = None  # the torch release the build compiles against, when pinned


@dataclass(frozen=True)
class CompileCause:
    """A known cause of a failed compile: the line that shows it, what it means, the fix."""

    kind: str
    evidence: str  # the output line, stripped
    cause: str  # one sentence: what went wrong
    fix: str  # one sentence: what to change

    def one_line(self) -> str:
        """The cause, the evidence (at most 200 characters) and the fix, as the build's error line
        says them."""
        return f"{self.cause} ({self.evidence[:200]}); fix: {self.fix}"


# -- out of memory ------------------------------------------------------------------------------

OOM_PATTERNS = (
    re.compile(r"Killed signal terminated program (\S+)"),
    re.compile(r"virtual memory exhausted"),
    re.compile(r"std::bad_alloc"),
    re.compile(r"\bout of memory\b", re.IGNORECASE),
    re.compile(r"Cannot allocate memory"),
    re.compile(r"MemoryError"),
    re.compile(r"nvcc error\s*:\s*'(\S+)' died due to signal 9"),
)


def _out_of_memory(line: str, lines: list[str], context: FailureContext) -> CompileCause | None:
    if not any(p.search(line) for p in OOM_PATTERNS):
        return None
    return CompileCause(
        OUT_OF_MEMORY,
        line.strip(),
        "the compile ran out of memory",
        "build with fewer jobs (--jobs), or raise [build] memory_per_job_gib so archwheel "
        "starts fewer jobs for the memory there is",
    )


# -- the C++ standard ---------------------------------------------------------------------------

_STANDARD_ERROR = re.compile(
    r"#error (?:C\+\+(?P<need>\d+) or later compatible compiler is required"
    r"(?: to use (?P<who>[A-Za-z0-9_]+))?"
    r"|You need C\+\+(?P<need_old>\d+) to compile (?P<who_old>[A-Za-z0-9_]+))"
)
# -std=c++17, -std=gnu++17, --std=c++17, -std c++17 (nvcc), /std:c++17 (MSVC)
_STD_FLAG = re.compile(r"(?:^|[\s'\"])(?:--?std[= ]|/std:)(?P<flag>(?:c|gnu)\+\+(?P<v>\w+))")
# The year of each spelling: c++1z is 17, c++2a is 20 (GCC's names before the standard).
_STD_YEAR = MappingProxyType(
    {"98": 1998, "03": 2003, "0x": 2011, "11": 2011, "1y": 2014, "14": 2014, "1z": 2017,
     "17": 2017, "2a": 2020, "20": 2020, "2b": 2023, "23": 2023, "2c": 2026, "26": 2026}
)  # fmt: skip


def _last_standard(line: str) -> tuple[str, int] | None:
    """The ``-std=`` flag a compile command line ends up with (the last one wins)."""
    found = [(m.group("flag"), _STD_YEAR.get(m.group("v"))) for m in _STD_FLAG.finditer(line)]
    known = [(flag, year) for flag, year in found if year is not None]
    return known[-1] if known else None


def _cpp_standard(line: str, lines: list[str], context: FailureContext) -> CompileCause | None:
    match = _STANDARD_ERROR.search(line)
    if match is None:
        return None
    need = int(match.group("need") or match.group("need_old"))
    who = match.group("who") or match.group("who_old") or "PyTorch"
    torch = f"torch {context.torch}" if context.torch else "torch"
    # The compile command that carried a standard too old: the project forcing it.
    forced = None
    for text in lines:
        last = _last_standard(text)
        if last is not None and last[1] < 2000 + need:
            forced = last[0]
    if forced is not None:
        return CompileCause(
            CPP_STANDARD,
            line.strip(),
            f"{torch}'s headers need C++{need} ({who}) and the project compiles with -std={forced}",
            f"change the project's -std={forced} to -std=c++{need} (a [[source.patches]] "
            f"entry in the recipe), or build against a torch whose headers accept {forced}",
        )
    return CompileCause(
        CPP_STANDARD,
        line.strip(),
        f"{torch}'s headers need C++{need} ({who}) and the compiler ran in an older standard "
        "(its default, or the project's CMAKE_CXX_STANDARD)",
        f"have the project compile with -std=c++{need} (CMake: CMAKE_CXX_STANDARD {need}; a "
        "[[source.patches]] entry in the recipe), with a compiler that has it (GCC 11 or newer)",
    )


# -- a header of a CUDA component ---------------------------------------------------------------


@dataclass(frozen=True)
class Component:
    """A CUDA component: its name, its ``cuda-toolkit`` extra, its wheel's name (CUDA 13)."""

    name: str
    extra: str | None  # None: not part of the CUDA toolkit (cuDNN, NCCL)
    wheel: str  # nvidia-cusparse; "-cuNN" is added for CUDA 12 (and for non-toolkit ones)


_CUBLAS = Component("cuBLAS", "cublas", "nvidia-cublas")
_CUDART = Component("the CUDA runtime", "cudart", "nvidia-cuda-runtime")
_CUFFT = Component("cuFFT", "cufft", "nvidia-cufft")
_CURAND = Component("cuRAND", "curand", "nvidia-curand")
_CUSOLVER = Component("cuSOLVER", "cusolver", "nvidia-cusolver")
_CCCL = Component("CCCL (CUB, Thrust, libcu++)", "cccl", "nvidia-cuda-cccl")
_NVTX = Component("NVTX", "nvtx", "nvidia-nvtx")
_NPP = Component("NPP", "npp", "nvidia-npp")

HEADER_COMPONENTS: Mapping[str, Component] = MappingProxyType(
    {
        "cusparse.h": Component("cuSPARSE", "cusparse", "nvidia-cusparse"),
        "cublas.h": _CUBLAS,
        "cublas_v2.h": _CUBLAS,
        "cublas_api.h": _CUBLAS,
        "cublasLt.h": _CUBLAS,
        "cublasXt.h": _CUBLAS,
        "cufft.h": _CUFFT,
        "cufftXt.h": _CUFFT,
        "curand.h": _CURAND,
        "curand_kernel.h": _CURAND,
        "cusolverDn.h": _CUSOLVER,
        "cusolverSp.h": _CUSOLVER,
        "cusolver_common.h": _CUSOLVER,
        "nvrtc.h": Component("NVRTC", "nvrtc", "nvidia-cuda-nvrtc"),
        "nvJitLink.h": Component("nvJitLink", "nvjitlink", "nvidia-nvjitlink"),
        "cupti.h": Component("CUPTI", "cupti", "nvidia-cuda-cupti"),
        "cufile.h": Component("cuFile", "cufile", "nvidia-cufile"),
        "nvToolsExt.h": _NVTX,
        "nvjpeg.h": Component("nvJPEG", "nvjpeg", "nvidia-nvjpeg"),
        "npp.h": _NPP,
        "nvml.h": Component("NVML", "nvml", "nvidia-nvml-dev"),
        "cuda.h": _CUDART,
        "cuda_runtime.h": _CUDART,
        "cuda_runtime_api.h": _CUDART,
        "cuda_fp16.h": _CUDART,
        "cuda_bf16.h": _CUDART,
        "cuda_fp8.h": _CUDART,
        "cudnn.h": Component("cuDNN", None, "nvidia-cudnn"),
        "nccl.h": Component("NCCL", None, "nvidia-nccl"),
        "cusparseLt.h": Component("cuSPARSELt", None, "nvidia-cusparselt"),
        "cutensor.h": Component("cuTENSOR", None, "nvidia-cutensor"),
    }
)
# Headers named by their folder or family: CCCL's (in CUDA 13 under include/cccl/, which nvcc
# searches and a host compiler does not), NVTX 3's, NPP's per-domain headers.
HEADER_FAMILIES: tuple[tuple[re.Pattern[str], Component], ...] = (
    (re.compile(r"(?:cub|thrust|nv)/|cuda/std/"), _CCCL),
    (re.compile(r"nvtx3/"), _NVTX),
    (re.compile(r"npp[a-z]*\.h\Z"), _NPP),
)

_MISSING_HEADER = re.compile(
    r"fatal error: (?:(?P<gcc>[^\s:']+): No such file or directory|'(?P<clang>[^']+)' file "
    r"not found)"
)


def component_of(header: str) -> Component | None:
    """The CUDA component whose header ``header`` (as included: ``cub/cub.cuh``) is."""
    if header in HEADER_COMPONENTS:
        return HEADER_COMPONENTS[header]
    for pattern, component in HEADER_FAMILIES:
        if pattern.match(header):
            return component
    return None


def wheel_name(component: Component, cuda_major: int | None) -> str:
    """The component's wheel for the recipe's CUDA: ``nvidia-cusparse`` (13),
    ``nvidia-cusparse-cu12`` (12); libraries outside the toolkit always carry ``-cuNN``."""
    major = cuda_major or 13
    if component.extra is None or major < 13:
        return f"{component.wheel}-cu{major}"
    return component.wheel


def _missing_header(line: str, lines: list[str], context: FailureContext) -> CompileCause | None:
    match = _MISSING_HEADER.search(line)
    if match is None:
        return None
    header = match.group("gcc") or match.group("clang")
    component = component_of(header)
    if component is None:
        return None
    wheel = wheel_name(component, context.cuda_major)
    if component is _CCCL and (context.cuda_major or 13) >= 13:
        return CompileCause(
            MISSING_CUDA_HEADER,
            line.strip(),
            f"{header} is a header of {component.name}, which CUDA 13 keeps in "
            "$CUDA_HOME/include/cccl: nvcc searches there, a host compiler (g++) does not",
            "compile that file with nvcc, or add -I/usr/local/cuda/include/cccl to the host "
            "compiler's flags (a [[source.patches]] entry, or CXXFLAGS/CFLAGS in [build] env); "
            f'with [toolchain] source = "pypi", {wheel} must be among the toolkit\'s packages',
        )
    where = (
        f"outside the CUDA toolkit: add {wheel} to [build] requirements and point the project "
        "at its include folder, or use a base image that has it"
        if component.extra is None
        else f"add {wheel} (cuda-toolkit extra [{component.extra}]) to [toolchain] pypi_packages"
        if context.toolchain == "pypi" and not context.torch
        else f"with a pinned torch the toolkit is torch's cuda-toolkit pin: add {wheel} to "
        "[toolchain] pypi_packages (installed into the same nvidia/ folder), or build on a "
        'base image whose toolkit has it ([toolchain] source = "image")'
        if context.toolchain == "pypi"
        else f"use a base image whose CUDA toolkit has {component.name} (NVIDIA's apt "
        f"package libNAME-dev-X-Y in [toolchain] system_packages), or [toolchain] source = "
        f'"pypi" with {wheel}'
    )
    return CompileCause(
        MISSING_CUDA_HEADER,
        line.strip(),
        f"{header} is a header of {component.name}, which the build's CUDA toolkit lacks",
        where,
    )


# -- nvcc not found -----------------------------------------------------------------------------

_NVCC_MISSING = (
    # sh: "/bin/sh: 1: nvcc: not found"; bash: "bash: line 1: nvcc: command not found"
    re.compile(r"(?:^|[\s:])(?P<path>(?:/\S*/)?nvcc): (?:command )?not found"),
    # Python's FileNotFoundError / distutils' spawn
    re.compile(r"No such file or directory: '(?P<path>[^']*nvcc)'"),
    re.compile(r"unable to execute '(?P<path>[^']*nvcc)': No such file or directory"),
    # CMake
    re.compile(r"No CMAKE_CUDA_COMPILER could be found"),
    re.compile(r"Could not find compiler set in environment variable CUDACXX"),
    re.compile(r"Could not find nvcc|Failed to find nvcc"),
)


def _nvcc_not_found(line: str, lines: list[str], context: FailureContext) -> CompileCause | None:
    for pattern in _NVCC_MISSING:
        match = pattern.search(line)
        if match is None:
            continue
        path = match.groupdict().get("path")
        if path == CONTAINER_NVCC:
            nvcc = wheel_name(Component("nvcc", "nvcc", "nvidia-cuda-nvcc"), context.cuda_major)
            return CompileCause(
                NVCC_NOT_FOUND,
                line.strip(),
                f"the toolkit of the build has no nvcc at {CONTAINER_NVCC}",
                f'with [toolchain] source = "pypi", keep {nvcc} among [toolchain] '
                'pypi_packages; with source = "image", use a base image whose toolkit is in '
                "/usr/local/cuda",
            )
        where = f" as {path}" if path and "/" in path else ""
        return CompileCause(
            NVCC_NOT_FOUND,
            line.strip(),
            f"the build looked for nvcc{where} and did not find it; archwheel's is "
            f"{CONTAINER_NVCC}, on PATH, with CUDA_HOME=/usr/local/cuda",
            "point the project at it in [build] env (CUDACXX=/usr/local/cuda/bin/nvcc for "
            "CMake, or the project's own variable), or patch a hard-coded path "
            "([[source.patches]])",
        )
    return None


# -- a host compiler nvcc refuses ----------------------------------------------------------------

_UNSUPPORTED_HOST = re.compile(
    r"unsupported (?P<which>GNU|clang) version!.{0,40}?(?:later than|less than) (?P<n>\d{1,3})"
)


def _host_compiler(line: str, lines: list[str], context: FailureContext) -> CompileCause | None:
    match = _UNSUPPORTED_HOST.search(line)
    if match is None:
        return None
    if match.group("which") == "clang":
        fix = "name a clang or gcc this nvcc accepts in [build] env NVCC_CCBIN"
    else:
        newest = match.group("n")
        fix = (
            f'install a gcc it accepts ([toolchain] system_packages = ["g++-{newest}"]) and '
            f'name it in [build] env NVCC_CCBIN = "g++-{newest}", or build on a base with an '
            "older gcc (archwheel does the first itself on its Debian bases for the CUDA "
            "releases it knows)"
        )
    return CompileCause(
        HOST_COMPILER,
        line.strip(),
        "nvcc refuses the image's host compiler: it is newer than this nvcc supports",
        fix,
    )


_RSQRT = re.compile(
    r'exception specification is incompatible with that of previous function "rsqrtf?"'
)


def _glibc_math(line: str, lines: list[str], context: FailureContext) -> CompileCause | None:
    if _RSQRT.search(line) is None:
        return None
    return CompileCause(
        GLIBC_MATH,
        line.strip(),
        "the image's glibc (2.42 or later) declares rsqrt noexcept, and this nvcc's math "
        "headers (before CUDA 13.2) declare it without",
        '[toolchain] cuda = "13.2" or later, or a base image with glibc < 2.42 (Debian trixie)',
    )


# -- the table ----------------------------------------------------------------------------------

Reader = Callable[[str, list[str], FailureContext], CompileCause | None]

CAUSES: tuple[tuple[str, Reader], ...] = (
    (CPP_STANDARD, _cpp_standard),
    (MISSING_CUDA_HEADER, _missing_header),
    (NVCC_NOT_FOUND, _nvcc_not_found),
    (HOST_COMPILER, _host_compiler),
    (GLIBC_MATH, _glibc_math),
    (OUT_OF_MEMORY, _out_of_memory),
)


def classify_compile_failure(
    lines: Iterable[str], context: FailureContext | None = None
) -> CompileCause | None:
    """The known cause of a failed compile shown by the first line of ``lines`` that shows
    one (the earliest error; the later ones follow from it), or None."""
    context = context or FailureContext()
    listed = list(lines)
    for line in listed:
        for _kind, reader in CAUSES:
            found = reader(line, listed, context)
            if found is not None:
                return found
    return None


# -- what to keep of a long build output --------------------------------------------------------

# A line that may show a cause (a cheap test run on every line of the build's output).
_MAY_EXPLAIN = re.compile(
    r"#error|fatal error|not found|No such file or directory|unable to execute|out of memory|"
    r"Killed signal|memory exhausted|bad_alloc|Cannot allocate|MemoryError|died due to signal|"
    r"CMAKE_CUDA_COMPILER|CUDACXX|find nvcc|exception specification",
    re.IGNORECASE,
)
# What EvidenceLines keeps: the first lines that may show a cause, the last that set a C++
# standard, the last lines.
MAX_FIRST_LINES = 200
MAX_STANDARD_LINES = 50
MAX_TAIL_LINES = 400
# Characters of one line kept (a line without an end comes in pieces of 1 MiB: 650 kept lines
# held 650 MiB, and classifying them took a minute); the full log keeps every byte.
MAX_KEPT_LINE = 4096
_SETS_STANDARD = re.compile(r"std[= :](?:c|gnu)\+\+")


def kept_line(line: str) -> str:
    """``line`` as the evidence keeps it: whole up to ``MAX_KEPT_LINE`` characters, else its
    start, `` [...] `` and the last ``-std=`` flag it passes where it passes one past the cut
    (a long compile command sets its standard near its end), then its last 256 characters."""
    if len(line) <= MAX_KEPT_LINE:
        return line
    flag = ""
    if _SETS_STANDARD.search(line, MAX_KEPT_LINE // 2) is not None:
        found = deque(_STD_FLAG.finditer(line, MAX_KEPT_LINE // 2), maxlen=1)  # linear
        flag = f" [...] {found[0].group(0).strip()}" if found else ""
    head = MAX_KEPT_LINE - 256 - len(flag) - 7
    return f"{line[:head]}{flag} [...] {line[-256:]}"


class EvidenceLines:
    """What ``classify_compile_failure`` needs of a build's output, in bounded memory: the
    first lines that may show a cause (a compiler error is often followed by thousands of
    lines of consequences and a Python traceback), the last lines that set a C++ standard
    (the failing compile's command), and the last lines. ``lines()`` gives them in the order
    they came, each once."""

    def __init__(
        self,
        *,
        first: int = MAX_FIRST_LINES,
        standards: int = MAX_STANDARD_LINES,
        tail: int = MAX_TAIL_LINES,
    ) -> None:
        self._first: list[tuple[int, str]] = []
        self._first_max = first
        self._standards: deque[tuple[int, str]] = deque(maxlen=standards)
        self._tail: deque[tuple[int, str]] = deque(maxlen=tail)
        self._count = 0

    def add(self, line: str) -> None:
        """One line of output, as it came; kept cut to ``MAX_KEPT_LINE`` (``kept_line``)."""
        line = kept_line(line)
        item = (self._count, line)
        self._count += 1
        self._tail.append(item)
        if len(self._first) < self._first_max and _MAY_EXPLAIN.search(line):
            self._first.append(item)
        if _SETS_STANDARD.search(line):
            self._standards.append(item)

    def lines(self) -> list[str]:
        """The lines kept, each once, in the order they came."""
        kept = dict((*self._first, *self._standards, *self._tail))
        return [kept[index] for index in sorted(kept)]
