"""The one place that starts processes: every subprocess of archwheel goes through here.

Three shapes cover every caller:

- ``run_program``: run to completion and capture the output (pip, git, nvidia-smi, cuobjdump,
  an interpreter probe). The program is resolved on PATH first ("couldn't find X in PATH"
  instead of a traceback), echoed as ``+ cmd`` in shell quoting when asked, bounded by a
  timeout, and a failure becomes a one-line ``ToolError`` naming the last line it printed.
  A program that cannot start is a ``ProgramNotStarted``, one that outlives its timeout a
  ``ProgramTimedOut`` (both ``ToolError``s), so that a caller can say it in its own words.
- ``stream_lines``: run to completion and hand each output line to a sink (container engine
  steps, debootstrap), in its own session so that Ctrl-C reaches archwheel, which decides what
  to stop.
- ``spawn``: a ``Popen`` for callers that supervise the child themselves (the smoke watchdog,
  the audit's scan workers).

The layer test (``test_layers.py``) checks that no other module imports ``subprocess``; the only
exception is ``smoke/data/smoke_payload.py``, a standalone script that runs inside the
environment under test and never imports archwheel.
"""

from __future__ import annotations

import os
import selectors
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

from archwheel.errors import ToolError
from archwheel.text import decimal_number

Echo = Callable[[str], None]
LineSink = Callable[[str], None]

# Re-exported for callers that wait on a spawned child with a deadline.
TimeoutExpired = subprocess.TimeoutExpired
Popen = subprocess.Popen
DEVNULL = subprocess.DEVNULL


