"""A child process held by a pipe: the dead man's switch of archwheel's containers.

A build container's PID 1 is ``HOLD_SCRIPT``: it says it runs, then waits on its standard input,
a pipe only archwheel holds (through the engine's client, ``docker run --interactive``). When
archwheel ends in any way, SIGKILL included, the pipe closes, ``read`` returns, PID 1 exits and
with it every process still running in the container, which the engine then removes (``--rm``).
No later run has to find it. Checked with docker 20.10 and podman 4.3: a SIGKILLed holder
leaves no container and no process behind (tests/integration/docker/test_faults.py).
"""

from __future__ import annotations

import contextlib
import os
import select
import time
from collections.abc import Mapping, Sequence

from archwheel.effects.process import Popen, TimeoutExpired, last_line, start_piped
from archwheel.errors import ToolError

HOLD_SCRIPT = "echo archwheel-ready; read -r _ || :"
READY = b"archwheel-ready"
START_TIMEOUT = 300.0


def start_held(
    command: Sequence[str], env: Mapping[str, str], what: str, timeout: float = START_TIMEOUT
) -> Popen[bytes]:
    """Start ``command`` (an engine's ``run --interactive`` of ``HOLD_SCRIPT``) with its input
    on a pipe; return once it has said it runs. A client that exits first, or that does not
    answer in ``timeout`` seconds, is a ``ToolError`` with its last line."""
    try:
        # Its own session: a Ctrl-C at the terminal reaches archwheel, which removes the
        # container, and not the engine's client, which would end it under a running step.
        holder = start_piped(command, env)
    except OSError as exc:
        raise ToolError(f"{what} failed: {exc.strerror or exc}") from exc
    try:
        ready = _wait_ready(holder, timeout)
    except BaseException:
        holder.kill()
        release(holder)
        raise
    if ready:
        return holder
    if holder.poll() is None:
        holder.kill()
    try:
        _, err = holder.communicate(timeout=30)
    except TimeoutExpired:
        err = b""
    code = holder.returncode
    if code not in (None, 0) and code > 0:
        raise ToolError(f"{what} failed (exit {code}): {last_line(err.decode(errors='replace'))}")
    raise ToolError(f"{what}: the container did not say it runs in {timeout:.0f} s")


def _wait_ready(holder: Popen[bytes], timeout: float) -> bool:
    """True once the container's PID 1 has said it runs; False when the client exited first
    or ``timeout`` seconds passed."""
    assert holder.stdout is not None
    fd = holder.stdout.fileno()
    deadline = time.monotonic() + timeout
    seen = b""
    while READY not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if not ready:
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            return False
        seen = (seen + chunk)[-4096:]
    return True


def release(holder: Popen[bytes]) -> None:
    """Close the container's pipe and wait for the engine's client (killed after 30 s)."""
    for stream in (holder.stdin, holder.stdout, holder.stderr):
        with contextlib.suppress(OSError):
            if stream is not None:
                stream.close()
    try:
        holder.wait(timeout=30)
    except TimeoutExpired:
        holder.kill()
        holder.wait()
