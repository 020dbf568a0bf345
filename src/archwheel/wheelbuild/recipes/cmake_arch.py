"""How an arch list in CMake's syntax (``[arch] format = "cmake"``) reaches CMake.

CMake reads ``CMAKE_CUDA_ARCHITECTURES`` as a variable (``-DCMAKE_CUDA_ARCHITECTURES=...`` on
its command line, or a ``set()`` in the project), never from an environment variable of that
name. From the environment it reads only ``CUDAARCHS`` (CMake >= 3.20), and only as the first
value of ``CMAKE_CUDA_ARCHITECTURES`` where nothing defines it when CUDA is enabled. The ways
CMake projects are built each take one of these:

=========================  ====================================================================
scikit-build-core          ``CMAKE_ARGS`` (split like a shell, added to its cmake command line)
scikit-build               ``CMAKE_ARGS`` likewise
a setup.py that runs cmake passes its environment on (``CUDAARCHS``); most also forward
                           ``CMAKE_ARGS``
a plain ``cmake`` command  ``CUDAARCHS``, or ``cmake $CMAKE_ARGS ...`` written in the recipe
=========================  ====================================================================

So for the ``cmake`` consumer archwheel sets ``CUDAARCHS`` to the list and appends
``-DCMAKE_CUDA_ARCHITECTURES=<list>`` to ``CMAKE_ARGS`` (after the recipe's own ``CMAKE_ARGS``,
never replacing them); the recipe's ``[arch] variable`` is set as well, for build scripts that
forward it (``CMAKE_CUDA_ARCHITECTURES`` by default: CMake itself ignores it). The list goes
into ``CMAKE_ARGS`` unquoted (``-DCMAKE_CUDA_ARCHITECTURES=80-real;90``): scikit-build-core's
``shlex.split`` and a plain ``str.split`` both keep it one argument, where quotes would survive
a plain split and reach CMake as part of the value. A variable CMake never reads for any other
consumer is refused when the recipe loads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from archwheel.facts.arch_consumers import CMAKE

CUDAARCHS = "CUDAARCHS"
CMAKE_ARGS = "CMAKE_ARGS"
ARCH_VARIABLE = "CMAKE_CUDA_ARCHITECTURES"
# -DCMAKE_CUDA_ARCHITECTURES=..., -D CMAKE_CUDA_ARCHITECTURES:STRING=..., -UCMAKE_CUDA_...
_DEFINES_ARCHS = re.compile(r"(?:^|\s)-[DU]\s*CMAKE_CUDA_ARCHITECTURES\b")


def cmake_define(value: str) -> str:
    """The option CMake gets: ``-DCMAKE_CUDA_ARCHITECTURES=80-real;90``."""
    return f"-D{ARCH_VARIABLE}={value}"


def arch_environment(
    consumer: str, variable: str, value: str, own: Mapping[str, str]
) -> dict[str, str]:
    """The variables that carry the arch list into the build. ``own``: the recipe's
    ``[build] env`` (its ``CMAKE_ARGS`` are kept, the define appended after them)."""
    if consumer != CMAKE:
        return {variable: value}
    args = f"{own.get(CMAKE_ARGS, '')} {cmake_define(value)}".strip()
    return {variable: value, CUDAARCHS: value, CMAKE_ARGS: args}


def describe_delivery(consumer: str, variable: str, value: str, *, short: bool = False) -> str:
    """What the build gets, in the plan's words: ``VAR=VALUE``, or for CMake what CMake will
    really receive and from where (``short``: the two settings only)."""
    if consumer != CMAKE:
        return f"{variable}={value}"
    if short:
        return f"{cmake_define(value)} in CMAKE_ARGS and CUDAARCHS={value}"
    text = (
        f"CMake receives {cmake_define(value)} (appended to CMAKE_ARGS: scikit-build-core, "
        f"scikit-build and setup.py scripts that forward it) and CUDAARCHS={value} (CMake >= "
        "3.20 takes it where nothing defines CMAKE_CUDA_ARCHITECTURES: any cmake run)"
    )
    if variable == ARCH_VARIABLE:
        return text + (
            f"; {ARCH_VARIABLE}={value} is in the environment too, for scripts that forward it "
            "(CMake reads no environment variable of that name)"
        )
    if variable != CUDAARCHS:
        return text + f"; {variable}={value} for the project's own reading"
    return text


def variable_problem(consumer: str, variable: str) -> str | None:
    """Why ``[arch] variable`` cannot carry the list for ``consumer`` (None: it can)."""
    if variable == CMAKE_ARGS:
        return (
            'CMAKE_ARGS holds CMake options, not an arch list: with format = "cmake" archwheel '
            f"appends {cmake_define('<list>')} to it itself"
        )
    if consumer != CMAKE and variable in (ARCH_VARIABLE, CUDAARCHS):
        return (
            f"CMake never reads an environment variable {ARCH_VARIABLE} and takes {CUDAARCHS} "
            'in its own syntax: use format = "cmake" (archwheel then passes '
            f"{cmake_define('...')} in CMAKE_ARGS and sets {CUDAARCHS})"
        )
    return None


def env_problem(consumer: str, env: Mapping[str, str]) -> tuple[str, str] | None:
    """``(key, why)`` where the recipe's ``[build] env`` would contradict the arch list archwheel
    hands to CMake (None: it does not)."""
    if consumer != CMAKE:
        return None
    if CUDAARCHS in env:
        return CUDAARCHS, 'is set by archwheel from the arch list (format = "cmake")'
    if _DEFINES_ARCHS.search(env.get(CMAKE_ARGS, "")):
        return CMAKE_ARGS, (
            f"defines {ARCH_VARIABLE} itself; archwheel appends {cmake_define('<list>')} from the "
            "arch list: drop it from CMAKE_ARGS"
        )
    return None
