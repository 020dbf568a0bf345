"""Run cuobjdump over one audited input and compare with archwheel's inventory of it.

The input is what the inventory was scanned from: a wheel (its members are extracted one at a
time into a private temporary folder, under generated names, and deleted after use), a folder
(an installed distribution: its files' root) or a single file. The comparison itself is the pure
``archwheel.verdicts.crosscheck``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from archwheel.binary.model import FatbinEntry, InputInventory
from archwheel.binary.zipread import open_zip
from archwheel.crosscheck.cuobjdump import Cuobjdump
from archwheel.effects.files import (
    ZIP_MEMBER_ERRORS,
    OversizedMember,
    extract_member,
    open_regular,
)
from archwheel.errors import ArchwheelError, ToolError
from archwheel.verdicts.crosscheck import (
    CountRow,
    CrossCheckReport,
    InvisibleRow,
    LibraryFailure,
    compare_library,
    split_library_path,
)

MAX_EXTRACTED_BYTES = 16 << 30
"""A wheel member larger than this (declared) is not extracted for cuobjdump."""

_DEVICE_CODE_MAGICS = (b"\x7fELF", b"!<arch>\n", b"\x50\xed\x55\xba")

_UNREADABLE: tuple[type[Exception], ...] = (*ZIP_MEMBER_ERRORS, ValueError)


@dataclass
class _Accumulator:
    rows: list[CountRow] = field(default_factory=list)
    invisible: list[InvisibleRow] = field(default_factory=list)
    failures: list[LibraryFailure] = field(default_factory=list)
    files: int = 0


Progress = Callable[[str], None]


def crosscheck_input(
    inventory: InputInventory,
    source: Path,
    *,
    tool: Cuobjdump,
    on_progress: Progress | None = None,
) -> CrossCheckReport:
    """Run cuobjdump on every file of ``source`` that may hold device code and compare.

    ``source`` is what ``inventory`` was scanned from: a wheel (its members are extracted one
    at a time into a private temporary directory under generated names, size-checked, and
    deleted after use), a directory (library paths relative to it, e.g. site-packages for an
    installed distribution) or a single file. Files archwheel listed are checked, and so is
    every other file that starts like an ELF, an ``ar`` archive or a fatbin, so that a library
    the scanner missed shows up as a disagreement.
    """
    tool_name = f"cuobjdump {tool.version()} ({tool.executable})"
    by_file: dict[str, dict[str | None, tuple[FatbinEntry, ...]]] = defaultdict(dict)
    for lib in inventory.libraries:
        file_key, member = split_library_path(lib.path)
        by_file[file_key][member] = by_file[file_key].get(member, ()) + lib.entries
    acc = _Accumulator()
    with _open_source(source, inventory) as files:
        for file_key in sorted(set(by_file) | set(files.candidates())):
            if on_progress is not None:
                on_progress(file_key)
            _check_file(file_key, by_file.get(file_key, {}), files, tool, acc)
    return CrossCheckReport(
        source=str(source),
        tool=tool_name,
        files_checked=acc.files,
        rows=tuple(acc.rows),
        invisible=tuple(acc.invisible),
        failures=tuple(acc.failures),
    )


def _check_file(
    file_key: str,
    ours: Mapping[str | None, tuple[FatbinEntry, ...]],
    files: _SourceFiles,
    tool: Cuobjdump,
    acc: _Accumulator,
) -> None:
    try:
        with files.materialize(file_key) as local:
            seen = tool.inventory(local)
    except ArchwheelError as exc:
        acc.failures.append(LibraryFailure(file_key, exc.one_line()))
        return
    acc.files += 1
    archive = seen.layout.kind == "archive"
    members = set(ours) | set(seen.counts) | (set() if archive else {None})
    for member in sorted(members, key=lambda m: m or ""):
        library = file_key if member is None else f"{file_key}({member})"
        if member is not None and not archive:
            acc.failures.append(
                LibraryFailure(library, "archwheel lists a member, but the file is no archive")
            )
            continue
        rows, invisible = compare_library(
            library, ours.get(member, ()), seen.counts.get(member, Counter())
        )
        acc.rows.extend(rows)
        acc.invisible.extend(invisible)


class _SourceFiles(Protocol):
    """The files of one input, named as archwheel names them, readable as local paths."""

    def candidates(self) -> list[str]: ...

    def materialize(self, name: str) -> AbstractContextManager[Path]: ...


class _SingleFile:
    def __init__(self, path: Path, names: Iterable[str]) -> None:
        self.path = path
        self.names = set(names) or {str(path)}

    def candidates(self) -> list[str]:
        return sorted(self.names)

    @contextmanager
    def materialize(self, name: str) -> Iterator[Path]:
        yield self.path


class _DirectoryFiles:
    def __init__(self, root: Path) -> None:
        self.root = root

    def candidates(self) -> list[str]:
        found: list[str] = []
        for folder, dirs, files in os.walk(self.root):  # symlinked folders are not followed
            dirs.sort()
            for name in sorted(files):
                path = Path(folder, name)
                if not path.is_symlink() and _starts_like_device_code(path):
                    found.append(path.relative_to(self.root).as_posix())
        return found

    @contextmanager
    def materialize(self, name: str) -> Iterator[Path]:
        path = self.root / name
        if not path.is_file():
            raise ToolError(f"{name} is not a file under {self.root}")
        yield path


class _WheelFiles:
    """Wheel members, extracted on demand under generated names (never the member's own)."""

    def __init__(self, wheel: Path, workdir: Path) -> None:
        self.wheel = wheel
        self.workdir = workdir
        self._open = ExitStack()
        try:
            handle = self._open.enter_context(open_regular(wheel))
            self.zip = self._open.enter_context(open_zip(handle, wheel))
        except (OSError, zipfile.BadZipFile) as exc:
            self._open.close()
            raise ToolError(f"cannot open {wheel} as a wheel for cuobjdump: {exc}") from exc
        except ArchwheelError:
            self._open.close()
            raise
        self.members: dict[str, list[zipfile.ZipInfo]] = defaultdict(list)
        for info in self.zip.infolist():
            if not info.is_dir():
                self.members[info.filename].append(info)
        self.counter = 0

    def close(self) -> None:
        self._open.close()

    def candidates(self) -> list[str]:
        found = []
        for name, infos in self.members.items():
            try:
                with self.zip.open(infos[-1]) as f:
                    head = f.read(8)
            except _UNREADABLE:
                found.append(name)  # unreadable: let materialize report it
                continue
            if head.startswith(_DEVICE_CODE_MAGICS):
                found.append(name)
        return sorted(found)

    @contextmanager
    def materialize(self, name: str) -> Iterator[Path]:
        infos = self.members.get(name, [])
        if not infos:
            raise ToolError(f"{name} is not a member of {self.wheel.name}")
        if len(infos) > 1:
            raise ToolError(f"{name} appears {len(infos)} times in {self.wheel.name}")
        info = infos[0]
        if info.file_size > MAX_EXTRACTED_BYTES:
            raise ToolError(
                f"{name} declares {info.file_size} bytes, more than the "
                f"{MAX_EXTRACTED_BYTES >> 30} GiB archwheel extracts for cuobjdump"
            )
        free = shutil.disk_usage(self.workdir).free
        if info.file_size > free:
            raise ToolError(
                f"{name} needs {info.file_size >> 20} MiB in {self.workdir}, {free >> 20} free",
                hint="point TMPDIR at a larger disk",
            )
        self.counter += 1
        suffix = "".join(c for c in Path(name).suffix if c.isalnum() or c == ".")[:16]
        local = self.workdir / f"member-{self.counter}{suffix}"
        try:
            self._extract(info, local)
            yield local
        finally:
            local.unlink(missing_ok=True)

    def _extract(self, info: zipfile.ZipInfo, local: Path) -> None:
        try:
            extract_member(self.zip, info, local, exclusive=True)
        except OversizedMember as exc:
            raise ToolError(str(exc)) from exc
        except Exception as exc:  # BadZipFile, OSError, zlib.error, lzma/bz2 errors, EOFError
            raise ToolError(f"cannot extract {info.filename} for cuobjdump: {exc}") from exc


def _starts_like_device_code(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(8).startswith(_DEVICE_CODE_MAGICS)
    except OSError:
        return False


@contextmanager
def _open_source(source: Path, inventory: InputInventory) -> Iterator[_SourceFiles]:
    if source.is_dir():
        yield _DirectoryFiles(source)
        return
    if inventory.input_kind == "wheel" or (source.suffix == ".whl" and source.is_file()):
        with tempfile.TemporaryDirectory(prefix="archwheel-crosscheck-") as workdir:
            files = _WheelFiles(source, Path(workdir))
            try:
                yield files
            finally:
                files.close()
        return
    if not source.is_file():
        raise ToolError(f"cannot cross-check {source}: not a file or directory")
    yield _SingleFile(source, {split_library_path(lib.path)[0] for lib in inventory.libraries})


def source_of(inventory: InputInventory) -> Path:
    """The path the inventory was scanned from (an installed distribution: its files' root)."""
    if inventory.input_kind == "installed":
        root = inventory.metadata.get("root")
        if not root:
            raise ToolError(
                f"cannot cross-check {inventory.source}: the scan did not record where its "
                "files are",
                hint="cross-check the distribution's folder in site-packages instead",
            )
        return Path(root)
    return Path(inventory.source)
