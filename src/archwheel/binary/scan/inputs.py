"""What to scan for each kind of input: a path, a wheel, a directory, an installed distribution.

Wheels are streamed member by member (never extracted), text members skipped, big members handed
to the worker pool (``pool``). An installed distribution's files come from its ``RECORD``, listed
by the environment's own interpreter (run through ``archwheel.effects.process``).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from archwheel.binary.model import InputInventory, LibraryInventory, Problem, Severity
from archwheel.binary.scan import pool
from archwheel.binary.scan.binary import (
    BinaryScan,
    InputInflation,
    file_chunks,
    problems_of,
    scan_file,
    scan_stream,
)
from archwheel.binary.scan.pool import scan_members
from archwheel.binary.variantfile import installed_variant_json, wheel_variant_json
from archwheel.binary.zipread import WheelReader
from archwheel.effects.files import (
    NotRegularFile,
    check_regular,
    is_text_list,
    open_regular,
)
from archwheel.errors import InputError, ToolError
from archwheel.facts.documents import load_document

# Wheel members with these suffixes are text or Python, never binaries: not even peeked at.
# (`--all-members` peeks at everything.)
TEXT_SUFFIXES = frozenset(
    (
        ".py .pyi .pyc .pyx .pxd .h .hpp .hxx .cuh .inl .c .cc .cpp .cxx .cu .txt .md .rst "
        ".json .yaml .yml .toml .cfg .ini .html .css .js .csv .typed .cmake .in .pem"
    ).split()
)
DIST_INFO_FILES = frozenset({"METADATA", "RECORD", "WHEEL", "LICENSE", "top_level.txt"})

ProgressCallback = Callable[[int, int, str], None]
"""Called as ``on_progress(done_bytes, total_bytes, current_name)`` by the scanning thread;
worker processes' progress is added in before it is reported."""

LIST_TIMEOUT = 120  # seconds an interpreter gets to list a distribution's files
# The most problem lines one input reports (then "... and N more problems").
MAX_PROBLEMS_PER_INPUT = 200


def _bounded(problems: list[Problem], source: str) -> tuple[Problem, ...]:
    """At most ``MAX_PROBLEMS_PER_INPUT`` problems, duplicates dropped, and a count of the rest."""
    unique = list(dict.fromkeys(problems))
    if len(unique) <= MAX_PROBLEMS_PER_INPUT:
        return tuple(unique)
    kept = unique[:MAX_PROBLEMS_PER_INPUT]
    rest = unique[MAX_PROBLEMS_PER_INPUT:]
    severity = (
        Severity.ERROR if any(p.severity is Severity.ERROR for p in rest) else (Severity.WARNING)
    )
    more = Problem(
        source,
        f"... and {len(rest)} more problems (limit of {MAX_PROBLEMS_PER_INPUT} per input)",
        severity=severity,
    )
    return (*kept, more)


def _is_text_member(name: str) -> bool:
    # Index arithmetic, no splitting: this runs for each of up to 200000 members.
    slash = name.rfind("/")
    dot = name.rfind(".")
    if dot > slash + 1 and name[dot:].lower() in TEXT_SUFFIXES:
        return True
    if ".dist-info/" not in name:
        return False
    base = name[slash + 1 :]
    return name[:slash].endswith(".dist-info") and base in DIST_INFO_FILES


class _Progress:
    """Byte counter that reports to a callback."""

    def __init__(self, total: int, callback: ProgressCallback | None) -> None:
        self.total = total
        self.done = 0
        self.callback = callback

    def set(self, done: int, name: str) -> None:
        if self.callback is not None:
            self.callback(done, self.total, name)

    def add(self, amount: int, name: str) -> None:
        if self.callback is None:
            return
        self.done += amount
        self.callback(self.done, self.total, name)


def _add_named(progress: _Progress, name: str, amount: int) -> None:
    progress.add(amount, name)


