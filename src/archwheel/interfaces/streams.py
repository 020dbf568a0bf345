"""Standard output that cannot take a command's output: closed, or a pipe whose reader left.

``archwheel audit WHEEL >&-`` starts with no standard output at all (Python's ``sys.stdout`` is
None), and ``archwheel audit WHEEL --detail | head -c1`` loses its reader after one byte. Both
once ended badly: the first in an internal error (the console asked the missing stream whether
it was a terminal: exit 4), the second silently with exit 1 (rich's console turns a broken
pipe into ``SystemExit(1)``), the code a failed verdict owns.

One mechanism for every command (``guarded_streams``, installed by ``cli.main``): standard
output is a ``GuardedOutput`` that writes through to the real stream, and the first write or
flush it cannot make raises ``OutputGone``. The command stops there, as git and the coreutils
stop on SIGPIPE: its clean-ups run (``OutputGone`` passes through ``except Exception``, like
Ctrl-C), nothing more is written, no traceback, and the exit status is 141 (128 + SIGPIPE, what
a shell reports for a program a broken pipe ended: ``ExitCode.OUTPUT_GONE``). A pipe that
closed early is the reader's choice and says nothing; a closed standard output is a mistake of
the caller and says so on one line of standard error. A command that writes nothing on
standard output (``audit -o FILE``) is not affected. docs/exit-codes.md has the rule.

Light to import (``cli`` imports it at start): the standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from collections.abc import Iterable, Iterator
from typing import TextIO, cast

# The standard descriptors. One that is closed at start is opened on /dev/null, so that no file
# archwheel opens later takes its number (a subprocess would then write into that file).
STANDARD_FDS = (0, 1, 2)


class OutputGone(BaseException):
    """Standard output cannot take more: it was closed (``closed``) or it is a pipe whose
    reader went away. A ``BaseException`` so that no ``except Exception`` of a command takes it
    for that command's own failure; ``cli.main`` turns it into exit 141."""

    def __init__(self, *, closed: bool) -> None:
        super().__init__("standard output is closed" if closed else "standard output broke")
        self.closed = closed


class GuardedOutput(io.TextIOBase):
    """A standard stream for the commands: ``stream``'s writes, with a missing stream (closed
    at start) or a broken pipe (EPIPE; EBADF: closed under us) raised as ``OutputGone``; or,
    with ``discard`` (standard error: a warning that cannot be shown must not end a command),
    dropped, and every later write with it."""

    def __init__(self, stream: TextIO | None, *, discard: bool = False) -> None:
        super().__init__()
        self.stream = stream
        self.discard = discard
        self.gone: OutputGone | None = None if stream is not None else OutputGone(closed=True)

    def _give_up(self, exc: OSError) -> None:
        """The stream broke (``exc``): nothing more reaches it, ``OutputGone`` unless
        ``discard``; a pipe's descriptor goes to /dev/null (what is still buffered would be
        flushed at exit into the broken pipe: "Exception ignored ... BrokenPipeError")."""
        if exc.errno not in (errno.EPIPE, errno.EBADF):
            raise exc
        self.gone = OutputGone(closed=exc.errno == errno.EBADF)
        if self.stream is not None and exc.errno == errno.EPIPE:
            with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
                fd = self.stream.fileno()
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, fd)
                os.close(null)
        if not self.discard:
            raise self.gone from None

    def write(self, text: str) -> int:
        """Write ``text`` to the stream; a broken or missing stream raises ``OutputGone`` (or, with
        ``discard``, drops the text)."""
        if self.gone is not None or self.stream is None:
            if self.discard:
                return len(text)
            raise self.gone or OutputGone(closed=True)
        try:
            return self.stream.write(text)
        except OSError as exc:
            self._give_up(exc)
            return len(text)

    def writelines(self, lines: Iterable[str]) -> None:  # type: ignore[override]
        """Write each of ``lines``, guarded as ``write``."""
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Flush the stream; a broken pipe found here is handled as in ``write``."""
        if self.gone is not None or self.stream is None:
            return
        try:
            self.stream.flush()
        except OSError as exc:
            self._give_up(exc)

    def isatty(self) -> bool:
        """True only while the stream works and is a terminal (progress bars and colours ask)."""
        return self.gone is None and self.stream is not None and self.stream.isatty()

    def fileno(self) -> int:
        """The stream's descriptor (subprocesses inherit it); ``UnsupportedOperation`` when closed
        at start."""
        if self.stream is None:
            raise io.UnsupportedOperation("the stream is closed")
        return self.stream.fileno()

    def writable(self) -> bool:
        """Always True: writes to a broken stream are raised or dropped, never refused up front."""
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """The stream's encoding (``utf-8`` when it has none), which rich reads."""
        return getattr(self.stream, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        """The stream's error handler for encoding, as ``TextIOBase`` callers read it."""
        return getattr(self.stream, "errors", None)


def _reserve_standard_fds() -> None:
    for fd in STANDARD_FDS:
        try:
            os.fstat(fd)
        except OSError:
            with contextlib.suppress(OSError):
                null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
                if null != fd:  # the lowest free number: fd itself when it is the only one
                    os.dup2(null, fd)
                    os.close(null)


@contextlib.contextmanager
def guarded_streams() -> Iterator[tuple[GuardedOutput, GuardedOutput]]:
    """``sys.stdout`` and ``sys.stderr`` as ``GuardedOutput`` for the duration: standard
    output raises ``OutputGone``, standard error drops what it cannot take."""
    previous_out, previous_err = sys.stdout, sys.stderr
    if previous_out is None or previous_err is None:
        _reserve_standard_fds()
    out = GuardedOutput(previous_out)
    err = GuardedOutput(previous_err, discard=True)
    sys.stdout, sys.stderr = cast(TextIO, out), cast(TextIO, err)
    try:
        yield out, err
    finally:
        sys.stdout, sys.stderr = previous_out, previous_err


def gone_message(gone: OutputGone) -> str | None:
    """The line ``cli.main`` prints for ``gone`` (None: a pipe its reader closed, said by
    nobody, as ``git log | head`` says nothing)."""
    if gone.closed:
        return "archwheel: error: standard output is closed: the output was not written"
    return None
