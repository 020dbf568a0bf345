"""Modules selected one switch each through builder classes (DeepSpeed's op builders), on a
small project of that shape: each class's BUILD_VAR, its .cu sources, the default switch that
setup.py gives those reads, and what a recipe's values select."""

from __future__ import annotations

from archwheel.verdicts.builder_selection import read_builder_selection
from archwheel.verdicts.module_selection import ModuleSelection
from archwheel.verdicts.source_archs import check_build_files

SETUP = """\
import os
from ops.all_ops import ALL_OPS
def get_env_if_set(key, default=0):
    return os.environ.get(key, default)
BUILD_OP_DEFAULT = int(get_env_if_set('MY_BUILD_OPS', 0))
def op_enabled(op_name):
    env_var = ALL_OPS[op_name].BUILD_VAR
    return int(get_env_if_set(env_var, BUILD_OP_DEFAULT))
ext_modules = [b.builder() for n, b in ALL_OPS.items() if op_enabled(n)]
"""
BUILDER = """\
class {cls}Builder:
    BUILD_VAR = "MY_BUILD_{upper}"
    NAME = "{name}"
    def sources(self):
        return ["csrc/{name}/{name}.cpp", "{prefix}{name}/{name}_kernel.cu"]
"""
FILES = {
    "setup.py": SETUP,
    "ops/__init__.py": "",
    "ops/all_ops.py": "ALL_OPS = {}\n",
    "ops/adam.py": BUILDER.format(cls="Adam", upper="ADAM", name="adam", prefix="csrc/"),
    "ops/lamb.py": BUILDER.format(cls="Lamb", upper="LAMB", name="lamb", prefix="csrc/"),
    # a source written relative to the package, as DeepSpeed's inference/v2 ones are
    "ops/rope.py": BUILDER.format(cls="Rope", upper="ROPE", name="rope", prefix="kernels/"),
    "csrc/adam/adam_kernel.cu": "",
    "csrc/lamb/lamb_kernel.cu": "",
    "mypkg/kernels/rope/rope_kernel.cu": "",
}


def _select(env: dict[str, str]) -> ModuleSelection | None:
    check = check_build_files([("setup.py", SETUP)], "TORCH_CUDA_ARCH_LIST", read=FILES.get)
    return read_builder_selection(
        "setup.py", SETUP, files=tuple(FILES), read=FILES.get, switches=check.switches,
        recipe_env=env,
    )  # fmt: skip


def test_each_builder_is_a_module_with_its_switch_and_sources() -> None:
    selection = _select({"MY_BUILD_OPS": "0", "MY_BUILD_ADAM": "1"})
    assert selection is not None
    assert selection.switch == "MY_BUILD_OPS" and selection.where == "setup.py:5"
    assert dict(selection.modules) == {
        "adam": ("csrc/adam/adam_kernel.cu",),
        "lamb": ("csrc/lamb/lamb_kernel.cu",),
        "rope": ("mypkg/kernels/rope/rope_kernel.cu",),
    }
    assert selection.built() == ("csrc/adam/adam_kernel.cu",)
    assert selection.left_out() == ("csrc/lamb/lamb_kernel.cu", "mypkg/kernels/rope/rope_kernel.cu")
    assert selection.row()[1].startswith(
        "MY_BUILD_OPS and each module's own switch (BUILD_VAR of 3 builder classes); the recipe "
        "sets MY_BUILD_OPS=0, MY_BUILD_ADAM=1 select the modules to build (adam, lamb, rope): adam"
    )


def test_the_default_switch_builds_all_but_those_turned_off() -> None:
    selection = _select({"MY_BUILD_OPS": "1", "MY_BUILD_LAMB": "0"})
    assert selection is not None
    assert selection.selected == ("adam", "rope")
    assert selection.left_out() == ("csrc/lamb/lamb_kernel.cu",)


def test_nothing_is_read_where_the_recipe_sets_no_switch_of_theirs() -> None:
    assert _select({}) is None  # the project's default is computed: not followed
    assert _select({"OTHER": "1"}) is None
