"""The build's own record of what nvcc compiled: ``nvcc --time FILE``.

Every nvcc of an extension build gets ``--time /build/.archwheel/nvcc-time.csv`` through
``NVCC_APPEND_FLAGS`` (which nvcc reads however it is started: from ``PATH``, by absolute path
as ``torch.utils.cpp_extension`` and CMake call it). nvcc then appends one CSV row
per compilation phase: the source file as it was given, the phase (``cicc``, ``ptxas``, ...),
its output and the arch it worked for (measured with nvcc 13.0; ``--time`` changes no byte of
the object). sccache, the compiler cache, refuses to cache a call with ``--time`` and runs no
whole nvcc for one it takes apart: its launcher (sccache_launcher.py) has nvcc write the same
rows from a ``--dryrun`` of each call and gives sccache the call without the flag, so the
record names the compiles the cache answered too. It says which CUDA sources were compiled,
and for which SASS archs (``ptxas`` rows), whatever build system ran them: ``module_gate``
judges a build by it.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from types import MappingProxyType

from archwheel.effects.files import open_regular

BUILD = "/build"
NVCC_RECORD = f"{BUILD}/.archwheel/nvcc-time.csv"
TIME_FLAG = f"--time {NVCC_RECORD}"
# The header row nvcc 13 writes. nvcc opens a --time file that does not exist with O_TRUNC
# to write it, and one that exists with O_APPEND: two nvcc starting at once on a build with no
# record yet truncated each other's rows (seen: a source compiled and missing from the record,
# the audit gate refusing the wheel). The work folder starts with the header written, so every
# nvcc appends.
RECORD_HEADER = (
    "source file name , phase name , phase input files , phase output file , arch , tool, "
    "metric , unit\n"
)
MAX_RECORD_BYTES = 64 << 20  # the build's own output: read at most this much
MAX_SOURCES = 100_000
CUDA_SUFFIXES = (".cu",)
# nvcc's phases, grouped as the record's summary names them (``--time`` rows, nvcc 13.0):
# the front end (host preprocessing and cudafe++), cicc (device C++ to PTX, once per arch),
# ptxas (PTX to SASS, once per SASS arch), fatbinary (packing and compressing them) and the
# host compile (the host side, with the fatbin embedded). The host compiler's rows carry its
# name: ``gcc (compiling)``, ``g++-15 (compiling)`` with ``NVCC_CCBIN=g++-15`` or ``-ccbin``.
PHASE_GROUPS = ("front end", "cicc", "ptxas", "fatbinary", "host")
# A row of ``nvcc --dryrun --time`` (the cache launcher's, sccache_launcher.py) measures
# nothing: nvcc writes 0.001-0.005 ms. A phase that really ran takes milliseconds at least.
_TIMED_MS = 0.05


def phase_group(phase: str) -> str | None:
    """The summary group of an nvcc phase name (None: the driver, nvlink and the like)."""
    if phase in ("cicc", "ptxas", "fatbinary"):
        return phase
    if phase == "cudafe++" or (phase.endswith(")") and " (preprocessing" in phase):
        return "front end"
    if phase.endswith(" (compiling)"):
        return "host"
    return None


def timed_ms(row: list[str]) -> float | None:
    """The milliseconds a record row measured (``metric``, ``ms``); None for a row that
    measured nothing (a dry run) or is not a time."""
    if len(row) < 8 or row[7].strip() != "ms":
        return None
    text = row[6].strip()
    if not text.isascii() or len(text) > 24:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if _TIMED_MS <= value < 1e9 else None


@dataclass(frozen=True)
class NvccRecord:
    """What nvcc compiled: each source as nvcc was given it -> the SASS archs ptxas made."""

    sources: Mapping[str, frozenset[str]]
    truncated: bool = False  # the record was larger than archwheel reads
    # nvcc's own seconds per phase group (PHASE_GROUPS), summed over the calls it ran whole;
    # calls the compiler cache took are recorded from a dry run and measure nothing (untimed)
    phase_seconds: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    untimed: int = 0  # phase rows that measured nothing

    def describe_phases(self) -> str:
        """``nvcc's phases, seconds summed over its calls: front end 8.1 s, ...`` or why none."""
        if not self.phase_seconds:
            return (
                "nvcc's phases: no times (the compiles went through the compiler cache; "
                "--no-cache measures them)"
            )
        parts = ", ".join(
            f"{group} {self.phase_seconds[group]:.1f} s"
            for group in PHASE_GROUPS
            if group in self.phase_seconds
        )
        extra = f"; {self.untimed} phase(s) through the cache, untimed" if self.untimed else ""
        return f"nvcc's phases, seconds summed over its calls: {parts}{extra}"

    def archs_of(self, source: str) -> frozenset[str]:
        """The SASS archs ptxas made for ``source`` (empty when nvcc never compiled it)."""
        return self.sources.get(source, frozenset())


