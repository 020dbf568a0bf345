"""The static look at a project's build files (``verdicts.source_archs``): literal targets,
own arch variables and switches; what is built from a value or commented out does not count.
The real sdists' answers are in tests/integration/realwheel/test_source_check_real.py."""

from __future__ import annotations

from archwheel.verdicts.source_archs import check_build_files

SETUP = """\
import os
FORCE = os.getenv("MYPROJ_FORCE_BUILD", "0") == "1"
archs = os.environ.get("MYPROJ_CUDA_ARCHS", "80;90")
if "MYPROJ_SKIP" in os.environ:
    pass
cc_flag = ["-gencode", "arch=compute_80,code=sm_80"]
cc_flag.append("-gencode=arch=compute_120,code=compute_120")
# cc_flag.append("arch=compute_70,code=sm_70")   (a comment: not counted)
for cc in archs.split(";"):
    cc_flag.append(f"arch=compute_{cc},code=sm_{cc}")   # from a value: not hard-coded
nvcc = ["-arch=sm_90a"]
home = os.environ["HOME"]
"""

CMAKE = """\
set(CMAKE_CUDA_ARCHITECTURES 75 86-real)
set_target_properties(k PROPERTIES CUDA_ARCHITECTURES "${ARCHS}")
if(DEFINED ENV{X})
  message($ENV{KERNEL_ARCH_LIST})
endif()
"""


def test_literal_targets_own_variables_and_switches_are_found() -> None:
    check = check_build_files([("setup.py", SETUP)], "TORCH_CUDA_ARCH_LIST")
    assert check.hard_coded == ("sm_80", "sm_90a", "compute_120")
    kinds = [(f.kind, f.where) for f in check.findings]
    assert kinds == [("own-variable", "setup.py:3"), ("hard-coded", "setup.py:6,7,11")]
    assert [name for name, _ in check.switches] == [
        "MYPROJ_FORCE_BUILD",
        "MYPROJ_CUDA_ARCHS",
        "MYPROJ_SKIP",
    ]  # HOME is read by many build files: not a switch
    rows = check.rows(["sm_80", "sm_90"])
    assert [label for label, _ in rows] == ["source check"] * 3 + ["project switches"]
    assert rows[2][1].startswith("hard-coded targets not requested: sm_90a (compiled anyway")
    assert rows[3][1].startswith("MYPROJ_FORCE_BUILD (setup.py:2), MYPROJ_CUDA_ARCHS (setup.py:3)")


def test_cmake_literal_architectures_count_and_variables_do_not() -> None:
    check = check_build_files([("CMakeLists.txt", CMAKE)], "TORCH_CUDA_ARCH_LIST")
    assert check.hard_coded == ("sm_75", "sm_86")
    assert [f.where for f in check.findings if f.kind == "hard-coded"] == ["CMakeLists.txt:1"]
    assert [f.where for f in check.findings if f.kind == "own-variable"] == ["CMakeLists.txt:4"]


def test_a_project_that_reads_the_recipes_own_variable_is_not_flagged() -> None:
    text = 'import os\narchs = os.environ.get("MYPROJ_CUDA_ARCHS")\n'
    check = check_build_files([("setup.py", text)], "MYPROJ_CUDA_ARCHS")
    assert check.findings == ()
    assert check.rows([]) == [
        ("project switches", "MYPROJ_CUDA_ARCHS (setup.py:2): set them in [build] env")
    ]


def test_a_clean_project_gives_no_rows() -> None:
    check = check_build_files([("setup.py", "from setuptools import setup\nsetup()\n")], "X")
    assert check.rows(["sm_80"]) == []


def test_a_projects_own_environment_helpers_are_read_as_switches() -> None:
    """DeepSpeed reads its switches through helpers of its setup.py (is_env_set,
    get_env_if_set): a call of a function named for the environment with a name in capitals."""
    setup = (
        "def is_env_set(key):\n    return bool(os.environ.get(key, None))\n"
        'use_ninja = is_env_set("DS_ENABLE_NINJA")\n'
        "BUILD_OP_DEFAULT = int(get_env_if_set('DS_BUILD_OPS', 1))\n"
        "if command_exists('git') and not is_env_set('DS_BUILD_STRING'):\n    pass\n"
        "value = environment_value('lowercase_is_not_a_variable')\n"
        "setenv('X')\nread_settings('NOT_ENV_HELPER')\n"
    )
    check = check_build_files([("setup.py", setup)], "TORCH_CUDA_ARCH_LIST")
    assert [name for name, _ in check.switches] == [
        "DS_ENABLE_NINJA",
        "DS_BUILD_OPS",
        "DS_BUILD_STRING",
    ]
    assert dict(check.switches)["DS_BUILD_OPS"] == "setup.py:4"
