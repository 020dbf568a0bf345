"""The build files of a resolved source, read for ``verdicts.source_archs`` before any compile.

Which files: ``setup.py``, ``setup.cfg``, ``pyproject.toml``, ``build.py`` and
``CMakeLists.txt`` up to three folders deep, ``*.cmake`` up to four, and any ``*.py`` at the
top. Bounded: at most ``MAX_FILES`` files of at most ``MAX_FILE_BYTES`` each; a file that cannot
be read is passed over (the build reads it, and says so, if it matters).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from archwheel.effects.files import open_regular
from archwheel.facts.arch import ArchList
from archwheel.facts.arch_readers import image_names
from archwheel.verdicts.source_archs import check_build_files
from archwheel.wheelbuild.compile.parallel import ninja_off_in, own_threads_in
from archwheel.wheelbuild.sources.cmake_project import read_cmake_files

BUILD_FILE_NAMES = frozenset({"setup.py", "setup.cfg", "pyproject.toml", "build.py",
                              "CMakeLists.txt"})  # fmt: skip
MAX_FILES = 200
MAX_FILE_BYTES = 1 << 20


def is_build_file(relative: str) -> bool:
    """Whether the build-file check reads this file: a setup or CMake file near the top."""
    path = PurePosixPath(relative)
    depth = len(path.parts)
    if path.name in BUILD_FILE_NAMES:
        return depth <= 3
    if path.suffix == ".cmake":
        return depth <= 4
    return depth == 1 and path.suffix == ".py"


def read_build_files(root: Path, files: Sequence[str]) -> Iterable[tuple[str, str]]:
    """``(relative path, text)`` of the build files among ``files`` (the source's list)."""
    taken = 0
    for relative in files:
        if taken >= MAX_FILES:
            return
        if not is_build_file(relative):
            continue
        try:
            with open_regular(root / relative) as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
        except OSError:
            continue
        if len(data) > MAX_FILE_BYTES:
            continue
        taken += 1
        yield relative, data.decode("utf-8", errors="replace")


def source_check_rows(
    root: Path, files: Sequence[str], arch_variable: str, requested: ArchList
) -> tuple[tuple[str, str], ...]:
    """The plan's ``source check`` and ``project switches`` rows for one resolved source."""
    return look_at_source(root, files, arch_variable, requested)[0]


def look_at_source(
    root: Path,
    files: Sequence[str],
    arch_variable: str,
    requested: ArchList,
    *,
    consumer: str = "",
    arch_value: str = "",
) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...], tuple[str, ...]]:
    """The plan's source-check rows (with ``consumer``: also what the CMake files do with the
    list, ``cmake_project``), where the build files turn ninja off and where they pass nvcc
    ``--threads`` (both for ``parallel.choose_parallel``), from one read of the build files."""
    build_files = list(read_build_files(root, files))
    cmake = read_cmake_files(build_files, consumer, arch_variable, arch_value) if consumer else None
    unused = frozenset(cmake.unused) if cmake is not None else frozenset()
    check = check_build_files(build_files, arch_variable, unused=unused)
    rows = check.rows(image_names(requested)) + (cmake.rows if cmake is not None else [])
    return tuple(rows), ninja_off_in(build_files), own_threads_in(build_files)
