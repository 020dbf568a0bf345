"""Run one step in a child process under a time limit, and say what happened to it.

Every smoke step (a probe, a kernel, an install) is a separate process: CUDA reads its
environment variables (``CUDA_DISABLE_PTX_JIT``) once, at initialisation, and a kernel that hangs
or crashes the interpreter must not take the smoke test down with it. The watchdog starts the
child in its own process group, waits for it with a deadline, and on a hang kills the whole group
(SIGTERM, then SIGKILL after a grace period), so helper processes the step started die too.

Output is captured into temporary files and only a bounded tail is read back, so a step that
prints gigabytes costs neither memory nor a hang; the files are watched while it runs, and a
step that writes more than ``MAX_OUTPUT_BYTES`` to either is killed, so that it cannot fill the
disk before its deadline either. A step reports its result through a JSON file
whose path it receives (``result_path``), never through stdout, which libraries freely write to.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import IO, Any

from archwheel.effects.files import read_document
from archwheel.effects.process import DEVNULL, Popen, TimeoutExpired, last_line, spawn

# How much of a step's stderr and stdout is kept, and the largest result file read back.
OUTPUT_TAIL_BYTES = 8192
STDERR_TAIL_LINES = 12
RESULT_MAX_NESTING = 32  # lists and objects inside each other (a step's result nests 3 deep)
RESULT_MAX_BYTES = 1 << 20
# Seconds between SIGTERM and SIGKILL when a step outlives its deadline.
KILL_GRACE_SECONDS = 3.0
# The most bytes a step may print on stdout, and on stderr (pip's install output is under 1 MB;
# a loop printing forever writes gigabytes a minute); checked every WATCH_SECONDS.
MAX_OUTPUT_BYTES = 64 << 20
WATCH_SECONDS = 0.2


class ChildStatus(str, Enum):
    """How a child process ended."""

    EXITED = "exited"  # it ended by itself (with any exit code)
    HANG = "hang"  # it outlived its deadline and was killed
    CRASH = "crash"  # it died from a signal, or exited non-zero without writing its result
    NOT_STARTED = "not-started"  # the program could not be started at all


@dataclass(frozen=True)
class ChildOutcome:
    """What one supervised child process did."""

    name: str
    status: ChildStatus
    seconds: float
    returncode: int | None = None
    signal_name: str | None = None
    stderr_tail: tuple[str, ...] = ()
    stdout_tail: str = ""
    result: Mapping[str, Any] | None = None  # the JSON the child wrote to its result file
    problem: str | None = None  # one line: why it hung, crashed or did not start

    @property
    def finished(self) -> bool:
        """It ended by itself and wrote a result."""
        return self.status is ChildStatus.EXITED and self.result is not None

    def to_json_dict(self) -> dict[str, Any]:
        """The outcome for a report (the result and stdout left out): status, time, why."""
        return {
            "name": self.name,
            "status": self.status.value,
            "seconds": round(self.seconds, 3),
            "returncode": self.returncode,
            "signal": self.signal_name,
            "problem": self.problem,
            "stderr_tail": list(self.stderr_tail),
        }


@dataclass(frozen=True)
class ChildCommand:
    """A step to run: its name (for the report), argv, extra environment and deadline."""

    name: str
    argv: tuple[str, ...]
    timeout: float
    env: Mapping[str, str] = field(default_factory=dict)
    unset_env: tuple[str, ...] = ()
    cwd: Path | None = None
    # Called once when the step hangs, after the process group is killed: a container backend
    # uses it to kill the container too (killing the `docker` client does not stop it).
    on_hang: Callable[[], None] | None = None
    expects_result: bool = True
    # Where the child writes its result when not at the watchdog's own path (a container
    # writes into its bind mount); it is removed before the run so a stale one never counts.
    result_file: Path | None = None


class Watchdog:
    """Runs ``ChildCommand``s; the one place that starts step processes."""

    def __init__(self, *, grace_seconds: float = KILL_GRACE_SECONDS) -> None:
        self.grace_seconds = grace_seconds

    def run(self, command: ChildCommand) -> ChildOutcome:
        """Run one step in its own process group under its deadline and report how it ended;
        a hung or flooding step is killed with its group, never left running."""
        env = dict(os.environ)
        for name in command.unset_env:
            env.pop(name, None)
        env.update(command.env)
        with tempfile.TemporaryDirectory(prefix="archwheel-step-") as scratch:
            scratch_dir = Path(scratch)
            result_path = command.result_file or scratch_dir / "result.json"
            result_path.unlink(missing_ok=True)
            argv = [a.replace("{result}", str(result_path)) for a in command.argv]
            for key in command.env:
                env[key] = env[key].replace("{result}", str(result_path))
            out_path, err_path = scratch_dir / "stdout", scratch_dir / "stderr"
            started = time.monotonic()
            with out_path.open("wb") as out, err_path.open("wb") as err:
                try:
                    proc = spawn(
                        argv,
                        stdin=DEVNULL,
                        stdout=out,
                        stderr=err,
                        env=env,
                        cwd=command.cwd,
                        new_session=True,  # its own process group, killed as one
                    )
                except OSError as exc:
                    return ChildOutcome(
                        name=command.name,
                        status=ChildStatus.NOT_STARTED,
                        seconds=0.0,
                        problem=f"could not start {argv[0]}: {exc.strerror or exc}",
                    )
                hung = False
                flooded = None
                try:
                    flooded = _wait(proc, command.timeout, {"stdout": out, "stderr": err})
                    if flooded is not None:
                        self._kill_group(proc)
                        if command.on_hang is not None:
                            command.on_hang()
                except TimeoutExpired:
                    hung = True
                    self._kill_group(proc)
                    if command.on_hang is not None:
                        command.on_hang()
                except BaseException:
                    # Interrupted (Ctrl-C, SIGTERM): the step must not outlive archwheel.
                    _signal_group(proc.pid, signal.SIGKILL)
                    proc.wait()
                    if command.on_hang is not None:
                        command.on_hang()
                    raise
                # Children the step left behind (in its group) must not outlive it either.
                _signal_group(proc.pid, signal.SIGKILL)
            seconds = time.monotonic() - started
            stderr_tail = _tail_lines(err_path)
            stdout_tail = _tail_text(out_path)
            result, result_problem = _read_result(result_path)

        ended = ChildOutcome(
            name=command.name,
            status=ChildStatus.EXITED,
            seconds=seconds,
            returncode=proc.returncode,
            stderr_tail=stderr_tail,
            stdout_tail=stdout_tail,
            result=result,
        )
        if flooded is not None:
            return replace(
                ended,
                status=ChildStatus.CRASH,
                problem=(
                    f"step {command.name!r} printed more than {MAX_OUTPUT_BYTES >> 20} MiB on "
                    f"{flooded}; its process group was killed"
                ),
            )
        return _judge(command, ended, hung=hung, result_problem=result_problem)

    def _kill_group(self, proc: Popen[bytes]) -> None:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=self.grace_seconds)
        except TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()


def _wait(proc: Popen[bytes], timeout: float, outputs: Mapping[str, IO[bytes]]) -> str | None:
    """Wait for ``proc`` until ``timeout`` (``TimeoutExpired`` past it); the name of the output
    that went past ``MAX_OUTPUT_BYTES`` when one did first (the caller kills it), else None."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            proc.wait(timeout=max(0.0, min(WATCH_SECONDS, left)))
            return None
        except TimeoutExpired:
            if left <= WATCH_SECONDS:
                raise
        for name, handle in outputs.items():
            if os.fstat(handle.fileno()).st_size > MAX_OUTPUT_BYTES:
                return name


