"""run_program: the output it keeps is bounded, its timeout holds, its input arrives.

Real child processes (``sh``, this interpreter): a program that prints forever, on stdout or on
stderr, is killed once it passes ``max_output`` (an interpreter given to ``verify --env`` that
did so once took 24 GB of memory before anything stopped it).
"""

from __future__ import annotations

import sys
import time

import pytest

from archwheel.effects.process import (
    ProgramNotStarted,
    ProgramOutputTooLarge,
    ProgramTimedOut,
    run_program,
)
from archwheel.errors import ToolError


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_program_printing_forever_is_stopped_at_the_limit(stream: str) -> None:
    redirect = ">&2" if stream == "stderr" else ""
    start = time.monotonic()
    with pytest.raises(ProgramOutputTooLarge) as caught:
        run_program(
            ["sh", "-c", f"yes AAAAAAAAAAAAAAAAAAAAAAAAAAAA {redirect}"],
            echo=None,
            max_output=1 << 20,
            timeout=60,
        )
    assert f"printed more than 1 MiB on {stream}" in str(caught.value)
    assert time.monotonic() - start < 30  # stopped at the limit, not by the timeout


def test_output_up_to_the_limit_is_kept_whole() -> None:
    code = "import sys; sys.stdout.write('x' * 300000); sys.stderr.write('y' * 200000)"
    result = run_program([sys.executable, "-c", code], echo=None, max_output=300000)
    assert result.stdout == "x" * 300000
    assert result.stderr == "y" * 200000


def test_input_reaches_the_program_and_the_exit_code_comes_back() -> None:
    data = b"0123456789" * 100000  # larger than a pipe holds: written as the child reads
    code = "import sys; d = sys.stdin.buffer.read(); print(len(d)); sys.exit(3)"
    result = run_program([sys.executable, "-c", code], echo=None, check=False, input_bytes=data)
    assert result.returncode == 3
    assert result.stdout.strip() == str(len(data))


def test_a_program_that_does_not_read_its_input_still_ends() -> None:
    result = run_program(["true"], echo=None, input_bytes=b"z" * 1_000_000, timeout=30)
    assert result.ok


def test_the_timeout_holds_also_when_a_child_keeps_the_output_open() -> None:
    start = time.monotonic()
    with pytest.raises(ProgramTimedOut):
        # The shell exits at once; its background child holds stdout open for 30 s.
        run_program(["sh", "-c", "sleep 30 & echo started"], echo=None, timeout=1)
    assert time.monotonic() - start < 15


def test_a_failure_names_its_last_line() -> None:
    with pytest.raises(ToolError) as caught:
        run_program(["sh", "-c", "echo first; echo 'the reason' >&2; exit 2"], echo=None)
    assert "failed (exit 2): the reason" in str(caught.value)


def test_a_program_that_cannot_start() -> None:
    with pytest.raises(ProgramNotStarted):
        run_program(["/nonexistent/program"], echo=None)


def test_stream_lines_hands_on_a_line_without_an_end_in_pieces() -> None:
    from archwheel.effects.process import MAX_LINE, stream_lines

    pieces: list[int] = []
    code = f"import sys; sys.stdout.write('q' * {3 * MAX_LINE + 5}); sys.stdout.write('\\nend\\n')"
    status, last = stream_lines(
        [sys.executable, "-c", code], sink=lambda line: pieces.append(len(line)), echo=None
    )
    assert status == 0 and last == "end"
    assert pieces == [MAX_LINE, MAX_LINE, MAX_LINE, 5, 3]
