"""``archwheel build-files``: read a configured build's files and prove its CUDA compile steps.

A build folder (``build.ninja``, else ``compile_commands.json``; a PyTorch source tree's
``build/`` is looked in too) or one of those files is read, with the files ``build.ninja``
includes (CMake's ``CMakeFiles/rules.ninja``) relative to its folder; the nvcc version CMake
found (``CMakeFiles/<cmake>/CMakeCUDACompiler.cmake``) and the PyTorch release of the source
(``version.txt`` beside the build folder) choose which of PyTorch's addition rules apply. The
judgement is ``verdicts.build_files``'s.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from archwheel.binary.buildfile import BuildSteps, read_compile_commands, read_ninja
from archwheel.effects.files import FileTooLarge, read_document, read_regular
from archwheel.errors import InputError
from archwheel.facts.arch import ArchList
from archwheel.facts.pytorch_additions import load_additions
from archwheel.verdicts.build_files import BuildFilesProof, prove_steps

MAX_BUILD_FILE_BYTES = 512 << 20  # one build.ninja or compile_commands.json (PyTorch's: 30 MiB)
MAX_BUILD_FILE_NESTING = 8  # compile_commands.json: a list of objects of lists
MAX_BUILD_TREES = 64  # build.ninja files a finished build's source folder is searched for
MAX_BUILD_TREE_DEPTH = 8  # folders below the source folder searched
_NVCC_VERSION = re.compile(r'set\(CMAKE_CUDA_COMPILER_VERSION "([0-9][0-9.]*)"\)')
_TORCH_VERSION = re.compile(r"\s*([0-9]+\.[0-9]+(?:\.[0-9]+)?)")


def _read_text(path: Path) -> str:
    try:
        return read_regular(path, MAX_BUILD_FILE_BYTES).decode("utf-8", "replace")
    except FileTooLarge:
        raise InputError(f"{path}: larger than {MAX_BUILD_FILE_BYTES} bytes") from None
    except FileNotFoundError:
        raise InputError(f"{path}: does not exist (no such file)") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def find_build_file(path: Path) -> Path:
    """The build file a path names: the file itself, or a folder's ``build.ninja``, else its
    ``compile_commands.json`` (in the folder, then in its ``build/``)."""
    if not path.is_dir():
        if not path.exists():
            raise InputError(f"{path}: does not exist (no such file or folder)")
        return path
    for folder in (path, path / "build"):
        for name in ("build.ninja", "compile_commands.json"):
            if (folder / name).is_file():
                return folder / name
    raise InputError(f"{path}: holds no build.ninja or compile_commands.json (configure first)")


def read_steps(build_file: Path) -> BuildSteps:
    """The CUDA steps of one build file (ninja, or a JSON compilation database)."""
    if build_file.suffix == ".json":
        document, _ = read_document(build_file, MAX_BUILD_FILE_BYTES, MAX_BUILD_FILE_NESTING)
        return read_compile_commands(document)
    folder = build_file.parent

    def included(name: str) -> str | None:
        target = folder / name
        try:
            return _read_text(target)
        except InputError:
            return None

    return read_ninja(_read_text(build_file), included, name=build_file.name)


def nvcc_version(folder: Path) -> str | None:
    """The CUDA compiler version CMake recorded in a build folder, None where it has none."""
    for found in sorted((folder / "CMakeFiles").glob("*/CMakeCUDACompiler.cmake")):
        try:
            m = _NVCC_VERSION.search(_read_text(found))
        except InputError:
            continue
        if m:
            return m.group(1)
    return None


def torch_version(folder: Path) -> str | None:
    """The PyTorch release of the source a build folder sits in (``../version.txt``)."""
    for candidate in (folder.parent / "version.txt", folder / "version.txt"):
        if candidate.is_file():
            try:
                m = _TORCH_VERSION.match(_read_text(candidate))
            except InputError:
                continue
            if m:
                return m.group(1)
    return None


def prove_build_files(
    path: Path, arch_list: ArchList, *, torch: str | None = None, nvcc: str | None = None
) -> BuildFilesProof:
    """Read a build folder or build file and prove each CUDA step carries ``arch_list``
    (plus PyTorch's own additions for ``torch``'s release; found beside the build when not
    given, as is nvcc's version)."""
    build_file = find_build_file(path)
    steps = read_steps(build_file)
    folder = build_file.parent
    return prove_steps(
        steps,
        arch_list,
        load_additions(),
        path=str(build_file),
        torch=torch or torch_version(folder),
        nvcc=nvcc or nvcc_version(folder),
    )


def read_build_trees(root: Path) -> tuple[tuple[str, BuildSteps], ...]:
    """The ``build.ninja`` files a finished build left under ``root`` (its source folder), each
    read, named relative to it: at most ``MAX_BUILD_TREES``, ``MAX_BUILD_TREE_DEPTH`` folders
    deep, links not followed, ``.git`` passed over; one that cannot be read is passed over
    (the audit gate judges the wheel either way)."""
    found: list[tuple[str, BuildSteps]] = []
    base = len(root.parts)
    for folder, folders, files in os.walk(root):
        here = Path(folder)
        folders[:] = sorted(f for f in folders if f != ".git")
        if len(here.parts) - base >= MAX_BUILD_TREE_DEPTH:
            folders[:] = []
        if "build.ninja" not in files or (here / "build.ninja").is_symlink():
            continue
        try:
            steps = read_steps(here / "build.ninja")
        except InputError:
            continue
        if steps.cuda:
            found.append((str((here / "build.ninja").relative_to(root)), steps))
        if len(found) >= MAX_BUILD_TREES:
            break
    return tuple(found)


@dataclass(frozen=True)
class TreeProgress:
    """How far a configured build tree got: its compile steps (build.ninja) that ninja's log
    records as done, at some run of it."""

    compiled: int
    compiles: int
    cuda_compiled: int
    cuda: int

    def line(self) -> str:
        """``1234 of 2011 compile steps done (12 of 341 CUDA)``."""
        return (
            f"{self.compiled} of {self.compiles} compile steps done "
            f"({self.cuda_compiled} of {self.cuda} CUDA)"
        )


def tree_progress(build_folder: Path) -> TreeProgress | None:
    """The progress of the build in ``build_folder`` (a kept tree's, which a container wrote:
    read as any build file, links not followed); None before its configure wrote build.ninja."""
    ninja = build_folder / "build.ninja"
    if ninja.is_symlink() or not ninja.is_file():
        return None
    try:
        steps = read_steps(ninja)
    except InputError:
        return None
    try:
        log = _read_text(build_folder / ".ninja_log")
    except InputError:
        log = ""  # configured, nothing compiled yet
    done = {
        fields[3] for line in log.splitlines() if len(fields := line.split("\t")) >= 5
    }  # start, end, mtime, output, command hash (ninja log v5 and v6)
    cuda = {output for step in steps.cuda for output in step.output.split(" ")}
    compiles = max(sum(steps.languages.values()), len(steps.cuda))  # CMake's rules, or nvcc's
    compiled = min(compiles, sum(1 for output in done if output.endswith(".o")))
    return TreeProgress(compiled, compiles, len(cuda & done), len(steps.cuda))
