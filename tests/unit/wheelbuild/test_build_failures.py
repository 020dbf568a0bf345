"""A compile that ran out of memory gets one message with the fix, whatever the exit code."""

from __future__ import annotations

from pathlib import Path

from archwheel.effects.engine import OOM_LIKELY
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
    killed_inside = (
        "step 'compile' was killed in container x (exit 137, SIGKILL) while the container ran "
        f"on: {OOM_LIKELY}"
    )
    assert out_of_memory_evidence([], killed_inside) == killed_inside


def test_a_container_stopped_from_outside_is_not_out_of_memory() -> None:
    message = (
        "container x was stopped from outside while step 'compile' ran (exit 137): "
        "`docker kill`/`stop`, or the engine restarting"
    )
    assert out_of_memory_evidence(["[4/7] nvcc sort_pairs.cu (10.3 s)"], message) is None


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


def test_a_full_file_system_in_the_compile_is_named_with_its_size(tmp_path: Path) -> None:
    from archwheel.wheelbuild.failures import out_of_space_error, out_of_space_evidence

    lines = [
        "[2/7] nvcc elementwise.cu",
        "<built-in>: fatal error: when writing output to ../obj/x.ii: No space left on device",
        "ERROR: Failed building wheel for archwheel-example",
    ]
    evidence = out_of_space_evidence(lines)
    assert evidence is not None and "x.ii" in evidence
    assert out_of_space_evidence(["error: identifier 'foo' is undefined"]) is None
    error = out_of_space_error(evidence, work=tmp_path / "archwheel-work-x")
    assert f"its work folder in {tmp_path}" in error.message and "filled up" in error.message
    assert exit_code_for(error) == EXIT_BUILD
