"""A compile that ran out of memory gets one message with the fix, whatever the exit code; a
failed compile whose output shows another known cause ends with that cause, its fix and the
path of the full log."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from archwheel.effects.engine import OOM_LIKELY
from archwheel.errors import BuildError
from archwheel.exit_codes import EXIT_BUILD, exit_code_for
from archwheel.wheelbuild import BuildOutput, BuildRequest, build_wheel
from archwheel.wheelbuild.run.failures import out_of_memory_error, out_of_memory_evidence
from archwheel.wheelbuild.run.workfolder import WorkFolder


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
    from archwheel.wheelbuild.run.failures import out_of_space_error, out_of_space_evidence

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


# -- a failed compile step, as the work folder reports it ------------------------------------


class FailingContainer:
    """Stands in for a container (none can run here): prints the lines, then fails as
    ``Container.call`` does, with the step's last line."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def call(self, command: object, *, sink: Callable[[str], None], **_: object) -> None:
        for line in self.lines:
            sink(line)
        raise BuildError(
            f"step 'compile' failed in container archwheel-x (exit 1): {self.lines[-1]}"
        )


def _fail_compile(tmp_path: Path, lines: list[str], step: str = "compile") -> BuildError:
    plan = build_wheel(BuildRequest(recipe="example", out=tmp_path / "out", plan_only=True)).plan
    (compile_step,) = [s for s in plan.phases[-1].steps if s.name == "compile"]
    log_path = tmp_path / "build.log"
    with log_path.open("w") as log:
        work = WorkFolder(engine=None, output=BuildOutput(log))  # type: ignore[arg-type]
        with pytest.raises(BuildError) as caught:
            work._call(
                FailingContainer(lines),  # type: ignore[arg-type]
                plan,
                dataclasses.replace(compile_step, name=step),
                tmp_path,
            )
    return caught.value


CPP17_LOG = [
    "[1/2] c++ -MMD -MF ext.o.d -I/usr/local/cuda/include -std=c++20 -O3 -std=c++17 -c ext.cpp",
    "FAILED: /build/src/build/temp.linux-x86_64-cpython-311/ext.o",
    "In file included from ext.cpp:1:",
    "/opt/archwheel/venv/lib/python3.11/site-packages/torch/include/ATen/ATen.h:4:2: error: "
    "#error C++20 or later compatible compiler is required to use ATen.",
    *[f"ext.cpp:{n}: error: 'concept' does not name a type" for n in range(3000)],
    "ninja: build stopped: subcommand failed.",
    "RuntimeError: Error compiling objects for extension",
    "error: subprocess-exited-with-error",
]


def test_a_known_cause_ends_the_build_with_its_fix_and_the_log(tmp_path: Path) -> None:
    error = _fail_compile(tmp_path, CPP17_LOG)
    text = error.one_line()
    assert exit_code_for(error) == EXIT_BUILD
    assert text.startswith("the compile failed: torch's headers need C++20 (ATen)")
    assert "-std=c++17" in text and "change the project's -std=c++17 to -std=c++20" in text
    assert text.endswith(f"the full log: {tmp_path / 'build.log'})")
    assert "subprocess-exited-with-error" not in text  # the last line is not the reason


def test_an_unknown_cause_keeps_the_last_line_and_names_the_log(tmp_path: Path) -> None:
    error = _fail_compile(tmp_path, ["a.cu(12): error: identifier 'foo' is undefined", "1 error"])
    text = error.one_line()
    assert "step 'compile' failed" in text and text.endswith(
        f"1 error (the full log: {tmp_path / 'build.log'})"
    )


@pytest.mark.parametrize("step", ["compile", "targets"])  # a partial build compiles too
def test_memory_keeps_its_job_count_message_with_the_log(tmp_path: Path, step: str) -> None:
    error = _fail_compile(
        tmp_path, ["g++: fatal error: Killed signal terminated program cc1plus", "error"], step
    )
    text = error.one_line()
    assert "ran out of memory with MAX_JOBS=" in text and "the full log:" in text


def test_a_step_other_than_the_compile_is_not_read_for_causes(tmp_path: Path) -> None:
    error = _fail_compile(tmp_path, CPP17_LOG, step="requirements")
    assert error.one_line().startswith("step 'compile' failed in container")
    assert "the full log" not in error.one_line()
