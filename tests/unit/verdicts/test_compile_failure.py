"""The causes of a failed compile archwheel knows, read from real compiler, shell, CMake and
Python output (produced here where it costs a second: g++, nvcc, sh, bash, cmake)."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from archwheel.verdicts.compile_failure import (
    CPP_STANDARD,
    GLIBC_MATH,
    MAX_KEPT_LINE,
    MISSING_CUDA_HEADER,
    NVCC_NOT_FOUND,
    OUT_OF_MEMORY,
    EvidenceLines,
    FailureContext,
    classify_compile_failure,
    component_of,
    kept_line,
)
from archwheel.verdicts.compile_failure import (
    MAX_FIRST_LINES as MAX_FIRST,
)
from archwheel.verdicts.compile_failure import (
    MAX_STANDARD_LINES as MAX_STANDARDS,
)
from archwheel.verdicts.compile_failure import (
    MAX_TAIL_LINES as MAX_TAIL,
)
from tests.support.components import require

# torch 2.14's aten/src/ATen/ATen.h opens with this guard (torch/all.h says "PyTorch").
ATEN_GUARD = (
    "#pragma once\n\n#if !defined(_MSC_VER) && __cplusplus < 202002L\n"
    "#error C++20 or later compatible compiler is required to use ATen.\n#endif\n"
)
PINNED = FailureContext(toolchain="pypi", cuda_major=13, torch="2.14.1")


def _tool(name: str) -> str:
    path = shutil.which(name)
    require(path is not None, f"{name} not found")
    assert path is not None
    return path


def _output(args: list[str], cwd: Path, **kwargs: object) -> list[str]:
    """What a build log shows of one command: the command line (as ninja and setuptools echo
    it), then everything it printed."""
    done = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=120, check=False, **kwargs
    )  # type: ignore[call-overload]
    assert done.returncode != 0, done.stdout + done.stderr
    return [" ".join(args), *(done.stdout + done.stderr).splitlines()]


def _aten_source(tmp_path: Path, suffix: str) -> Path:
    (tmp_path / "inc" / "ATen").mkdir(parents=True)
    (tmp_path / "inc" / "ATen" / "ATen.h").write_text(ATEN_GUARD)
    source = tmp_path / f"ext{suffix}"
    source.write_text("#include <ATen/ATen.h>\nint f() { return 1; }\n")
    return source


def test_a_project_forcing_cpp17_against_torch_headers_is_named_with_its_flag(
    tmp_path: Path,
) -> None:
    source = _aten_source(tmp_path, ".cpp")
    # cpp_extension's own -std=c++20 first, the project's extra_compile_args after: last wins
    args = [_tool("g++"), "-std=c++20", "-Iinc", "-std=c++17", "-c", source.name, "-o", "x.o"]
    lines = _output(args, tmp_path)
    assert any("#error C++20 or later compatible compiler" in line for line in lines)
    lines += ["ninja: build stopped: subcommand failed.", "RuntimeError: Error compiling objects"]
    cause = classify_compile_failure(lines, PINNED)
    assert cause is not None and cause.kind == CPP_STANDARD
    assert "torch 2.14.1's headers need C++20 (ATen)" in cause.cause
    assert "-std=c++17" in cause.cause
    assert "-std=c++20" in cause.fix and "[[source.patches]]" in cause.fix
    assert cause.evidence.endswith(
        "#error C++20 or later compatible compiler is required to use ATen."
    )


def test_a_compiler_in_its_default_standard_is_told_to_use_cpp20(tmp_path: Path) -> None:
    source = _aten_source(tmp_path, ".cpp")
    args = [_tool("g++"), "-Iinc", "-c", source.name, "-o", "x.o"]  # GCC 12 defaults to gnu++17
    done = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode != 0
    cause = classify_compile_failure(done.stderr.splitlines(), FailureContext())
    assert cause is not None and cause.kind == CPP_STANDARD
    assert "older standard" in cause.cause and "CMAKE_CXX_STANDARD 20" in cause.fix


def test_nvcc_forced_to_cpp17_is_read_the_same(tmp_path: Path) -> None:
    source = _aten_source(tmp_path, ".cu")
    lines = _output([_tool("nvcc"), "-std=c++17", "-Iinc", "-c", source.name], tmp_path)
    cause = classify_compile_failure(lines, PINNED)
    assert cause is not None and cause.kind == CPP_STANDARD and "-std=c++17" in cause.cause


@pytest.mark.parametrize(
    ("header", "component", "wheel"),
    [
        ("cusparse.h", "cuSPARSE", "nvidia-cusparse"),
        ("cublas_v2.h", "cuBLAS", "nvidia-cublas"),
        ("cudnn.h", "cuDNN", "nvidia-cudnn-cu13"),
        ("curand_kernel.h", "cuRAND", "nvidia-curand"),
    ],
)
def test_a_missing_header_names_its_component_and_wheel(
    tmp_path: Path, header: str, component: str, wheel: str
) -> None:
    (tmp_path / "m.cpp").write_text(f"#include <{header}>\nint g() {{ return 0; }}\n")
    lines = _output([_tool("g++"), "-c", "m.cpp"], tmp_path)
    assert f"fatal error: {header}: No such file or directory" in "\n".join(lines)
    cause = classify_compile_failure(lines, FailureContext(toolchain="pypi", cuda_major=13))
    assert cause is not None and cause.kind == MISSING_CUDA_HEADER
    assert f"{header} is a header of {component}" in cause.cause
    assert wheel in cause.fix


def test_the_fix_follows_the_toolchain(tmp_path: Path) -> None:
    (tmp_path / "m.cu").write_text("#include <cusparse.h>\nint g() { return 0; }\n")
    lines = _output([_tool("nvcc"), "-c", "m.cu"], tmp_path)
    pinned = classify_compile_failure(lines, PINNED)
    assert pinned is not None and "torch's cuda-toolkit pin" in pinned.fix
    plain = classify_compile_failure(lines, FailureContext(toolchain="pypi", cuda_major=13))
    assert plain is not None and "[cusparse]" in plain.fix and "pypi_packages" in plain.fix
    image = classify_compile_failure(lines, FailureContext(toolchain="image", cuda_major=12))
    assert image is not None and "system_packages" in image.fix
    assert "nvidia-cusparse-cu12" in image.fix


def test_cccl_headers_seen_by_a_host_compiler_name_the_cccl_folder(tmp_path: Path) -> None:
    (tmp_path / "m.cpp").write_text("#include <thrust/device_vector.h>\nint g() { return 0; }\n")
    lines = _output([_tool("g++"), "-c", "m.cpp"], tmp_path)
    cause = classify_compile_failure(lines, PINNED)
    assert cause is not None and cause.kind == MISSING_CUDA_HEADER
    assert "include/cccl" in cause.cause and "-I/usr/local/cuda/include/cccl" in cause.fix


def test_a_missing_header_of_the_project_itself_is_not_a_cuda_component(tmp_path: Path) -> None:
    (tmp_path / "m.cpp").write_text('#include "kernels/cuda_utils.h"\nint g() { return 0; }\n')
    lines = _output([_tool("g++"), "-c", "m.cpp"], tmp_path)
    assert classify_compile_failure(lines) is None
    assert component_of("cuda/std/atomic") is not None
    assert component_of("cuda/kernels.h") is None
    assert component_of("nppi.h") is not None and component_of("npp_helpers.hpp") is None


def test_a_clang_missing_header_line_is_read() -> None:
    line = "m.cpp:1:10: fatal error: 'cublasLt.h' file not found"
    cause = classify_compile_failure([line], PINNED)
    assert cause is not None and "cuBLAS" in cause.cause


@pytest.mark.parametrize(
    "shell", [["sh", "-c", "nvcc --version"], ["bash", "-c", "nvcc --version"]]
)
def test_nvcc_not_on_path(tmp_path: Path, shell: list[str]) -> None:
    lines = _output(shell, tmp_path, env={"PATH": "/nonexistent:/usr/bin:/bin", "HOME": "/tmp"})
    cause = classify_compile_failure(lines)
    assert cause is not None and cause.kind == NVCC_NOT_FOUND
    assert "/usr/local/cuda/bin/nvcc" in cause.cause and "CUDACXX" in cause.fix


def test_nvcc_missing_from_the_toolkit_itself(tmp_path: Path) -> None:
    """sh running /usr/local/cuda/bin/nvcc where the toolkit has none (the line sh prints is
    the same for any missing path: here one that does not exist on this machine)."""
    lines = _output(["sh", "-c", "/nonexistent/cuda/bin/nvcc -V"], tmp_path)
    cause = classify_compile_failure(lines)
    assert cause is not None and "as /nonexistent/cuda/bin/nvcc" in cause.cause
    toolkit = classify_compile_failure(
        [line.replace("/nonexistent/cuda/bin/nvcc", "/usr/local/cuda/bin/nvcc") for line in lines],
        FailureContext(toolchain="pypi", cuda_major=13),
    )
    assert toolkit is not None and "no nvcc at /usr/local/cuda/bin/nvcc" in toolkit.cause
    assert "nvidia-cuda-nvcc" in toolkit.fix


def test_glibc_2_42_s_rsqrt_against_nvcc_13_0_s_math_headers() -> None:
    """The lines a real build of the example printed with nvcc 13.0 on sid (glibc 2.43): the
    first error names rsqrt; the cause and its fix come from it, through the kept evidence."""
    printed = [
        "  [1/7] nvcc reduce.cu (1.0 s)",
        "  /usr/include/x86_64-linux-gnu/bits/mathcalls.h(206): error: exception specification "
        'is incompatible with that of previous function "rsqrt" (declared at line 629 of '
        "/usr/local/cuda/bin/..//include/crt/math_functions.h)",
        "     extern double rsqrt (double __x) noexcept (true); extern double __rsqrt (double "
        "__x) noexcept (true);",
        '  2 errors detected in the compilation of "/build/src/csrc/reduce.cu".',
        "ERROR: Failed to build one or more wheels",
    ]
    kept = EvidenceLines()
    for line in printed:
        kept.add(line)
    cause = classify_compile_failure(kept.lines())
    assert cause is not None and cause.kind == GLIBC_MATH
    assert "glibc (2.42 or later)" in cause.cause and 'cuda = "13.2"' in cause.fix


def test_python_not_finding_nvcc(tmp_path: Path) -> None:
    code = "import subprocess; subprocess.run(['/opt/cuda-none/bin/nvcc', '-V'])"
    lines = _output([sys.executable, "-c", code], tmp_path)
    cause = classify_compile_failure(lines)
    assert cause is not None and cause.kind == NVCC_NOT_FOUND
    assert "/opt/cuda-none/bin/nvcc" in cause.cause


def test_cmake_not_finding_the_cuda_compiler(tmp_path: Path) -> None:
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(t LANGUAGES CXX CUDA)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CUDACXX": "/opt/none/bin/nvcc"}
    lines = _output([_tool("cmake"), "-S", ".", "-B", "b"], tmp_path, env=env)
    cause = classify_compile_failure(lines)
    assert cause is not None and cause.kind == NVCC_NOT_FOUND
    assert "CUDACXX" in cause.evidence


def test_a_compiler_killed_for_memory(tmp_path: Path) -> None:
    """g++ whose cc1plus is killed (as the kernel's OOM killer does) says so in one line."""
    source = tmp_path / "big.cpp"
    source.write_text(
        "#include <regex>\n#include <iostream>\n#include <map>\n" * 3 + "int main(){}\n"
    )
    driver = subprocess.Popen(
        [_tool("g++"), "-O2", "-c", str(source), "-o", str(tmp_path / "big.o")],
        stderr=subprocess.PIPE,
        text=True,
    )
    child = None
    deadline = time.monotonic() + 20
    while child is None and time.monotonic() < deadline and driver.poll() is None:
        child = _child_named(driver.pid, "cc1plus")
        time.sleep(0.02)
    require(child is not None, "cc1plus finished before it could be killed")
    assert child is not None
    os.kill(child, signal.SIGKILL)
    _, err = driver.communicate(timeout=60)
    cause = classify_compile_failure(err.splitlines())
    assert cause is not None and cause.kind == OUT_OF_MEMORY
    assert "Killed signal terminated program cc1plus" in cause.evidence


def _child_named(pid: int, name: str) -> int | None:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        if comm == name and parent == pid:
            return int(entry.name)
    return None


def test_a_compiler_out_of_address_space(tmp_path: Path) -> None:
    source = tmp_path / "big.cpp"
    source.write_text('#include <regex>\nint main(){ std::regex r("a+"); }\n')

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (150 << 20, 150 << 20))

    lines = _output([_tool("g++"), "-O2", "-c", str(source)], tmp_path, preexec_fn=limit)
    cause = classify_compile_failure(lines)
    assert cause is not None and cause.kind == OUT_OF_MEMORY