class _Found:
    """What the scans of one input's members add up to, in the order they were made."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.libraries: list[LibraryInventory] = []
        self.problems: list[Problem] = []
        self.scanned = 0
        self.bytes_read = 0
        self.digests: dict[str, str] = {}

    def problem(self, message: str, member: str) -> None:
        self.problems.append(Problem(self.source, message, member=member))

    def add(self, member: str, scan: BinaryScan | None) -> None:
        """One member's scan; None: not a binary, nothing to count."""
        if scan is None:
            return
        self.scanned += 1
        self.bytes_read += scan.bytes_read
        if scan.sha256 is not None:
            self.digests[member] = scan.sha256
        self.libraries.extend(scan.libraries)
        self.problems.extend(problems_of(self.source, member, scan))

    def inventory(self, kind: str, metadata: dict[str, str] | None = None) -> InputInventory:
        return InputInventory(
            source=self.source,
            input_kind=kind,
            libraries=tuple(self.libraries),
            problems=_bounded(self.problems, self.source),
            members_scanned=self.scanned,
            bytes_scanned=self.bytes_read,
            metadata=dict(metadata or {}),
            member_digests=self.digests,
        )


def scan_wheel(
    path: Path,
    *,
    on_progress: ProgressCallback | None = None,
    workers: int | None = None,
    all_members: bool = False,
    deep: bool = False,
    digests: bool = False,
    while_waiting: Callable[[WheelReader], None] | None = None,
) -> InputInventory:
    """Scan every binary member of a wheel (any zip), streamed, in parallel; ``digests``: and
    hash each binary member read whole (``InputInventory.member_digests``). ``while_waiting``
    is called once with the archive's reader (its directory read: a caller reads other members
    through it, not parsing the directory again), while the worker processes scan
    (``pool.scan_members``), or after the scan where none runs; not at all when the archive's
    directory cannot be read."""
    found = _Found(str(path))
    reader = WheelReader(path)
    for name, why in reader.name_problems:
        found.problem(why, name)
    members = [
        m for m in reader.members if m.size >= 4 and (all_members or not _is_text_member(m.name))
    ]
    progress = _Progress(sum(m.size for m in members), on_progress)
    results = scan_members(
        path,
        reader.archive_size,
        members,
        progress.set,
        workers,
        deep=deep,
        digest=digests,
        identity=reader.identity,
        while_waiting=(lambda: while_waiting(reader)) if while_waiting is not None else None,
    )

    unscanned = []
    for index, member in enumerate(members):
        result = results.get(index)
        if result is None:
            unscanned.append(member.name)
            continue
        scan, error = result
        if error:
            found.problem(error, member.name)
        elif scan is not None:
            found.add(member.name, scan)
    if unscanned:
        found.problem(
            f"more than {pool.MAX_ENTRIES_PER_INPUT} fatbin entries in this input: "
            f"{len(unscanned)} members not scanned (limit; first: {unscanned[0]})",
            unscanned[0],
        )
    inventory = found.inventory("wheel", {"file": path.name})
    return dataclasses.replace(inventory, variant_json=wheel_variant_json(reader))


def _folders(root: Path) -> Iterator[tuple[str, list[str]]]:
    """``os.walk`` top-down (sorted, links to folders not followed), without recursion: a tree
    thousands of folders deep is walked like any other. Unreadable folders are skipped."""
    pending = [str(root)]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as entries:
                listed = list(entries)
        except OSError:
            continue
        subfolders: list[tuple[str, str]] = []
        files: list[str] = []
        for entry in listed:
            try:
                is_folder = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_folder:
                subfolders.append((entry.name, entry.path))
            else:
                files.append(entry.name)
        yield folder, sorted(files)
        pending.extend(path for _, path in sorted(subfolders, reverse=True))


def _walk(root: Path, found: _Found) -> Iterator[Path]:
    """Regular files under ``root``, sorted, without following directory links.

    A link to a file is followed only when its target lies inside ``root``: a directory input
    never makes archwheel read outside it. FIFOs, devices and sockets are not inputs.
    """
    inside = root.resolve()
    for dirpath, filenames in _folders(root):
        for name in filenames:
            candidate = Path(dirpath) / name
            try:
                status = candidate.lstat()
                if stat.S_ISLNK(status.st_mode):
                    target = candidate.resolve(strict=True)
                    if not target.is_relative_to(inside):
                        found.problems.append(
                            Problem(
                                found.source,
                                "symbolic link to a file outside the input: not followed",
                                member=candidate.relative_to(root).as_posix(),
                                severity=Severity.WARNING,
                            )
                        )
                        continue
                    status = target.stat()
            except (OSError, RuntimeError):
                continue  # a dangling or looping link: nothing to read
            if stat.S_ISREG(status.st_mode):
                yield candidate