def start_piped(command: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start ``command`` with its three streams on pipes, in a session of its own (a Ctrl-C at
    the terminal does not reach it); ``OSError`` when it cannot start (effects.held)."""
    return subprocess.Popen(
        list(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        start_new_session=True,
    )


PIPE = subprocess.PIPE
STDOUT = subprocess.STDOUT

LAST_LINE_CHARS = 400
# The most bytes ``run_program`` keeps of a program's stdout, and of its stderr; a program that
# prints more is killed (an interpreter printing forever once took 24 GB before it was stopped).
MAX_CAPTURE = 64 << 20
_READ_SIZE = 1 << 16
MAX_LINE = 1 << 20  # bytes of one line ``stream_lines`` hands on at most
# Lists and objects inside each other in the JSON answer of a probe archwheel runs in a user's
# interpreter (the probes write 3): one bound for every such answer, read as untrusted input.
MAX_ANSWER_NESTING = 16
_PIPE_BUF = 512  # bytes written to a child's stdin at a time (what select promises)
# The longest time limit a user may give (an option, an environment variable), in seconds: a
# week. Beyond it a limit means nothing, and 1e308 overflowed the clocks it was handed to.
MAX_TIMEOUT_S = 7 * 24 * 3600
# The shortest: a millisecond (1e-320 is above 0, and no program starts within it).
MIN_TIMEOUT_S = 0.001


def parse_timeout(text: str) -> float:
    """A time limit in seconds written by a user (an option, a setting): a number in ASCII
    digits (``text.decimal_number``) above 0 (at least ``MIN_TIMEOUT_S``) and at most
    ``MAX_TIMEOUT_S`` (nan and inf refused); ``ValueError`` saying so otherwise."""
    try:
        value = decimal_number(text)  # ASCII digits only: "８", "1_000" and nan are no numbers
    except ValueError:
        value = None
    if value is None or not MIN_TIMEOUT_S <= value <= MAX_TIMEOUT_S:
        raise ValueError(
            f"{text[:40]!r}: must be a number in ASCII digits above 0 (at least "
            f"{MIN_TIMEOUT_S}) and at most {MAX_TIMEOUT_S} (a week)"
        )
    return value


def echo_to_stderr(line: str) -> None:
    """Print a command line on stderr at once: the default echo of the commands run."""
    print(line, file=sys.stderr, flush=True)


def quote_command(args: Sequence[str]) -> str:
    """``+ docker run ...`` as a shell would need it typed."""
    return "+ " + shlex.join(args)


def find_program(name: str, hint: str = "") -> str:
    """The full path of ``name`` on PATH, or a ToolError saying it is missing."""
    found = shutil.which(name)
    if not found:
        raise ToolError(f"couldn't find {name} in PATH", hint=hint or f"install {name}")
    return found


def last_line(text: str, limit: int = LAST_LINE_CHARS) -> str:
    """The last non-blank line of a program's output, bounded: what error messages quote."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:limit] if lines else "no output"


class ProgramNotStarted(ToolError):
    """The program could not be started (``reason``: the operating system's words)."""

    def __init__(self, program: str, reason: str) -> None:
        super().__init__(f"could not run {program}: {reason}")
        self.program = program
        self.reason = reason


class ProgramOutputTooLarge(ToolError):
    """A program printed more than it may (``run_program``'s ``max_output``); it was killed."""

    def __init__(self, what: str, stream: str, limit: int) -> None:
        super().__init__(
            f"{what} printed more than {limit >> 20} MiB on {stream}: stopped (is it the "
            "program it should be?)"
        )
        self.limit = limit


class ProgramTimedOut(ToolError):
    """The program outlived its timeout and was killed."""

    def __init__(self, what: str, timeout: float) -> None:
        super().__init__(f"{what} did not finish within {timeout:.0f} s")
        self.timeout = timeout


@dataclass(frozen=True)
class CommandResult:
    """A finished program's arguments, exit status and decoded output; ``run_program``
    returns it."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        """Whether the program exited 0."""
        return self.returncode == 0

    def last_line(self) -> str:
        """The last non-blank line of stderr (of stdout when stderr is empty), for messages."""
        return last_line(self.stderr or self.stdout)


def _resolve(program: str) -> str:
    return find_program(program) if os.sep not in program else program


def _environment(env: Mapping[str, str] | None, replace_env: bool) -> dict[str, str]:
    if replace_env:
        return dict(env or {})
    return {**os.environ, **(env or {})}


def run_program(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    replace_env: bool = False,
    echo: Echo | None = echo_to_stderr,
    check: bool = True,
    input_bytes: bytes | None = None,
    stdin: IO[bytes] | None = None,
    timeout: float | None = None,
    cwd: Path | str | None = None,
    what: str = "",
    max_output: int = MAX_CAPTURE,
) -> CommandResult:
    """Run a program to completion, capturing its output.

    ``env`` is added to this process's environment (or replaces it with ``replace_env``).
    A program that cannot be started, that outlives ``timeout``, or that prints more than
    ``max_output`` bytes on stdout or on stderr (it is killed then: an interpreter that prints
    forever must not fill this machine's memory) is a ``ToolError``; so is a non-zero exit when
    ``check``.
    """
    program = _resolve(args[0])
    full = [program, *args[1:]]
    if echo:
        echo(quote_command(list(args)))
    try:
        proc = subprocess.Popen(
            full,
            stdin=subprocess.PIPE if input_bytes is not None else stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_environment(env, replace_env),
            cwd=cwd,
        )
    except OSError as exc:
        raise ProgramNotStarted(args[0], str(exc.strerror or exc)) from exc
    with proc:
        try:
            stdout, stderr, outcome = _collect(proc, input_bytes, timeout, max_output)
        except BaseException:  # Ctrl-C, a read error: the child must not outlive the call
            proc.kill()
            raise
    if outcome == "timeout":
        raise ProgramTimedOut(what or args[0], timeout or 0.0)
    if outcome:
        raise ProgramOutputTooLarge(what or args[0], outcome, max_output)
    result = CommandResult(
        tuple(full),
        proc.returncode,
        stdout.decode(errors="replace"),
        stderr.decode(errors="replace"),
    )
    if check and proc.returncode != 0:
        raise ToolError(
            f"{what or shlex.join(args[:3])} failed (exit {proc.returncode}): {result.last_line()}"
        )
    return result


def _collect(
    proc: subprocess.Popen[bytes], data: bytes | None, timeout: float | None, limit: int
) -> tuple[bytes, bytes, str]:
    """Feed ``data`` to the child, read both its outputs up to ``limit`` bytes each, and wait
    for it until ``timeout`` (one thread and a selector, as ``subprocess`` communicates on
    POSIX). The third value: "" (it ended), "timeout", or the name of the stream that went past
    the limit; in both of the last cases the child is killed."""
    assert proc.stdout is not None and proc.stderr is not None
    deadline = None if timeout is None else time.monotonic() + timeout
    kept = {
        proc.stdout.fileno(): ("stdout", bytearray()),
        proc.stderr.fileno(): ("stderr", bytearray()),
    }
    pending = memoryview(data or b"")

    def stop(outcome: str) -> tuple[bytes, bytes, str]:
        proc.kill()
        proc.wait()
        return b"", b"", outcome

    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        selector.register(proc.stderr, selectors.EVENT_READ)
        if data is not None:
            assert proc.stdin is not None
            if pending:
                selector.register(proc.stdin, selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
        while selector.get_map():
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                return stop("timeout")  # the child, or a child of it holding the output open
            for key, _ in selector.select(wait):
                stream = cast("IO[bytes]", key.fileobj)
                if stream is proc.stdin:
                    try:
                        pending = pending[os.write(key.fd, pending[:_PIPE_BUF]) :]
                    except OSError:  # it exited without reading it all
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(stream)
                        stream.close()
                    continue
                chunk = os.read(key.fd, _READ_SIZE)
                if not chunk:
                    selector.unregister(stream)
                    stream.close()
                    continue
                name, buffer = kept[key.fd]
                if len(buffer) + len(chunk) > limit:
                    return stop(name)
                buffer += chunk
    try:
        proc.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return stop("timeout")
    out, err = (bytes(buffer) for _, buffer in kept.values())
    return out, err, ""


def stream_lines(
    args: Sequence[str],
    *,
    sink: LineSink | None = None,
    env: Mapping[str, str] | None = None,
    echo: Echo | None = echo_to_stderr,
    shown: Sequence[str] | None = None,
) -> tuple[int, str]:
    """Run a program, passing each output line (stdout and stderr merged) to ``sink``.

    Returns (exit code, last non-blank line). The child runs in its own session, so Ctrl-C
    reaches only archwheel; any exception while reading kills the child before it propagates.
    ``shown`` is what the echo prints instead of ``args`` (e.g. the program's short name).
    """
    command = [_resolve(args[0]), *args[1:]]
    if echo:
        echo(quote_command(list(shown if shown is not None else args)))
    last = ""
    try:
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
    except OSError as exc:
        raise ProgramNotStarted(args[0], str(exc.strerror or exc)) from exc
    with proc:
        assert proc.stdout is not None
        try:
            # At most MAX_LINE bytes at a time: a line without an end (a program printing
            # forever without a newline) is handed on in pieces, never held whole.
            readline = proc.stdout.readline
            for raw in iter(lambda: readline(MAX_LINE), b""):
                line = raw.decode(errors="replace").rstrip("\r\n")
                if line.strip():
                    last = line.strip()
                if sink:
                    sink(line)
        except BaseException:
            proc.kill()
            raise
        code = proc.wait()
    return code, last[:LAST_LINE_CHARS]


def spawn(
    args: Sequence[str],
    *,
    stdin: int | IO[bytes] | None = None,
    stdout: int | IO[bytes] | None = None,
    stderr: int | IO[bytes] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    new_session: bool = False,
) -> subprocess.Popen[bytes]:
    """Start a child that the caller supervises; ``OSError`` when it cannot start."""
    return subprocess.Popen(
        list(args),
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        start_new_session=new_session,
    )
