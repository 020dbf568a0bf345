"""The static look at a project's build files (``verdicts.source_archs``): literal targets,
own arch variables and switches; what is built from a value or commented out does not count.
The real sdists' answers are in tests/integration/realwheel/test_source_check_real.py."""

from __future__ import annotations

from archwheel.verdicts.source_archs import SourceCheck, check_build_files

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
    assert rows[3][1].startswith(
        "not set: MYPROJ_FORCE_BUILD (setup.py:2), MYPROJ_CUDA_ARCHS (setup.py:3)"
    )


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
        (
            "project switches",
            "not set: MYPROJ_CUDA_ARCHS (setup.py:2): set in [build] env the one that selects "
            "or turns on what you build",
        )
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


# A project whose switch names are constants: of setup.py itself, of a module of the package
# (imported by name, with an alias, relatively) and of a module read through its name.
PROJECT = {
    "setup.py": """\
import os
from setuptools import setup
from myext.build_config import OPS_ENV, FORCE as F
from .local_names import SKIP_ENV
import build_settings as bs
LOCAL = "MYEXT_LOCAL"
cuda_version = os.getenv("CUDA_VERSION", "")
version = "1.0"
if cuda_version:
    version += "+cu" + cuda_version.replace(".", "")
ops = os.environ.get(OPS_ENV, "").split(",")
force = F in os.environ
debug = os.getenv(bs.DEBUG_ENV)
local = os.getenv(LOCAL)
skip = os.environ[SKIP_ENV]
archs = os.environ.get("TORCH_CUDA_ARCH_LIST")
jobs = os.getenv("MAX_JOBS")
computed = os.getenv(prefix + "_OPS")
abi3 = os.getenv("MYEXT_ABI3") == "1"
setup(name="myext", version=version, options={"bdist_wheel": {"py_limited_api": "cp39"}} if abi3 else {})
""",
    "myext/build_config.py": 'OPS_ENV = "MYEXT_OPS"\nFORCE: str = "MYEXT_FORCE_CUDA"\n',
    "local_names.py": "SKIP_ENV = 'MYEXT_SKIP'\n",
    "build_settings.py": "DEBUG_ENV = 'MYEXT_DEBUG'  # read by setup.py\n",
}


def _project_check() -> SourceCheck:
    return check_build_files(
        [("setup.py", PROJECT["setup.py"])], "TORCH_CUDA_ARCH_LIST", read=PROJECT.get
    )


def test_switch_names_defined_elsewhere_in_the_project_are_followed() -> None:
    check = _project_check()
    found = {s.name: (s.where, s.via) for s in check.switch_details}
    assert found["MYEXT_OPS"] == ("setup.py:11", "myext/build_config.py:1")
    assert found["MYEXT_FORCE_CUDA"] == ("setup.py:12", "myext/build_config.py:2")  # an alias
    assert found["MYEXT_DEBUG"] == ("setup.py:13", "build_settings.py:1")  # module.NAME
    assert found["MYEXT_LOCAL"] == ("setup.py:14", "setup.py:6")
    assert found["MYEXT_SKIP"] == ("setup.py:15", "local_names.py:1")  # from .local_names
    # a name the build computes is not guessed
    assert not any(name.endswith("_OPS") and name != "MYEXT_OPS" for name in found)
    # without the project's other files, only the literal reads and setup.py's own constants
    alone = check_build_files([("setup.py", PROJECT["setup.py"])], "TORCH_CUDA_ARCH_LIST")
    assert {s.name for s in alone.switch_details} == {
        "CUDA_VERSION", "MYEXT_LOCAL", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "MYEXT_ABI3"}  # fmt: skip


def test_each_switch_is_said_with_what_becomes_of_it() -> None:
    check = _project_check()
    changes = {s.name: s.changes for s in check.switch_details if s.changes}
    assert changes == {"CUDA_VERSION": ("the version string",), "MYEXT_ABI3": ("the wheel tag",)}
    row = check.switch_row(
        {"MYEXT_FORCE_CUDA": "1", "MYEXT_OPS": "scan,sort"},
        {"TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "CUDA_HOME"},
    )
    assert row is not None and row[0] == "project switches"
    parts = row[1].split("; ")
    assert parts[0] == (
        "set by the recipe: MYEXT_OPS='scan,sort' (setup.py:11, its name from "
        "myext/build_config.py:1), MYEXT_FORCE_CUDA='1' (setup.py:12, its name from "
        "myext/build_config.py:2)"
    )
    assert parts[1].startswith("not set: MYEXT_DEBUG (setup.py:13, its name from build_settings")
    assert "MYEXT_SKIP" in parts[1] and "MYEXT_OPS" not in parts[1]
    assert parts[2] == (
        "set by archwheel itself (leave them to it): TORCH_CUDA_ARCH_LIST (setup.py:16), "
        "MAX_JOBS (setup.py:17)"
    )
    assert parts[3] == (
        "CUDA_VERSION (setup.py:7) changes the version string: leave it out of [build] env "
        "unless that is meant"
    )
    assert parts[4].startswith("MYEXT_ABI3 (setup.py:19) changes the wheel tag")
    # never advised: what archwheel sets, and what the recipe already sets
    advised = parts[1]
    for name in ("TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "MYEXT_FORCE_CUDA", "CUDA_VERSION"):
        assert name not in advised


def test_other_platforms_arch_lists_are_not_the_projects_own_cuda_list() -> None:
    # PyTorch's setup.py and cmake/public/utils.cmake read these beside TORCH_CUDA_ARCH_LIST
    text = (
        'import os\nosx = os.getenv("CMAKE_OSX_ARCHITECTURES")\n'
        'rocm = os.environ.get("PYTORCH_ROCM_ARCH")\nxpu = os.getenv("TORCH_XPU_ARCH_LIST")\n'
        'mine = os.getenv("MYPROJ_CUDA_ARCHS")\n'
    )
    check = check_build_files([("setup.py", text)], "TORCH_CUDA_ARCH_LIST")
    assert [(f.kind, f.where) for f in check.findings] == [("own-variable", "setup.py:5")]
    assert [name for name, _ in check.switches] == [
        "CMAKE_OSX_ARCHITECTURES",
        "PYTORCH_ROCM_ARCH",
        "TORCH_XPU_ARCH_LIST",
        "MYPROJ_CUDA_ARCHS",
    ]  # still switches of the project: only the arch-variable finding is left out
