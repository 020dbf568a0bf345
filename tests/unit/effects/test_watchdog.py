"""The watchdog against real child processes: a real hang, real crashes, real output floods."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from archwheel.effects.watchdog import (
    OUTPUT_TAIL_BYTES,
    ChildCommand,
    ChildStatus,
    Watchdog,
)

PY = sys.executable


def _py(name: str, code: str, timeout: float = 30, **kw: object) -> ChildCommand:
    return ChildCommand(name, (PY, "-c", code, "{result}"), timeout=timeout, **kw)  # type: ignore[arg-type]


WRITE_RESULT = "import json, sys; json.dump({'ok': True, 'n': 42}, open(sys.argv[1], 'w'))"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it has stopped running, which is what matters.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_step_that_writes_its_result_finished() -> None:
    outcome = Watchdog().run(_py("ok", WRITE_RESULT))
    assert outcome.status is ChildStatus.EXITED
    assert outcome.finished
    assert outcome.result == {"ok": True, "n": 42}
    assert outcome.returncode == 0
    assert outcome.problem is None


def test_a_step_that_really_hangs_is_killed_with_its_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    # The step starts a grandchild (in the step's process group), then hangs itself: both must die.
    code = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(600)\n"
    )
    started = time.monotonic()
    outcome = Watchdog(grace_seconds=1).run(_py("matmul_fp32-dev0-native", code, timeout=2))
    elapsed = time.monotonic() - started
    assert outcome.status is ChildStatus.HANG
    assert outcome.problem is not None
    assert "matmul_fp32-dev0-native" in outcome.problem
    assert "did not finish within 2 s" in outcome.problem
    assert elapsed < 60  # it did not wait for the 600 s sleep
    grandchild = int(pid_file.read_text())
    for _ in range(50):
        if not _alive(grandchild):
            break
        time.sleep(0.1)
    assert not _alive(grandchild), "the hung step's child survived the watchdog"


def test_a_step_that_ignores_sigterm_is_killed_with_sigkill() -> None:
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    outcome = Watchdog(grace_seconds=0.5).run(_py("stubborn", code, timeout=1))
    assert outcome.status is ChildStatus.HANG
    assert outcome.returncode == -9


def test_on_hang_hook_runs_only_for_a_hang() -> None:
    calls: list[str] = []
    hung = _py("h", "import time; time.sleep(600)", timeout=1, on_hang=lambda: calls.append("h"))
    fine = _py("f", WRITE_RESULT, on_hang=lambda: calls.append("f"))
    Watchdog(grace_seconds=0.5).run(hung)
    Watchdog().run(fine)
    assert calls == ["h"]


def test_a_segfault_is_a_crash_with_the_signal_name() -> None:
    code = (
        "import os, signal, sys\n"
        "print('about to fault', file=sys.stderr, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGSEGV)\n"
    )
    outcome = Watchdog().run(_py("conv2d_cudnn-dev0-native", code))
    assert outcome.status is ChildStatus.CRASH
    assert outcome.signal_name == "SIGSEGV"
    assert outcome.returncode == -11
    assert outcome.problem is not None
    assert "killed by SIGSEGV" in outcome.problem
    assert "about to fault" in outcome.problem


def test_an_abort_is_a_crash() -> None:
    outcome = Watchdog().run(_py("abort", "import os; os.abort()"))
    assert outcome.status is ChildStatus.CRASH
    assert outcome.signal_name == "SIGABRT"


def test_exit_without_result_is_a_crash_with_the_last_stderr_lines() -> None:
    code = (
        "import sys\n"
        "for i in range(30): print(f'noise {i}', file=sys.stderr)\n"
        "print('RuntimeError: CUDA error: no kernel image is available for execution on the "
        "device', file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    outcome = Watchdog().run(_py("reduction", code))
    assert outcome.status is ChildStatus.CRASH
    assert outcome.returncode == 3
    assert outcome.problem is not None
    assert "exited with code 3" in outcome.problem
    assert "no kernel image is available" in outcome.problem
    assert len(outcome.stderr_tail) == 12
    assert outcome.stderr_tail[-1].endswith("on the device")
    assert outcome.stderr_tail[0] == "noise 19"


def test_a_program_that_does_not_exist_is_not_started(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-python")
    outcome = Watchdog().run(ChildCommand("probe", (missing, "x"), timeout=5))
    assert outcome.status is ChildStatus.NOT_STARTED
    assert outcome.problem is not None
    assert missing in outcome.problem


def test_an_output_flood_is_kept_to_a_bounded_tail() -> None:
    code = (
        "import sys\n"
        "chunk = 'x' * 1023 + '\\n'\n"
        "for _ in range(40 * 1024): sys.stdout.write(chunk)\n"  # 40 MiB
        "sys.stdout.write('THE END\\n')\n" + WRITE_RESULT + "\n"
    )
    outcome = Watchdog().run(_py("flood", code, timeout=120))
    assert outcome.finished
    assert len(outcome.stdout_tail) <= OUTPUT_TAIL_BYTES
    assert outcome.stdout_tail.rstrip().endswith("THE END")


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_step_printing_forever_is_killed_before_it_fills_the_disk(
    stream: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from archwheel.effects import watchdog

    monkeypatch.setattr(watchdog, "MAX_OUTPUT_BYTES", 4 << 20)
    code = f"import sys\nwhile True: sys.{stream}.write('y' * 1023 + '\\n')\n"
    started = time.monotonic()
    outcome = Watchdog().run(_py("spew", code, timeout=120))
    assert time.monotonic() - started < 60  # stopped by the output bound, not the deadline
    assert outcome.status is ChildStatus.CRASH
    assert outcome.problem is not None
    assert f"printed more than 4 MiB on {stream}; its process group was killed" in outcome.problem


@pytest.mark.parametrize(
    ("writer", "reason"),
    [
        ("open(sys.argv[1], 'w').write('{not json')", "not valid JSON"),
        ("open(sys.argv[1], 'w').write('[1, 2]')", "not a JSON object"),
        ("open(sys.argv[1], 'w').write(' ' * (2 << 20))", "too large"),
    ],
)
def test_a_bad_result_file_is_a_crash_with_the_reason(writer: str, reason: str) -> None:
    outcome = Watchdog().run(_py("bad", f"import sys; {writer}"))
    assert outcome.status is ChildStatus.CRASH
    assert outcome.problem is not None
    assert reason in outcome.problem


def test_environment_is_set_and_unset_per_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_FORCE_PTX_JIT", "1")
    code = (
        "import json, os, sys\n"
        "json.dump({k: os.environ.get(k) for k in "
        "('CUDA_DISABLE_PTX_JIT', 'CUDA_FORCE_PTX_JIT', 'WHERE')}, open(sys.argv[1], 'w'))"
    )
    outcome = Watchdog().run(
        _py(
            "env",
            code,
            env={"CUDA_DISABLE_PTX_JIT": "1", "WHERE": "{result}"},
            unset_env=("CUDA_FORCE_PTX_JIT",),
        )
    )
    assert outcome.result is not None
    assert outcome.result["CUDA_DISABLE_PTX_JIT"] == "1"
    assert outcome.result["CUDA_FORCE_PTX_JIT"] is None
    assert str(outcome.result["WHERE"]).endswith("result.json")


def test_a_stale_result_file_never_counts(tmp_path: Path) -> None:
    stale = tmp_path / "result.json"
    stale.write_text('{"ok": true}')
    outcome = Watchdog().run(
        ChildCommand("stale", (PY, "-c", "pass"), timeout=30, result_file=stale)
    )
    assert outcome.status is ChildStatus.CRASH
    assert outcome.result is None
