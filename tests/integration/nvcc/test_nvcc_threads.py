"""nvcc ``--threads`` given twice: real nvcc 13 warns ("incompatible redefinition for option
'threads'") when the project's command line has its own and archwheel's NVCC_APPEND_FLAGS adds
another. archwheel's compiler launcher (wheelbuild/compile/remote_cache.py), which every cached
compile runs through, drops archwheel's where the command line has one; the plan adds none
where the project's build files show one (parallel.own_threads_in, tests/unit).

sccache itself is stood in for by a script that runs the compiler it is given (what sccache does
with a call it cannot cache, and what the launcher does where sccache fails): the launcher's part
is what is tested, nvcc is real.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from archwheel.wheelbuild.compile.sccache_launcher import launcher_script

pytestmark = [pytest.mark.nvcc]

WARNING = "incompatible redefinition for option 'threads'"


def compile_with(tmp_path: Path, nvcc: Path, own: list[str], *, launcher: bool) -> str:
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    toolkit = tmp_path / "toolkit-id"
    toolkit.write_text("nvcc 13 (test)\n")
    launcher_dir, real_dir = tmp_path / "launcher", tmp_path / "real"
    launcher_dir.mkdir(exist_ok=True)
    real_dir.mkdir(exist_ok=True)
    stand_in = real_dir / "sccache"
    (launcher_dir / "sccache").write_text(
        launcher_script(str(toolkit), sccache=str(stand_in), names=str(tmp_path / "names"),
                        fallbacks=str(tmp_path / "fallbacks"), off=str(tmp_path / "off"))
    )  # fmt: skip
    stand_in.write_text('#!/bin/sh\nexec "$@"\n')  # stand-in: runs the compiler
    for script in (launcher_dir / "sccache", stand_in):
        script.chmod(0o755)
    path = f"{launcher_dir}:{real_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    env = {**os.environ, "PATH": path, "NVCC_APPEND_FLAGS": "--threads 2"}
    prefix = ["sccache"] if launcher else []
    done = subprocess.run(
        [*prefix, str(nvcc), *own, "-arch=sm_80", "-c", "k.cu", "-o", "k.o"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stderr


@pytest.mark.parametrize("own", [["--threads", "4"], ["-t4"]])
def test_the_projects_own_threads_leave_nvcc_without_a_warning(
    own: list[str], tmp_path: Path, nvcc: Path
) -> None:
    assert WARNING in compile_with(tmp_path, nvcc, own, launcher=False)  # the fault is real
    assert WARNING not in compile_with(tmp_path, nvcc, own, launcher=True)