def _judge(
    command: ChildCommand, ended: ChildOutcome, *, hung: bool, result_problem: str | None
) -> ChildOutcome:
    """How the child ended (``ended`` says only what was observed): hang, crash or exit."""
    step, code, tail = f"step {command.name!r}", ended.returncode, ended.stderr_tail
    if hung:
        return replace(
            ended,
            status=ChildStatus.HANG,
            problem=(
                f"{step} did not finish within {command.timeout:g} s; its process group was killed"
            ),
        )
    if code is not None and code < 0:
        name = _signal_name(-code)
        return replace(
            ended,
            status=ChildStatus.CRASH,
            signal_name=name,
            problem=f"{step} was killed by {name}" + _last_line(tail),
        )
    if command.expects_result and ended.result is None:
        why = result_problem or "it wrote no result"
        return replace(
            ended,
            status=ChildStatus.CRASH,
            problem=f"{step} exited with code {code} and {why}" + _last_line(tail),
        )
    return replace(ended, problem=None if code == 0 else f"exited with code {code}")


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _read_tail(path: Path, limit: int = OUTPUT_TAIL_BYTES) -> bytes:
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - limit))
            return fh.read(limit)
    except OSError:
        return b""


def _tail_text(path: Path) -> str:
    return _read_tail(path).decode("utf-8", errors="replace")


def _tail_lines(path: Path, lines: int = STDERR_TAIL_LINES) -> tuple[str, ...]:
    text = _tail_text(path)
    kept = [line.rstrip() for line in text.splitlines() if line.strip()]
    return tuple(kept[-lines:])


def _last_line(stderr_tail: Sequence[str]) -> str:
    """``": <last line of stderr>"`` for a problem text, or nothing when it printed nothing."""
    return f": {last_line(chr(10).join(stderr_tail))}" if stderr_tail else ""


def _read_result(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The child's JSON result, or None with the reason (absent, too large, not JSON)."""
    try:
        size = path.stat().st_size
    except OSError:
        return None, "it wrote no result"
    if size > RESULT_MAX_BYTES:
        return None, f"its result file is too large ({size} bytes)"
    try:  # written by code the tested wheel runs in: untrusted like any input
        data, _ = read_document(path, RESULT_MAX_BYTES, RESULT_MAX_NESTING, error=ValueError)
    except ValueError as exc:
        return None, f"its result is not valid JSON ({exc})"
    if not isinstance(data, dict):
        return None, "its result is not a JSON object"
    return data, None