def test_the_earliest_cause_wins_and_unknown_output_has_none() -> None:
    lines = [
        "/build/src/a.cpp:1:10: fatal error: cusparse.h: No such file or directory",
        "g++: fatal error: Killed signal terminated program cc1plus",
    ]
    cause = classify_compile_failure(lines)
    assert cause is not None and cause.kind == MISSING_CUDA_HEADER
    plain = ['a.cu(12): error: identifier "foo" is undefined', "1 error detected"]
    assert classify_compile_failure(plain) is None


def test_evidence_lines_keep_the_first_error_of_a_long_output() -> None:
    evidence = EvidenceLines(first=5, standards=2, tail=10)
    evidence.add("[1/9] c++ -std=c++17 -c a.cpp")
    evidence.add(
        "a.cpp:1: error: #error C++20 or later compatible compiler is required to use ATen."
    )
    for n in range(5000):
        evidence.add(f"a.cpp:{n}: note: candidate template ignored")
    evidence.add("ninja: build stopped: subcommand failed.")
    lines = evidence.lines()
    assert len(lines) <= 5 + 2 + 10
    assert lines[:2] == [
        "[1/9] c++ -std=c++17 -c a.cpp",
        "a.cpp:1: error: #error C++20 or later compatible compiler is required to use ATen.",
    ]
    cause = classify_compile_failure(lines, PINNED)
    assert cause is not None and "-std=c++17" in cause.cause


