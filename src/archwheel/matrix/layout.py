"""The fixed layout of an index folder, its lock, and the only removals archwheel makes there.

An index folder (``matrix.index``) holds exactly what publishes made::

    INDEX/current -> trees/<id>     a relative symlink, replaced by rename
    INDEX/trees/<id>/               one folder per publish, <id> = UTC time stamp + 8 hex digits
    INDEX/.current-<8 hex>          the temporary link of a swap in progress
    INDEX/.lock                     a regular file, the publishers' flock

An index folder is input too (restored from a CI cache, shared on a volume): what it holds is
checked against that layout, never followed. ``current`` must read ``trees/<id>``, ``trees``
must be a folder and not a link, and the trees removed (a publish's unfinished ones, the
oldest beyond ``KEEP_TREES``) are only entries of ``trees`` whose names are archwheel's tree
names and which are real folders (``lstat``), never what a link leads to. A ``current``
leading elsewhere, a ``trees`` link, or a ``.lock`` that is not a regular file (a FIFO: the
lock was opened for writing and blocked for ever) is a ``UsageError`` naming it, before
anything is removed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

from archwheel.effects.files import kind_of
from archwheel.errors import OutputError, UsageError

CURRENT = "current"
TREES = "trees"
LOCK = ".lock"
KEEP_TREES = 2
# The names archwheel gives what it makes here (new_tree_name, swap): nothing else is removed.
TREE_NAME = re.compile(r"[0-9]{8}T[0-9]{12}Z-[0-9a-f]{8}")
HALF_SWAP = re.compile(r"\." + CURRENT + r"-[0-9a-f]{8}")
_NOT_OURS = "restore the index from a copy, or publish into an empty folder"


def new_tree_name() -> str:
    """A new tree's name: the UTC time (so that names sort by age) and 8 random hex digits."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    return f"{stamp}-{secrets.token_hex(4)}"


def simple_url(index: Path) -> str:
    """The ``--index-url`` of an index folder: ``file:///.../current/simple/``."""
    return (index.resolve() / CURRENT / "simple").as_uri() + "/"


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def current_tree(index: Path) -> Path | None:
    """The tree ``INDEX/current`` names, as ``INDEX/trees/<id>`` (None: no ``current``).

    Only the link archwheel makes is taken: one reading ``trees/<id>`` with a tree's name. A
    link leading anywhere else (an absolute path, ``..``, another folder of the index) or a
    ``current`` that is no link is a ``UsageError``: taken as it was, a ``current`` pointing
    at ``/`` made every tree of the index look unfinished to ``clean``; so is a ``trees`` that
    is not a real folder (``trees_folder``), or a tree that is a link. The tree may be missing
    (see ``published_tree``)."""
    link = index / CURRENT
    status = _lstat(link)
    if status is None:
        return None
    if not stat.S_ISLNK(status.st_mode):
        raise UsageError(
            f"{link} is not a symlink made by archwheel (a {kind_of(status.st_mode)})",
            hint=_NOT_OURS,
        )
    target = str(link.readlink())
    parts = PurePosixPath(target).parts
    if len(parts) != 2 or parts[0] != TREES or not TREE_NAME.fullmatch(parts[1]):
        raise UsageError(
            f"{link} leads to {target[:200]!r}, not to a tree of the index ({TREES}/<id>): "
            "not the link archwheel makes",
            hint=_NOT_OURS,
        )
    trees_folder(index)  # trees/<id> through a trees/ that is a link would lead out too
    tree = index / TREES / parts[1]
    status = _lstat(tree)
    if status is not None and not stat.S_ISDIR(status.st_mode):
        raise UsageError(
            f"{tree}, the tree {link} names, is not a folder made by archwheel "
            f"(a {kind_of(status.st_mode)}): not followed",
            hint=_NOT_OURS,
        )
    return tree


def published_tree(index: Path) -> Path:
    """The tree ``current`` names, which must exist: a ``UsageError`` when the index has no
    ``current`` (nothing was published there) or its tree is gone (a dangling link read as
    an empty index, and ``matrix --recheck`` said nothing needs a rebuild)."""
    tree = current_tree(index)
    if tree is None:
        raise UsageError(
            f"{index} holds no published index (no {CURRENT} link)",
            hint="give the folder that `archwheel publish` or `archwheel matrix` wrote",
        )
    status = _lstat(tree)
    if status is None or not stat.S_ISDIR(status.st_mode):
        raise UsageError(
            f"{index / CURRENT} leads to {TREES}/{tree.name}, which is not there: the index "
            "is damaged",
            hint="publish into it again, or restore the folder whole",
        )
    return tree


def trees_folder(index: Path) -> Path | None:
    """``INDEX/trees`` when it is a real folder; None when there is none; a ``UsageError`` for
    anything else (a link to another folder: its content was taken for the index's trees and
    removed)."""
    trees = index / TREES
    status = _lstat(trees)
    if status is None:
        return None
    if not stat.S_ISDIR(status.st_mode):
        raise UsageError(
            f"{trees} is not a folder made by archwheel (a {kind_of(status.st_mode)}): "
            "not followed",
            hint=_NOT_OURS,
        )
    return trees


