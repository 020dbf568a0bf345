"""A compile that ran out of memory gets one message with the fix, whatever the exit code."""

from __future__ import annotations

from pathlib import Path

from archwheel.exit_codes import EXIT_BUILD, exit_code_for
from archwheel.wheelbuild.failures import out_of_memory_error, out_of_memory_evidence


def test_oom_killer_line_from_the_compiler_driver_is_found() -> None:
    lines = [
        "building 'torch_scatter._scatter_cuda' extension",
        "x86_64-linux-gnu-g++: fatal error: Killed signal terminated program cc1plus",
        "compilation terminated.",
        "error: command '/usr/bin/x86_64-linux-gnu-g++' failed with exit code 1",
    ]
    evidence = out_of_memory_evidence(lines, "step 'compile' failed in container x (exit 1)")
    assert evidence is not None and "cc1plus" in evidence


def test_address_space_limit_and_killed_container_count_as_out_of_memory() -> None:
    assert out_of_memory_evidence(["cc1plus: out of memory allocating 65536 bytes"], "") is not None
    assert out_of_memory_evidence(["virtual memory exhausted: Cannot allocate memory"], "")
    assert out_of_memory_evidence([], "step 'compile' was stopped in container x (exit 137)")


def test_an_ordinary_compile_error_is_not_out_of_memory() -> None:
    lines = ["scatter.cu(12): error: identifier 'foo' is undefined", "1 error detected"]
    assert out_of_memory_evidence(lines, "step 'compile' failed (exit 1)") is None


def test_the_message_names_the_jobs_and_the_fix() -> None:
    error = out_of_memory_error(
        "g++: fatal error: Killed signal terminated program cc1plus",
        jobs=4,
        jobs_variable="MAX_JOBS",
        memory_per_job_gib=2.0,
        recipe=Path("recipes/x.toml"),
    )
    text = error.one_line()
    assert exit_code_for(error) == EXIT_BUILD
    assert "ran out of memory with MAX_JOBS=4" in text
    assert "--jobs 2" in text and "memory_per_job_gib (now 2)" in text and "recipes/x.toml" in text