def parse_nvcc_record(text: str) -> NvccRecord:
    """The rows of ``nvcc --time`` (a header row, then ``source, phase, inputs, output, arch,
    tool, metric, unit``); rows of another shape are passed over (parallel nvcc processes
    append to one file)."""
    found: dict[str, set[str]] = {}
    seconds: dict[str, float] = {}
    untimed = 0
    for line in text.splitlines():
        # The file lies in the build's work folder, which the project's own code can write:
        # a line csv refuses (a NUL, a field past its limit) is passed over, never raised.
        try:
            row = next(csv.reader([line]), [])
        except csv.Error:
            continue
        if len(row) < 5:
            continue
        source, phase, arch = row[0].strip(), row[1].strip(), row[4].strip()
        if not source or source == "source file name":
            continue
        if source not in found and len(found) >= MAX_SOURCES:
            continue
        archs = found.setdefault(source, set())
        if phase == "ptxas" and arch.startswith("sm_"):
            archs.add(arch)
        group = phase_group(phase)
        if group is not None:
            ms = timed_ms(row)
            if ms is None:
                untimed += 1
            else:
                seconds[group] = seconds.get(group, 0.0) + ms / 1000
    return NvccRecord(
        MappingProxyType({k: frozenset(v) for k, v in found.items()}),
        phase_seconds=MappingProxyType(seconds),
        untimed=untimed,
    )


def read_nvcc_record(work: Path) -> NvccRecord | None:
    """The record in a build's work folder; None where nvcc wrote none (no nvcc ran: the
    file holds ``RECORD_HEADER`` alone or is missing, or the build is not one archwheel
    records). A link or a special file there is not followed."""
    return read_record_file(work / NVCC_RECORD.removeprefix(BUILD + "/"))


def read_record_file(path: Path) -> NvccRecord | None:
    """``read_nvcc_record`` of one file (a kept build tree's history: kept_tree.py)."""
    try:
        if path.is_symlink() or not path.exists():
            return None
        with open_regular(path) as handle:
            data = handle.read(MAX_RECORD_BYTES + 1)
    except OSError:
        return None
    record = parse_nvcc_record(data[:MAX_RECORD_BYTES].decode("utf-8", "replace"))
    if len(data) > MAX_RECORD_BYTES:
        return dataclasses.replace(record, truncated=True)
    return record if record.sources else None


# CMake's own compiles while it configures: the compiler-identification and ABI probes
# (CMakeFiles/<version>/CompilerIdCUDA/CMakeCUDACompilerId.cu, CMake's
# Modules/CMakeCUDACompilerABI.cu), check_language and try_compile (CMakeFiles/CheckCUDA,
# CMakeFiles/CMakeScratch, CMakeFiles/CMakeTmp). nvcc records them like the project's sources.
_CMAKE_PROBE_FOLDERS = frozenset({"CMakeFiles", "CompilerIdCUDA", "CMakeScratch", "CMakeTmp"})


def is_cmake_probe(name: str) -> bool:
    """Whether a source nvcc compiled is one of CMake's probes, not the project's."""
    path = PurePosixPath(name)
    return path.name.startswith("CMakeCUDA") or not _CMAKE_PROBE_FOLDERS.isdisjoint(path.parts)


def cuda_sources(files: Iterable[str]) -> tuple[str, ...]:
    """The CUDA sources among a source's files (paths relative to its root)."""
    return tuple(sorted(f for f in files if f.endswith(CUDA_SUFFIXES)))


def compiled(source: str, names: Iterable[str], src_root: str) -> bool:
    """Whether ``source`` (relative to the source root) is one of ``names`` (as nvcc or a cache
    was given them: absolute under ``src_root``, or relative to the compile's folder)."""
    wanted = PurePosixPath(source).parts
    for name in names:
        path = PurePosixPath(name)
        if path.is_absolute():
            try:
                parts = path.relative_to(src_root).parts
            except ValueError:
                continue
            if parts == wanted:
                return True
            continue
        parts = tuple(p for p in path.parts if p != ".")
        # ninja's and CMake's: relative to a build folder (../../csrc/x.cu from inside the
        # source, ../../../build/src/csrc/x.cu from a temporary one): what follows the ..
        while parts[:1] == ("..",):
            parts = parts[1:]
        if ".." in parts or not parts:
            if PurePosixPath(name).name == PurePosixPath(source).name:
                return True  # a path that wanders: judged by its name
            continue
        shorter, longer = sorted((parts, wanted), key=len)
        if longer[-len(shorter) :] == shorter:
            return True
    return False


def never_compiled(
    sources: Iterable[str], names: Iterable[str], src_root: str, exempt: Iterable[str] = ()
) -> tuple[str, ...]:
    """The CUDA sources no nvcc compile and no cache answer names, but those ``exempt``
    (globs) lets go."""
    listed = list(names)
    patterns = list(exempt)
    return tuple(
        s
        for s in sources
        if not any(fnmatchcase(s, p) for p in patterns) and not compiled(s, listed, src_root)
    )
