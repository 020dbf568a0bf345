"""Cross-check archwheel's inventory against cuobjdump's (``archwheel audit --cross-check``).

The unit compared is the number of images per (library, section, kind, arch). Both sides are
first brought to what cuobjdump can see:

- a family-specific cubin is listed by cuobjdump without its ``f`` (``sm_103f`` as ``sm_103``),
  so SASS archs are compared with the ``f`` stripped, and each row names archwheel's archs, which
  restore it; PTX keeps its suffix on both sides (cuobjdump prints ``sm_120f.ptx``);
- cuobjdump reads only ``.nv_fatbin`` and ``__nv_relfatbin`` (and files that are themselves a
  fatbin or cubin) and lists no LTO-IR: such images are reported as *invisible to cuobjdump*,
  never as disagreements;
- without ``-all`` cuobjdump skips ``__nv_relfatbin``: the oracle always lists with ``-all`` and
  uses the plain listing only to attribute images to sections.

An empty list of disagreements (and no library cuobjdump failed on) means the two agree.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import zipfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from archwheel.binary.cuobjdump import (
    CUBIN_SECTION,
    EXECUTABLE_FATBIN,
    RAW_FATBIN_SECTION,
    RELOCATABLE_FATBIN,
    Cuobjdump,
    ImageKey,
    ensure_cuobjdump,
)
from archwheel.binary.model import FatbinEntry, InputInventory
from archwheel.errors import EXIT_OK, EXIT_TOOL, EXIT_VERDICT_FAILED, ArchwheelError, ToolError
from archwheel.facts.arch import CodeKind, Target, Variant
from archwheel.verdicts.audit import AuditReport

CROSSCHECK_SCHEMA_VERSION = 1

VISIBLE_SECTIONS = frozenset(
    {EXECUTABLE_FATBIN, RELOCATABLE_FATBIN, RAW_FATBIN_SECTION, CUBIN_SECTION}
)
"""Where cuobjdump looks: the two fatbin sections, and files that are a fatbin or a cubin."""

MAX_EXTRACTED_BYTES = 16 << 30
"""A wheel member larger than this (declared) is not extracted for cuobjdump."""

_DEVICE_CODE_MAGICS = (b"\x7fELF", b"!<arch>\n", b"\x50\xed\x55\xba")
_ARCHIVE_MEMBER = re.compile(r"^(?P<file>.+)\((?P<member>[^()/]+)\)$")
_KIND_ORDER = {CodeKind.SASS: 0, CodeKind.PTX: 1, CodeKind.LTOIR: 2}


# -- results --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CountRow:
    """Image counts of one (library, section, kind, arch) on both sides.

    ``arch`` is the arch as cuobjdump can name it (a SASS ``f`` stripped); ``archwheel_archs``
    are archwheel's own names for the images counted, which restore the ``f``.
    """

    library: str
    section: str
    kind: CodeKind
    arch: str
    archwheel: int
    cuobjdump: int
    archwheel_archs: tuple[str, ...] = ()

    @property
    def agrees(self) -> bool:
        return self.archwheel == self.cuobjdump

    def one_line(self) -> str:
        restored = ""
        if self.archwheel_archs and self.archwheel_archs != (self.arch,):
            restored = f" (archwheel: {', '.join(self.archwheel_archs)})"
        return (
            f"{self.library} [{self.section}] {self.arch}{restored}: archwheel {self.archwheel}, "
            f"cuobjdump {self.cuobjdump}"
        )


@dataclass(frozen=True)
class InvisibleRow:
    """Images archwheel found where cuobjdump cannot look (not a disagreement)."""

    library: str
    section: str
    kind: CodeKind
    arch: str
    count: int
    reason: str

    def one_line(self) -> str:
        return f"{self.library} [{self.section}] {self.arch} x{self.count}: {self.reason}"


@dataclass(frozen=True)
class LibraryFailure:
    """A file cuobjdump could not be run on or could not read: it was not cross-checked."""

    library: str
    message: str

    def one_line(self) -> str:
        return f"{self.library}: {self.message}"


@dataclass(frozen=True)
class CrossCheckReport:
    source: str
    tool: str  # the cuobjdump used and its version
    files_checked: int
    rows: tuple[CountRow, ...]
    invisible: tuple[InvisibleRow, ...] = ()
    failures: tuple[LibraryFailure, ...] = ()

    @property
    def disagreements(self) -> tuple[CountRow, ...]:
        return tuple(r for r in self.rows if not r.agrees)

    @property
    def ok(self) -> bool:
        """Everything cuobjdump can see agrees, and it could read every file."""
        return not self.disagreements and not self.failures

    @property
    def exit_code(self) -> int:
        """0 when ``ok``; 1 with a disagreement; 4 when cuobjdump failed on a file (only)."""
        if self.disagreements:
            return EXIT_VERDICT_FAILED
        return EXIT_TOOL if self.failures else EXIT_OK

    def lines(self, *, quiet: bool = False) -> list[str]:
        """The human report: a summary line (unless quiet), then one line per finding."""
        images = sum(r.cuobjdump for r in self.rows)
        hidden = sum(r.count for r in self.invisible)
        out: list[str] = []
        if self.disagreements:
            out.append(
                f"cross-check of {self.source}: {len(self.disagreements)} disagreements "
                f"with {self.tool}"
            )
        elif not quiet:
            out.append(
                f"cross-check of {self.source}: {self.tool} agrees on {images} images in "
                f"{self.files_checked} files"
                + (f"; {hidden} images are invisible to it" if hidden else "")
            )
        out.extend(f"  disagrees: {r.one_line()}" for r in self.disagreements)
        out.extend(f"  not checked: {f.one_line()}" for f in self.failures)
        if not quiet:
            out.extend(f"  {r.one_line()}" for r in self.invisible)
        return out

    def to_json_dict(self) -> dict[str, Any]:
        def row(r: CountRow) -> dict[str, Any]:
            return {
                "library": r.library, "section": r.section, "kind": r.kind.value,
                "arch": r.arch, "archwheel": r.archwheel, "cuobjdump": r.cuobjdump,
                "archwheel_archs": list(r.archwheel_archs),
            }  # fmt: skip

        def invisible(r: InvisibleRow) -> dict[str, Any]:
            return {
                "library": r.library, "section": r.section, "kind": r.kind.value,
                "arch": r.arch, "count": r.count, "reason": r.reason,
            }  # fmt: skip

        return {
            "schema_version": CROSSCHECK_SCHEMA_VERSION,
            "source": self.source,
            "tool": self.tool,
            "ok": self.ok,
            "files_checked": self.files_checked,
            "disagreements": [row(r) for r in self.disagreements],
            "invisible": [invisible(r) for r in self.invisible],
            "failures": [{"library": f.library, "message": f.message} for f in self.failures],
            "rows": [row(r) for r in self.rows],
        }


# -- the comparison (pure) ------------------------------------------------------------------------


def visible_arch(kind: CodeKind, target: Target) -> str:
    """The arch as cuobjdump names it: a family-specific cubin loses its ``f``."""
    if kind is CodeKind.SASS and target.variant is Variant.FAMILY_SPECIFIC:
        return Target(target.cc).name(kind)
    return target.name(kind)


def invisible_reason(entry: FatbinEntry) -> str | None:
    """Why cuobjdump cannot list ``entry``, or None when it can."""
    if entry.kind is CodeKind.LTOIR:
        return "invisible to cuobjdump: it does not list LTO-IR images"
    if entry.section not in VISIBLE_SECTIONS:
        return (
            f"invisible to cuobjdump: it reads only {EXECUTABLE_FATBIN} and "
            f"{RELOCATABLE_FATBIN}, not {entry.section}"
        )
    return None


def compare_library(
    library: str,
    entries: Iterable[FatbinEntry],
    seen: Mapping[ImageKey, int],
) -> tuple[list[CountRow], list[InvisibleRow]]:
    """Compare archwheel's entries of one library with cuobjdump's counts for it."""
    ours: Counter[ImageKey] = Counter()
    names: dict[ImageKey, set[str]] = defaultdict(set)
    hidden: Counter[tuple[str, CodeKind, str, str]] = Counter()
    for e in entries:
        reason = invisible_reason(e)
        if reason is not None:
            hidden[(e.section, e.kind, e.arch, reason)] += 1
            continue
        key = (e.section, e.kind, visible_arch(e.kind, e.target))
        ours[key] += 1
        names[key].add(e.arch)
    rows = [
        CountRow(
            library=library,
            section=key[0],
            kind=key[1],
            arch=key[2],
            archwheel=ours.get(key, 0),
            cuobjdump=seen.get(key, 0),
            archwheel_archs=tuple(sorted(names.get(key, ()))),
        )
        for key in set(ours) | {k for k, n in seen.items() if n}
    ]
    invisible = [
        InvisibleRow(library, section, kind, arch, count, reason)
        for (section, kind, arch, reason), count in hidden.items()
    ]
    rows.sort(key=lambda r: (r.library, r.section, _KIND_ORDER[r.kind], _arch_order(r.arch)))
    invisible.sort(key=lambda r: (r.library, r.section, _KIND_ORDER[r.kind], _arch_order(r.arch)))
    return rows, invisible


def _arch_order(arch: str) -> tuple[int, str]:
    match = re.search(r"_(\d+)([af]?)$", arch)
    return (int(match.group(1)), match.group(2)) if match else (0, arch)


def split_library_path(path: str) -> tuple[str, str | None]:
    """``torch/lib/libx.a(k.o)`` -> (``torch/lib/libx.a``, ``k.o``); others -> (path, None)."""
    match = _ARCHIVE_MEMBER.match(path)
    if match:
        return match.group("file"), match.group("member")
    return path, None


# -- running it over an input ---------------------------------------------------------------------


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
    tool: Cuobjdump | None = None,
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
    tool = tool or ensure_cuobjdump()
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
        try:
            self.zip = zipfile.ZipFile(wheel)
        except (OSError, zipfile.BadZipFile) as exc:
            raise ToolError(f"cannot open {wheel} as a wheel for cuobjdump: {exc}") from exc
        self.members: dict[str, list[zipfile.ZipInfo]] = defaultdict(list)
        for info in self.zip.infolist():
            if not info.is_dir():
                self.members[info.filename].append(info)
        self.counter = 0

    def close(self) -> None:
        self.zip.close()

    def candidates(self) -> list[str]:
        found = []
        for name, infos in self.members.items():
            try:
                with self.zip.open(infos[-1]) as f:
                    head = f.read(8)
            except (OSError, zipfile.BadZipFile, NotImplementedError, ValueError):
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
        written = 0
        try:
            with self.zip.open(info) as src, local.open("xb") as dst:
                while chunk := src.read(1 << 20):
                    written += len(chunk)
                    if written > info.file_size:  # zipfile stops at the declared size; be sure
                        raise ToolError(f"{info.filename} inflates past its declared size")
                    dst.write(chunk)
        except (zipfile.BadZipFile, OSError, NotImplementedError, ValueError, EOFError) as exc:
            raise ToolError(f"cannot extract {info.filename} for cuobjdump: {exc}") from exc
        except Exception as exc:  # zlib.error, lzma/bz2 errors on corrupt data
            if isinstance(exc, ArchwheelError):
                raise
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


# -- the audit command's --cross-check ------------------------------------------------------------


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


def run_cli_cross_check(reports: Sequence[AuditReport], args: Any) -> int:
    """``archwheel audit --cross-check``: cuobjdump over every audited input.

    Findings go to standard error, one line each, so that ``--format json`` stays parseable.
    Returns the worst ``CrossCheckReport.exit_code``.
    """
    quiet = bool(getattr(args, "quiet", False))
    show_progress = not quiet and sys.stderr.isatty()
    tool = ensure_cuobjdump()
    codes: set[int] = set()
    for report in reports:
        inventory = report.inventory
        source = source_of(inventory)

        def progress(name: str) -> None:
            sys.stderr.write(f"\rcross-check: cuobjdump on {name[-60:]:<60}")
            sys.stderr.flush()

        result = crosscheck_input(
            inventory, source, tool=tool, on_progress=progress if show_progress else None
        )
        if show_progress:
            sys.stderr.write("\r" + " " * 80 + "\r")
        for line in result.lines(quiet=quiet):
            print(line, file=sys.stderr)
        codes.add(result.exit_code)
    if EXIT_VERDICT_FAILED in codes:
        return EXIT_VERDICT_FAILED
    return EXIT_TOOL if EXIT_TOOL in codes else EXIT_OK