def scan_directory(
    root: Path,
    *,
    on_progress: ProgressCallback | None = None,
    kind: str = "directory",
    deep: bool = False,
) -> InputInventory:
    """Scan every binary file under a directory tree."""
    outside = _Found(str(root))
    files = list(_walk(root, outside))
    inventory = scan_files(root, files, on_progress=on_progress, kind=kind, deep=deep)
    if not outside.problems:
        return inventory
    return dataclasses.replace(
        inventory, problems=_bounded([*outside.problems, *inventory.problems], inventory.source)
    )


def scan_files(
    root: Path,
    files: list[Path],
    *,
    on_progress: ProgressCallback | None = None,
    kind: str = "directory",
    label: str | None = None,
    deep: bool = False,
) -> InputInventory:
    """Scan the given files as one input named ``label`` (paths shown relative to ``root``):
    a directory's files, or those an installed distribution lists in its RECORD."""
    found = _Found(label or str(root))
    sizes = {}
    for f in files:
        try:
            status = f.stat()
            check_regular(f, status)
            sizes[f] = status.st_size
        except OSError as exc:
            found.problem(f"cannot read: {exc.strerror or exc}", str(f))
    progress = _Progress(sum(sizes.values()), on_progress)
    inflation = InputInflation(sum(sizes.values()))
    for f, size in sizes.items():
        try:
            relative = f.relative_to(root).as_posix()
        except ValueError:
            relative = str(f)
        try:
            scan = scan_stream(
                relative,
                size,
                file_chunks(f, size),
                functools.partial(_add_named, progress, relative),
                deep=deep,
            )
        except OSError as exc:
            found.problem(f"cannot read: {exc.strerror or exc}", relative)
            continue
        if deep and scan is not None and inflation.passed_with(scan):
            deep = False
        found.add(relative, scan)
    return found.inventory(kind)


def scan_path(
    path: Path | str,
    *,
    on_progress: ProgressCallback | None = None,
    workers: int | None = None,
    all_members: bool = False,
    deep: bool = False,
    digests: bool = False,
    while_waiting: Callable[[WheelReader], None] | None = None,
) -> InputInventory:
    """Scan a wheel (or any zip), a directory, or a single file, detected from the path.

    ``deep`` also decompresses every payload and checks it against its header (slow);
    ``digests`` also hashes a wheel's binary members (``InputInventory.member_digests``);
    ``while_waiting``: see ``scan_wheel`` (other inputs never call it).
    """
    p = Path(path)
    try:
        status = p.stat()
        if stat.S_ISDIR(status.st_mode):
            return scan_directory(p, on_progress=on_progress, deep=deep)
        check_regular(p, status)
        with open_regular(p) as fh:
            head = fh.read(8)
    except FileNotFoundError:
        raise InputError(f"{p}: no such file or directory") from None
    except NotRegularFile as exc:
        raise InputError(f"{p}: {exc.strerror}") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read ({exc.strerror or exc})") from None
    if head.startswith(b"PK") or p.suffix == ".whl":
        return scan_wheel(
            p,
            on_progress=on_progress,
            workers=workers,
            all_members=all_members,
            deep=deep,
            digests=digests,
            while_waiting=while_waiting,
        )
    libraries, problems = scan_file(p, deep=deep)
    if not libraries and not problems:
        problems = [
            Problem(
                str(p),
                "not a wheel, ELF file, ar archive or fatbin: nothing to audit",
                severity=Severity.ERROR,
            )
        ]
    return InputInventory(
        source=str(p),
        input_kind="file",
        libraries=tuple(libraries),
        problems=_bounded(problems, str(p)),
        members_scanned=1 if libraries else 0,
        bytes_scanned=status.st_size,
    )