def _own_trees(trees: Path) -> list[str]:
    """The names in ``trees`` that archwheel's trees have, each a real folder, sorted (by age)."""
    names = []
    with os.scandir(trees) as entries:
        for entry in entries:
            if TREE_NAME.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
                names.append(entry.name)
    return sorted(names)


@contextlib.contextmanager
def locked(index: Path) -> Iterator[None]:
    """Hold the index's lock (``INDEX/.lock``, ``flock``; made when missing).

    The lock is a regular file or nothing: its type is checked before the open and on the
    open descriptor, and the open never follows a link nor blocks (``O_NOFOLLOW``,
    ``O_NONBLOCK``). Anything else is a ``UsageError`` naming it."""
    path = index / LOCK
    status = _lstat(path)
    if status is not None and not stat.S_ISREG(status.st_mode):
        _refuse_lock(path, status.st_mode)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):  # replaced since the lstat
            _refuse_lock(path, os.lstat(path).st_mode)
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            _refuse_lock(path, mode)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _refuse_lock(path: Path, mode: int) -> None:
    raise UsageError(
        f"{path} is a {kind_of(mode)}, not the lock file archwheel makes: not opened",
        hint="remove it; the next publish makes a new one",
    )


# What writing into a full, read-only or quota-bound file system raises.
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})


@contextlib.contextmanager
def writing_into(index: Path) -> Iterator[None]:
    """A full, read-only or quota-bound file system under ``index`` is an ``OutputError``
    naming the index (not a file inside it)."""
    try:
        yield
    except OSError as exc:
        if exc.errno in _NO_ROOM:
            raise OutputError.cannot_write(index, exc) from None
        raise


def swap(index: Path, tree: Path) -> None:
    """Point ``current`` at ``tree`` with one rename (a reader never sees a half index)."""
    temporary = index / f".{CURRENT}-{secrets.token_hex(4)}"
    temporary.symlink_to(Path(TREES) / tree.name, target_is_directory=True)
    try:
        temporary.replace(index / CURRENT)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def unfinished(index: Path) -> list[Path]:
    """What publishes that did not finish left in ``index`` (call it under the lock): every
    tree newer than the current one (a publish writes its tree, then swaps ``current`` to it,
    under the lock: a newer tree is one whose swap never came), every tree when there is no
    ``current``, and the temporary ``.current-*`` links of an unfinished swap. Only names and
    types archwheel makes are listed (``TREE_NAME``, ``HALF_SWAP``)."""
    current = current_tree(index)
    trees = trees_folder(index)
    found: list[Path] = []
    if trees is not None:
        for name in _own_trees(trees):
            if current is None or name > current.name:
                found.append(trees / name)
    with os.scandir(index) as entries:
        halves = [e.name for e in entries if HALF_SWAP.fullmatch(e.name) and e.is_symlink()]
    found.extend(index / name for name in sorted(halves))
    return found


def _remove(path: Path) -> bool:
    """Remove what ``unfinished`` or ``collect`` found, as it is now: a link is unlinked (never
    followed), a real folder removed; True when it is gone."""
    status = _lstat(path)
    if status is None:
        return True
    if stat.S_ISLNK(status.st_mode):
        path.unlink(missing_ok=True)
    elif stat.S_ISDIR(status.st_mode):
        # shutil.rmtree does not follow links inside the folder, nor the folder if it became one.
        shutil.rmtree(path, ignore_errors=True)
    return _lstat(path) is None


def remove_unfinished(index: Path) -> tuple[str, ...]:
    """Remove what ``unfinished`` lists (under the lock); the removed, relative to ``index``."""
    return tuple(str(path.relative_to(index)) for path in unfinished(index) if _remove(path))


def unfinished_publishes(index: Path, *, remove: bool) -> tuple[str, ...]:
    """The trees and links (relative to ``index``) that publishes killed before their swap
    left; removed when ``remove``. Taken under the index's lock: a publish in progress holds
    it, so its tree is never taken for a leftover. An index whose ``current``, ``trees`` or
    ``.lock`` is not what archwheel makes is a ``UsageError`` before anything is removed."""
    current_tree(index)
    if trees_folder(index) is None:
        return ()
    with writing_into(index), locked(index):
        if remove:
            return remove_unfinished(index)
        return tuple(str(p.relative_to(index)) for p in unfinished(index))


def collect(index: Path, keep: Path) -> None:
    """Remove the oldest trees beyond the ``KEEP_TREES`` newest (never ``keep``)."""
    trees = trees_folder(index)
    if trees is None:
        return
    for name in _own_trees(trees)[:-KEEP_TREES]:
        if name != keep.name:
            _remove(trees / name)
