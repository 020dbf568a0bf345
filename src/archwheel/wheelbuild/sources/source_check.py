"""The build files of a resolved source, read for ``verdicts.source_archs`` before any compile.

Which files: ``setup.py``, ``setup.cfg``, ``pyproject.toml``, ``build.py`` and
``CMakeLists.txt`` up to three folders deep, ``*.cmake`` up to four, and any ``*.py`` at the
top. Bounded: at most ``MAX_FILES`` files of at most ``MAX_FILE_BYTES`` each; a file that cannot
be read is passed over (the build reads it, and says so, if it matters). For
``torch.ops.load_library`` (``verdicts.op_libraries``): the package's ``*.py`` files that
spell ``load_library`` and the C++/CUDA sources that spell ``TORCH_LIBRARY``, outside test and
benchmark folders, as bounded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from archwheel.effects.files import open_regular
from archwheel.facts.arch import ArchList
from archwheel.facts.arch_readers import image_names
from archwheel.verdicts.builder_selection import read_builder_selection
from archwheel.verdicts.module_selection import ModuleSelection, read_selection
from archwheel.verdicts.op_libraries import OperatorLibraries, find_operator_libraries
from archwheel.verdicts.source_archs import SourceCheck, check_build_files
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


_CXX_SUFFIXES = frozenset({".cpp", ".cc", ".cxx", ".cu", ".c++"})


def _read_spelling(
    root: Path, files: Sequence[str], suffixes: frozenset[str], word: bytes
) -> Iterable[tuple[str, str]]:
    """``(relative path, text)`` of the files among ``files`` with one of ``suffixes`` that
    contain ``word``, outside test and benchmark folders (bounded as the build files are)."""
    taken = 0
    for relative in files:
        path = PurePosixPath(relative)
        if taken >= MAX_FILES or path.suffix not in suffixes:
            continue
        if any(part.startswith(("test", "bench")) for part in path.parts[:-1]):
            continue
        try:
            with open_regular(root / relative) as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
        except OSError:
            continue
        if len(data) > MAX_FILE_BYTES or word not in data:
            continue
        taken += 1
        yield relative, data.decode("utf-8", errors="replace")


def look_for_operator_libraries(root: Path, files: Sequence[str]) -> OperatorLibraries | None:
    """The project's ``torch.ops.load_library`` calls and operator namespaces (None: none)."""
    python = list(_read_spelling(root, files, frozenset({".py"}), b"load_library"))
    if not python:
        return None
    return find_operator_libraries(
        python, _read_spelling(root, files, _CXX_SUFFIXES, b"TORCH_LIBRARY")
    )


class SourceLook(NamedTuple):
    """One read of a source's build files: the plan's source-check rows (the switches row
    apart: ``switch_row`` gives it once the plan says what archwheel sets), where the build
    files turn ninja off, where they pass nvcc ``--threads``, and the check itself."""

    rows: tuple[tuple[str, str], ...]
    ninja_off: tuple[str, ...]
    own_threads: tuple[str, ...]
    check: SourceCheck
    selection: ModuleSelection | None = None  # a switch naming the modules to build


def project_reader(root: Path, files: Sequence[str]) -> Callable[[str], str | None]:
    """A project file's text by relative path, for following a switch name into another module:
    only files of the source's list, at most ``MAX_FILE_BYTES`` (None otherwise)."""
    listed = frozenset(files)

    def read(relative: str) -> str | None:
        if relative not in listed:
            return None
        try:
            with open_regular(root / relative) as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
        except OSError:
            return None
        return None if len(data) > MAX_FILE_BYTES else data.decode("utf-8", errors="replace")

    return read


def look_at_source(
    root: Path,
    files: Sequence[str],
    arch_variable: str,
    requested: ArchList,
    *,
    consumer: str = "",
    arch_value: str = "",
    recipe_env: Mapping[str, str] | None = None,
) -> SourceLook:
    """The plan's source-check rows (with ``consumer``: also what the CMake files do with the
    list, ``cmake_project``), where the build files turn ninja off and where they pass nvcc
    ``--threads`` (both for ``parallel.choose_parallel``), from one read of the build files;
    with the switch that selects the modules, read with the recipe's ``recipe_env``."""
    build_files = list(read_build_files(root, files))
    cmake = read_cmake_files(build_files, consumer, arch_variable, arch_value) if consumer else None
    unused = frozenset(cmake.unused) if cmake is not None else frozenset()
    check = check_build_files(
        build_files, arch_variable, unused=unused, read=project_reader(root, files)
    )
    rows = check.rows(image_names(requested), switches=False) + (
        cmake.rows if cmake is not None else []
    )
    selection = next(
        (
            found
            for path, text in build_files
            if PurePosixPath(path).name == "setup.py"
            and (found := read_selection(path, text, check.switches, recipe_env or {}))
        ),
        None,
    )
    if selection is None:
        selection = next(
            (
                found
                for path, text in build_files
                if PurePosixPath(path).name == "setup.py"
                and (
                    found := read_builder_selection(
                        path, text, files=files, read=project_reader(root, files),
                        switches=check.switches, recipe_env=recipe_env or {},
                    )
                )
            ),
            None,
        )  # fmt: skip
    if selection is not None:
        rows.append(selection.row())
    operators = look_for_operator_libraries(root, files)
    if operators is not None:
        rows.append(operators.row())
    return SourceLook(
        tuple(rows), ninja_off_in(build_files), own_threads_in(build_files), check, selection
    )


def switch_row(
    check: SourceCheck, recipe_env: Mapping[str, str], build_env: Mapping[str, str]
) -> tuple[tuple[str, str], ...]:
    """The plan's ``project switches`` row: what the recipe sets (``recipe_env``), what
    archwheel sets itself (the rest of ``build_env``, the compile step's variables)."""
    row = check.switch_row(recipe_env, frozenset(build_env) - frozenset(recipe_env))
    return (row,) if row is not None else ()
