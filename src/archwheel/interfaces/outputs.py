"""Where the commands write: every output file and output folder, checked and written here.

Every ``-o``/``--output FILE`` (audit, manifest, matrix --export, smoke) is checked before any
work by ``check_output_file`` and written by ``write_output_file``; every output folder
(``build --out``, ``matrix --index`` and ``--work``, ``publish --index``) is checked by
``check_output_folder``, in plan modes too (a plan that names a location that cannot work is
refused, not printed). One set of answers, each an ``errors.OutputError`` (exit 2, the message
``PATH: WHY`` naming what the user gave, never a temporary file beside it):

- a folder where a file is wanted ("is a folder"), a file where a folder is ("is not a folder");
- a missing folder for a file ("the folder ... does not exist");
- under /proc or /sys (a kernel interface, not a place for reports);
- a write the system refuses, at the check or at the end (a full file system, no permission, a
  read-only file system): "cannot write: REASON".

A special file named on purpose (``/dev/stdout``, a FIFO, a terminal) is written into, never
replaced (``/dev/full`` then answers "cannot write: No space left on device"); a regular file
is replaced atomically (a reader sees the old one or the whole new one), through a link the
file it points at. docs/exit-codes.md and docs/limits.md say the same.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from archwheel.effects.files import PSEUDO_FILESYSTEMS, is_pseudo, write_text_atomic
from archwheel.errors import OutputError

_ON_DISK = "give a file on a file system"


def _kernel(path: Path) -> str:
    """Why ``path`` (of /proc or /sys) is refused, naming which."""
    text = str(path.absolute())
    root = next((r for r in PSEUDO_FILESYSTEMS if text == r or text.startswith(r + "/")), None)
    return f"is under {root or ' or '.join(PSEUDO_FILESYSTEMS)}, a kernel interface"


def cannot_write(path: Path | str, exc: OSError) -> OutputError:
    """The answer for a write the system refused (``exc``), naming ``path`` (the output the
    user gave), whatever file the error names (a temporary one beside it)."""
    return OutputError.cannot_write(path, exc)


def _status(path: Path) -> os.stat_result | None:
    """``path``'s status (links followed), None when nothing is there."""
    try:
        return path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:  # too long a name, a loop of links, no permission
        raise cannot_write(path, exc) from None


def _target(path: Path) -> Path:
    """The file a write of ``path`` lands in: through a link, the file it points at."""
    try:
        return path.resolve() if path.is_symlink() else path
    except (OSError, RuntimeError) as exc:  # a loop of links
        raise OutputError(path, f"cannot be resolved: {exc}") from None


def check_output_file(path: Path) -> None:
    """``path`` can take an output file (``OutputError`` else), before any work is done."""
    status = _status(path)
    if status is not None:
        if stat.S_ISDIR(status.st_mode):
            raise OutputError(path, "is a folder", hint="give a file name for the output")
        if stat.S_ISREG(status.st_mode) and is_pseudo(status):
            raise OutputError(path, _kernel(path), hint=_ON_DISK)
        return  # a regular file (replaced), or a special file named on purpose (written into)
    folder = _target(path).parent
    folder_status = _status(folder)
    if folder_status is None:
        raise OutputError(path, f"the folder {folder} does not exist")
    if not stat.S_ISDIR(folder_status.st_mode):
        raise OutputError(path, f"{folder} is not a folder")
    if is_pseudo(folder_status):
        raise OutputError(path, _kernel(path), hint=_ON_DISK)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(path, f"cannot write: {os.strerror(errno.EACCES)}")


def write_output_file(path: Path, text: str) -> None:
    """Write ``text`` to the output file ``path``: a regular file (or none yet) atomically, a
    special file into; every refusal an ``OutputError`` naming ``path``."""
    check_output_file(path)
    status = _status(path)
    try:
        if status is not None and not stat.S_ISREG(status.st_mode):
            with path.open("w", encoding="utf-8") as out:
                out.write(text)
        else:
            write_text_atomic(_target(path), text)
    except OSError as exc:
        raise cannot_write(path, exc) from None


def check_output_folder(path: Path) -> None:
    """``path`` can be an output folder (it is, or can be made): ``OutputError`` else."""
    status = _status(path)
    if status is not None:
        if not stat.S_ISDIR(status.st_mode):
            raise OutputError(path, "is not a folder", hint="give a folder; it is made if missing")
        where = path
    else:
        where = path.absolute().parent
        while (status := _status(where)) is None and where != where.parent:
            where = where.parent
        if status is None or not stat.S_ISDIR(status.st_mode):
            raise OutputError(path, f"{where} is not a folder")
    if is_pseudo(status):
        raise OutputError(path, _kernel(path), hint="give a folder on a file system")
    if not os.access(where, os.W_OK | os.X_OK):
        raise OutputError(path, f"cannot write: {os.strerror(errno.EACCES)}")
