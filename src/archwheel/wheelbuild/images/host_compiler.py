"""nvcc's host compiler, on a base whose default gcc is newer than nvcc accepts.

nvcc refuses a host gcc newer than its ``crt/host_config.h`` allows: nvcc 13.0 on sid's gcc
16.2 stops every compile with ``#error -- unsupported GNU version! gcc versions later than 15
are not supported!``. Debian packages older gccs beside its default (sid: ``g++-14``,
``g++-15``, ``g++-16``). So when the build's base is an archwheel Debian suite whose default
gcc (``facts/base_pythons.toml``) is newer than the newest this CUDA accepts (``NEWEST_GCC``),
the builder image gets ``g++-N`` (``[toolchain] system_packages``) and nvcc gets
``NVCC_CCBIN=g++-N`` (``[build] env``), which nvcc reads however it is started
(``NVCC_CCBIN=/nonexistent nvcc -c k.cu`` fails naming that path, nvcc 13.0). The build's other
C and C++ compiles keep the suite's gcc: one libstdc++, the suite's, serves both. A recipe that
already names nvcc's host compiler (``NVCC_CCBIN``, ``CUDAHOSTCXX``, ``-ccbin`` in a value) keeps
its own; a CUDA this table does not know is left to nvcc, and a refusal to
``verdicts/compile_failure.py``'s ``host-compiler`` line.

The base's C library counts too: glibc 2.42 (sid) declares ``rsqrt`` in a way nvcc's math
headers contradict before CUDA 13.2, so such a pair is refused at plan time (exit 2), before
any image is made, naming the CUDA that compiles there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType

from archwheel.errors import RecipeError
from archwheel.facts.base_pythons import BasePythons, load_base_pythons
from archwheel.wheelbuild.images.python_base import debian_suite
from archwheel.wheelbuild.recipes.recipe_model import Recipe

# The newest gcc major nvcc accepts, by CUDA major.minor: crt/host_config.h's
# "#if __GNUC__ > N ... #error -- unsupported GNU version!" (nvcc 13.0.88, and nvidia-cuda-crt
# 13.1.115 and 13.2.86 from the package index: N = 15). Only what was read here is listed.
NEWEST_GCC: Mapping[tuple[int, int], int] = MappingProxyType(
    {(13, 0): 15, (13, 1): 15, (13, 2): 15}
)
# glibc 2.42 declares rsqrt and rsqrtf (C23) noexcept; nvcc's crt/math_functions.h declares them
# without until 13.2 (_NV_RSQRT_SPECIFIER, "#if __GLIBC_PREREQ(2,42)"), and every .cu that
# includes <cmath> stops: 'exception specification is incompatible with that of previous
# function "rsqrt"' (nvcc 13.0 on sid's glibc 2.43, seen in a real build). The releases read
# here that lack the fix:
GLIBC_RSQRT = (2, 42)
WITHOUT_RSQRT_FIX = frozenset({(13, 0), (13, 1)})
# A recipe value that already chooses nvcc's host compiler.
_CHOSEN = ("NVCC_CCBIN", "CUDAHOSTCXX", "CMAKE_CUDA_HOST_COMPILER")


def with_host_compiler(
    recipe: Recipe, table: BasePythons | None = None
) -> tuple[Recipe, str | None]:
    """``recipe`` with an older ``g++-N`` for nvcc where its Debian base's gcc is too new for
    its CUDA, and the plan's words for it (None: nothing changed)."""
    suite_name = debian_suite(recipe.toolchain.base_image)
    cuda = recipe.toolchain.cuda
    if recipe.kind != "extension" or suite_name is None or cuda is None:
        return recipe, None
    suite = (table or load_base_pythons()).suite(suite_name)
    if (
        suite is not None
        and suite.glibc >= GLIBC_RSQRT
        and (cuda.major, cuda.minor) in (WITHOUT_RSQRT_FIX)
    ):
        raise RecipeError(
            f"{recipe.path}: CUDA {cuda} cannot compile on {recipe.toolchain.base_image}: its "
            f"glibc {suite.glibc[0]}.{suite.glibc[1]} declares rsqrt noexcept, which nvcc's "
            "math headers contradict before CUDA 13.2",
            hint='[toolchain] cuda = "13.2" for this Python, or a base with glibc < 2.42 '
            "(trixie, bookworm)",
        )
    newest = NEWEST_GCC.get((cuda.major, cuda.minor))
    if suite is None or suite.gcc is None or newest is None or suite.gcc <= newest:
        return recipe, None
    env = recipe.build.env
    if any(key in _CHOSEN for key in env) or any("ccbin" in value for value in env.values()):
        return recipe, None
    compiler = f"g++-{newest}"
    packages = (*recipe.toolchain.system_packages, compiler)
    toolchain = dataclasses.replace(recipe.toolchain, system_packages=packages)
    build = dataclasses.replace(recipe.build, env=MappingProxyType({**env, "NVCC_CCBIN": compiler}))
    why = (
        f"nvcc's host compiler {compiler} (NVCC_CCBIN): CUDA {cuda} accepts gcc <= {newest}, "
        f"{suite_name}'s gcc is {suite.gcc}"
    )
    return dataclasses.replace(recipe, toolchain=toolchain, build=build), why