_FILES_OF_DISTRIBUTION = """
import json, sys
from importlib import metadata
try:
    dist = metadata.distribution(sys.argv[1])
except metadata.PackageNotFoundError:
    print(json.dumps({"error": "not-found"}))
    raise SystemExit(0)
files = [str(dist.locate_file(f)) for f in (dist.files or [])]
print(json.dumps({"name": dist.metadata["Name"], "version": dist.version, "files": files,
                  "roots": [str(dist.locate_file("")), sys.prefix]}))
"""


def scan_installed(
    distribution: str,
    python: str | None = None,
    *,
    on_progress: ProgressCallback | None = None,
    deep: bool = False,
) -> InputInventory:
    """Scan the files an installed distribution recorded (RECORD) in a Python environment."""
    # Here, not at the top: a wheel's scan starts no program (subprocess costs every start).
    from archwheel.effects.process import (
        MAX_ANSWER_NESTING,
        ProgramNotStarted,
        ProgramTimedOut,
        run_program,
    )

    interpreter = python or sys.executable
    try:
        proc = run_program(
            [interpreter, "-c", _FILES_OF_DISTRIBUTION, distribution],
            echo=None,
            check=False,
            timeout=LIST_TIMEOUT,
        )
    except ProgramTimedOut:
        raise ToolError(
            f"{interpreter} took over {LIST_TIMEOUT} s to list {distribution}'s files"
        ) from None
    except ProgramNotStarted as exc:
        raise ToolError(f"python interpreter {interpreter!r} not found ({exc.reason})") from None
    if proc.returncode != 0:
        raise ToolError(
            f"{interpreter} could not list the files of {distribution}: "
            f"{proc.stderr.strip().splitlines()[-1:] or proc.returncode}"
        )
    # The interpreter is the user's: its answer is read as untrusted input.
    unexpected = f"unexpected output from {interpreter} listing {distribution}"
    info = load_document(
        proc.stdout, origin=unexpected, nesting=MAX_ANSWER_NESTING, error=ToolError
    )
    if not isinstance(info, dict):
        raise ToolError(f"{unexpected} (not a JSON object)")
    if info.get("error") == "not-found":
        raise InputError(
            f"{distribution} is not installed in {interpreter}",
            hint="install it, or point --python at the environment that has it",
        )
    listed, listed_roots = info.get("files"), info.get("roots", [])
    if not (is_text_list(listed) and is_text_list(listed_roots)):
        raise ToolError(f"{unexpected} (no lists of files and roots)")
    files = [Path(f) for f in listed]
    roots = [Path(r).resolve() for r in listed_roots]
    outside = [f for f in files if not _inside(f, roots)]
    files = [f for f in files if f not in set(outside)]
    existing = [f for f in files if f.is_file()]
    roots = [f.parent for f in existing]
    root = Path(os.path.commonpath([str(r) for r in roots])) if roots else Path()
    inventory = scan_files(
        root,
        existing,
        on_progress=on_progress,
        kind="installed",
        label=f"{info['name']}=={info['version']} ({interpreter})",
        deep=deep,
    )
    missing = [f for f in files if not f.exists()]
    problems = list(inventory.problems)
    if outside:
        problems.append(
            Problem(
                inventory.source,
                f"{len(outside)} recorded files lie outside the environment (first: "
                f"{outside[0]}): not read",
            )
        )
    if missing:
        problems.append(
            Problem(
                inventory.source,
                f"{len(missing)} recorded files are missing (first: {missing[0]}): "
                "a damaged installation",
            )
        )
    return InputInventory(
        source=inventory.source,
        input_kind="installed",
        libraries=inventory.libraries,
        problems=_bounded(problems, inventory.source),
        members_scanned=inventory.members_scanned,
        bytes_scanned=inventory.bytes_scanned,
        metadata={
            "name": str(info["name"]),
            "version": str(info["version"]),
            "root": str(root),
            "python": interpreter,
        },
        variant_json=installed_variant_json(existing),
    )


def _inside(path: Path, roots: list[Path]) -> bool:
    """Whether ``path`` (links resolved) lies under one of ``roots``; no roots: anywhere."""
    if not roots:
        return True
    try:
        target = path.resolve()
    except (OSError, RuntimeError):
        return False
    return any(target.is_relative_to(root) for root in roots)