MIB = 1 << 20  # the pieces a line without an end comes in (effects.process.MAX_LINE)


def _endless(unit: str, pieces: int) -> tuple[float, int]:
    """Seconds to keep and classify ``pieces`` MiB pieces of one endless line, and the most
    characters kept."""
    piece = (unit * (MIB // len(unit) + 1))[:MIB]
    start = time.perf_counter()
    evidence = EvidenceLines()
    for _ in range(pieces):
        evidence.add(piece)
    lines = evidence.lines()
    classify_compile_failure(lines, PINNED)
    return time.perf_counter() - start, sum(len(line) for line in lines)


@pytest.mark.parametrize("unit", [":", ": /a/a/", "fatal error: ", "No such file or directory: '"])
def test_a_log_that_is_one_endless_line_is_kept_bounded_and_read_in_linear_time(
    unit: str,
) -> None:
    small, kept_small = _endless(unit, 8)
    large, kept_large = _endless(unit, 32)
    bound = (MAX_FIRST + MAX_STANDARDS + MAX_TAIL) * MAX_KEPT_LINE
    assert kept_small <= bound and kept_large <= bound
    assert large < 2.0, large  # a quadratic reader took a minute for a few hundred MiB
    assert large / max(small, 0.02) < 8, (small, large)  # 4x the input, about 4x the time


def test_a_kept_line_is_cut_but_keeps_the_standard_a_long_command_sets() -> None:
    command = "g++ " + "-I/opt/include/a " * 500 + "-std=c++17 -c ext.cpp " + "-DX=1 " * 50
    kept = kept_line(command)
    assert len(kept) <= MAX_KEPT_LINE and "-std=c++17" in kept and kept.startswith("g++ -I")
    assert kept_line("short line") == "short line"
    evidence = EvidenceLines()
    evidence.add(command)
    evidence.add("a.cpp:1: error: #error C++20 or later compatible compiler is required")
    cause = classify_compile_failure(evidence.lines(), PINNED)
    assert cause is not None and "-std=c++17" in cause.cause
