"""The build plan: every decision of a build, computed without running anything.

``make_plan`` turns a validated recipe, the requested arch list, the command-line options, the
resolved source and the host's resources into a frozen ``BuildPlan``: which images, which user,
which mounts, which environment, which steps in which container with which network. It is
printed before a build starts (so every log says what ran) and unit-tested without Docker.

Container layout (fixed paths, so builds are reproducible wherever they run):

=============  ===========================================================================
/src           the source, mounted read-only
/build         the work folder (host temp folder, owned by the build user)
/build/src     the copy of the source the build runs in (builds write into their tree)
/build/dist    where the build command must put its wheel (``$ARCHWHEEL_DIST``)
/build/home    ``$HOME`` (writable, empty)
/build/venv    the build requirements' virtual environment, when the recipe has any
/sccache       the compiler cache (sccache's local storage), a named volume shared between builds
/build/.archwheel/bin   archwheel's ``sccache`` launcher, first on ``PATH`` (sccache_launcher.py)
/build/.archwheel/cc-bin   compiler names (Python's CC, CXX) that run the launcher
/build/.archwheel/sccache.sock   the sccache daemon of this build (SCCACHE_SERVER_UDS)
/build/.archwheel/sccache-server.log   its log: what each compile step got from the cache
/run/archwheel-cache    with ``--cache-url``: the Unix socket of the remote cache (compile only)
/run/archwheel-farm     with ``--dist-scheduler``: the farm route's Unix socket (compile only)
=============  ===========================================================================
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from archwheel.effects.engine import EngineName, Mount
from archwheel.effects.pipconfig import PipSettings
from archwheel.errors import ArchListError, UsageError
from archwheel.facts.arch import ArchList
from archwheel.facts.arch_grammars import parse_arch_list
from archwheel.facts.arch_grammars import read as read_arch_value
from archwheel.facts.catalog import CudaFacts
from archwheel.facts.python_target import PythonTarget
from archwheel.verdicts.module_selection import ModuleSelection
from archwheel.wheelbuild.compile.compression import FatbinCompression, choose_compression
from archwheel.wheelbuild.compile.dist_farm import DistFarm, container_farm_env, describe_farm
from archwheel.wheelbuild.compile.jobs import JobCount
from archwheel.wheelbuild.compile.nvcc_record import TIME_FLAG
from archwheel.wheelbuild.compile.parallel import ParallelPlan, choose_parallel
from archwheel.wheelbuild.compile.remote_cache import (
    COMPILER_NAMES,
    LAUNCHER_DIR,
    SERVER_SOCKET,
    WHOLE_CALL_FOLDER,
    CacheUrl,
    describe_remote,
)
from archwheel.wheelbuild.compile.sccache_launcher import start_command, toolkit_id_command
from archwheel.wheelbuild.images.toolkit import TorchBuild
from archwheel.wheelbuild.planning.plan_parts import (
    IMAGE_VENV,
    VENV,
    compiler_names_script,
    torch_row,
    torch_site_command,
)
from archwheel.wheelbuild.recipes.cmake_arch import arch_environment, describe_delivery
from archwheel.wheelbuild.recipes.recipe_env import refuse_replaced
from archwheel.wheelbuild.recipes.recipe_model import Recipe
from archwheel.wheelbuild.sources.project_constraints import ProjectCheck
from archwheel.wheelbuild.sources.source import ResolvedSource

StopAfter = Literal["configure", "targets"]
# a target of a partial build: a ninja target, or a source file of the tree (its objects)
_TARGET = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./+-]{0,299}\Z")
_SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")

SRC = "/src"
BUILD = "/build"
BUILD_SRC = "/build/src"
DIST = "/build/dist"
HOME = "/build/home"
CACHE_DIR = "/sccache"
UNUSED_CACHE_DIR = "/build/.archwheel/sccache-unused"  # SCCACHE_DIR without the cache
FILE_LIST = "/build/.archwheel-files"
COPIED = ".archwheel-copied"  # in a kept build tree, once the source is copied into it
# When archwheel itself runs as root, the build runs as this unprivileged user instead.
FALLBACK_BUILD_USER = (1000, 1000)
DEFAULT_CCACHE_VOLUME = "archwheel-sccache"
# The volume ccache used before sccache: named by `archwheel clean`, never written again.
OLD_CCACHE_VOLUME = "archwheel-ccache"
DEFAULT_CCACHE_SIZE = "20G"
# CMake's compiler launchers, set to sccache for every cached build (a recipe's own value wins).
COMPILER_LAUNCHERS = (
    "CMAKE_C_COMPILER_LAUNCHER",
    "CMAKE_CXX_COMPILER_LAUNCHER",
    "CMAKE_CUDA_COMPILER_LAUNCHER",
)


@dataclass(frozen=True)
class Step:
    """One command in one container phase."""

    name: str
    description: str
    command: tuple[str, ...]
    user: str  # "uid:gid"; "0:0" only for the cache-volume ownership fix
    workdir: str = BUILD
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def shell(self) -> str:
        """The command as one shell-quoted line, for the plan's display and JSON."""
        return shlex.join(self.command)


@dataclass(frozen=True)
class Phase:
    """Steps that share one container, hence one network setting.

    ``mounts`` excludes the work folder, which the runner makes per build and mounts at /build.
    """

    name: str
    network: str  # "host" or "none"
    steps: tuple[Step, ...]
    mounts: tuple[Mount, ...]


@dataclass(frozen=True)
class CheckedArchList:
    """An arch list checked against a recipe's toolkit, with the value its arch variable gets.

    Made by ``check_arch_list``: the one place the list is checked and rendered for the recipe.
    """

    arch_list: ArchList
    value: str  # what the recipe's arch variable is set to
    reading: str = ""  # what the variable's consumer makes of ``value`` (its flags), and where

    def __str__(self) -> str:
        return str(self.arch_list)


def check_arch_list(recipe: Recipe, text: str | None, facts: CudaFacts) -> CheckedArchList:
    """Parse the requested arch list (default: the recipe's) and check it against the recipe's
    toolkit and the syntax of its arch variable."""
    arch_list = (
        parse_arch_list(text, torch=recipe.arch.torch, facts=facts) if text else recipe.arch.default
    )
    toolkit = facts.toolkit(recipe.cuda)
    problems = arch_list.problems_with(toolkit, facts)
    if problems:
        raise ArchListError(
            "; ".join(problems) + f" (recipe {recipe.name} uses CUDA {recipe.toolchain.cuda})",
            hint=f"pick archs CUDA {recipe.toolchain.cuda} can target, or a recipe of another "
            "CUDA version; `archwheel arch LIST --cuda X.Y` checks a list",
        )
    try:
        value = recipe.arch.render(arch_list)
    except ArchListError as exc:
        raise ArchListError(
            f"recipe {recipe.name} passes the arch list as {recipe.arch.variable}: {exc.message}",
            hint=exc.hint,
        ) from None
    return CheckedArchList(arch_list, value, consumer_reading(recipe, value, facts))


def consumer_reading(recipe: Recipe, value: str, facts: CudaFacts) -> str:
    """``reads it in SOURCE: FLAGS``: what the recipe's arch consumer makes of ``value``, read
    with that consumer's own grammar (facts/arch_consumers.toml); "" when it has none."""
    try:
        reading = read_arch_value(
            recipe.arch.consumer,
            value,
            torch=recipe.arch.torch,
            cuda=recipe.cuda,
            variable=recipe.arch.variable,
            facts=facts,
        )
    except ArchListError:
        return ""
    made = " ".join(reading.flags) or " ".join(reading.images) or "no device code"
    return f"{reading.source} makes it {made}"


def choose_python(recipe: Recipe, requested: str | None) -> str:
    """The Python a build targets: the one asked for (X.Y, or X.Yt), else the recipe's first.
    The one place this is decided; a version the recipe does not support is refused."""
    python = requested or recipe.default_python
    if python not in recipe.python_versions:
        raise UsageError(
            f"recipe {recipe.name} does not support Python {python}",
            hint=f"supported: {', '.join(recipe.python_versions)}",
        )
    return python


@dataclass(frozen=True)
class BuildOptions:
    """The request's settings that shape the plan, already checked. The arch list and the job
    count reach ``make_plan`` in their checked shapes (``CheckedArchList``, ``JobCount``)."""

    python: str | None = None  # None: the recipe's first (``choose_python``)
    out: Path = Path("dist")
    engine: EngineName = "docker"
    check_reproducible: bool = False
    ccache_volume: str | None = DEFAULT_CCACHE_VOLUME  # None: no compiler cache
    ccache_size: str = DEFAULT_CCACHE_SIZE
    cache_url: CacheUrl | None = None  # a remote cache shared between machines (--cache-url)
    farm: DistFarm | None = None  # a compile farm (--dist-scheduler; dist_farm.py)
    stop_after: StopAfter | None = None  # "configure": the recipe's configure step, no compile
    work_name: str | None = None  # a kept build tree (run/kept_tree.py): copied into once
    targets: tuple[str, ...] = ()  # a partial build: these ninja targets or sources, no wheel


@dataclass(frozen=True)
class BuildPlan:
    """Everything a build will do, decided before any container runs: made by ``make_plan``.

    The runner carries it out, ``--plan`` shows it, and provenance records it.
    """

    recipe: Recipe
    arch_list: ArchList
    arch_value: str  # what the arch variable is set to
    python: str
    jobs: JobCount
    engine: EngineName
    base_image: str
    source: ResolvedSource
    build_user: tuple[int, int]
    ccache_volume: str | None
    ccache_size: str
    pip: PipSettings
    out_dir: Path
    check_reproducible: bool
    build_env: Mapping[str, str]
    phases: tuple[Phase, ...]
    torch: TorchBuild | None = None  # a build against a pinned torch (build/toolkit.py)
    remote_cache: CacheUrl | None = None  # its socket is mounted into the compile phase
    farm: DistFarm | None = None  # the farm route's socket is mounted into the compile phase
    arch_reading: str = ""  # what the arch variable's consumer makes of it (CheckedArchList)
    source_check: tuple[tuple[str, str], ...] = ()  # the build files' own archs and switches
    parallel: ParallelPlan | None = None  # how the compiles share the cores (parallel.py)
    compression: FatbinCompression | None = None  # an extension's fatbins (compression.py)
    project: ProjectCheck | None = None  # the project's own constraints (project_constraints.py)
    base_choice: str = ""  # why the base image has the build's Python (python_base.py)
    selection: ModuleSelection | None = None  # a switch naming the modules (module_selection)
    build_depends: str = ""  # the Build-Depends the builder image gets (debian_depends.py)
    stop_after: StopAfter | None = None  # the last step run ("configure"); None: the wheel
    work_name: str | None = None  # the kept build tree it runs in (run/kept_tree.py)
    targets: tuple[str, ...] = ()  # what a partial build compiles (--targets)

    @property
    def user(self) -> str:
        """The build user as ``uid:gid``, as the container engine takes it."""
        return f"{self.build_user[0]}:{self.build_user[1]}"

    @property
    def network_during_compile(self) -> bool:
        """Whether the compile phase (the last) has network access, as provenance records it."""
        return self.phases[-1].network != "none"

    def environment_rows(self) -> list[tuple[str, str]]:
        """What the build command sees in its container: the nvcc it runs, the arch variable
        and what its consumer makes of it, then every variable of the compile step."""
        toolchain = self.recipe.toolchain
        rows = [
            (
                "nvcc",
                f"/usr/local/cuda/bin/nvcc (CUDA_HOME=/usr/local/cuda): CUDA {toolchain.cuda} "
                f"from {toolchain.source}, its version checked when the toolkit image is made",
            ),
            (
                "arch variable",
                self.arch_delivery() + (f"; {self.arch_reading}" if self.arch_reading else ""),
            ),
        ]
        rows.extend((name, value) for name, value in self.build_env.items())
        return rows

    def arch_delivery(self, *, short: bool = False) -> str:
        """``VAR=VALUE``, or for CMake what CMake will really receive (cmake_arch.py)."""
        arch = self.recipe.arch
        return describe_delivery(arch.consumer, arch.variable, self.arch_value, short=short)

    def gate_row(self) -> str:
        """What the gates at the end of the build refuse."""
        recipe = self.recipe
        text = f"audit: every library with device code holds {self.arch_list}"
        if recipe.kind == "extension" and recipe.toolchain.cuda is not None:
            text += "; every .cu of the source compiled by nvcc (its --time record)" + (
                f" but {', '.join(recipe.gate.unbuilt_cuda)}" if recipe.gate.unbuilt_cuda else ""
            )
            text += self.selection.gate_note() if self.selection else ""
        text += "; archs beyond the request " + (
            "reported" if recipe.gate.allows_extra(recipe.kind) else "refused"
        )
        if self.torch is not None:
            text += f"; can-load against torch {self.torch.wheel.version}"
        return text

    def summary_rows(self) -> list[tuple[str, str]]:
        """The plan as (label, value) rows: printed before the build, kept in the log."""
        recipe = self.recipe
        src = self.source
        commit = f"{src.commit[:12]}{' (modified)' if src.dirty else ''}" if src.commit else "-"
        rows = [
            ("recipe", f"{recipe.name} ({recipe.path}, sha256 {recipe.sha256[:12]})"),
            (
                "source",
                f"{recipe.source.describe()}; not resolved here ({src.unresolved}): "
                "resolved when the build runs"
                if src.unresolved
                else f"{recipe.source.describe()}; commit {commit}; {len(src.files)} files",
            ),
            *self.source_check,
            ("arch list", f"{self.arch_list} -> {self.arch_delivery(short=True)}"),
            ("toolkit", f"CUDA {recipe.toolchain.cuda} from {recipe.toolchain.source}"),
            (
                "base image",
                (
                    f"{self.base_image} (pinned to {recipe.toolchain.base_image_id})"
                    if recipe.toolchain.base_image_id
                    else f"{self.base_image} (tag not pinned: [toolchain] base_image_id)"
                )
                + (f"; {self.base_choice}" if self.base_choice else ""),
            ),
            *([("Build-Depends", self.build_depends)] if self.build_depends else []),
            (
                "python",
                self.project.python_row()
                if self.project is not None
                else PythonTarget.parse(self.python).describe(),
            ),
            *(self.project.rows() if self.project is not None else []),
            ("jobs", f"{recipe.build.jobs_variable}={self.jobs.reason}"),
            *(
                [("parallel", self.parallel.describe(recipe.build.jobs_variable))]
                if self.parallel is not None
                else []
            ),
            *([("fatbins", self.compression.describe())] if self.compression is not None else []),
            ("gate", self.gate_row()),
            ("engine", f"{self.engine}, build user {self.user}"),
            (
                "compiler cache",
                f"volume {self.ccache_volume} (max {self.ccache_size})"
                + (f"; {describe_remote(self.remote_cache)}" if self.remote_cache else "")
                if self.ccache_volume
                else "off (sccache still runs the compilers, caching nothing: the objects are "
                "a cached build's)",
            ),
            *([("compile farm", describe_farm(self.farm))] if self.farm is not None else []),
            ("SOURCE_DATE_EPOCH", f"{src.source_date_epoch} ({src.epoch_origin})"),
            ("output", str(self.out_dir)),
        ]
        if recipe.build.requirements:
            rows.append(("pip", self.pip.describe()))
        if self.torch is not None:
            rows.append(("torch", torch_row(self.torch)))
        for phase in self.phases:
            steps = ", ".join(s.name for s in phase.steps)
            rows.append((f"phase {phase.name}", f"network {phase.network}: {steps}"))
        if recipe.build.configure:
            rows.append(("configure", recipe.build.configure.strip()))
        rows.append(("command", recipe.build.command.strip()))
        if self.targets:
            rows.append(("targets", f"{' '.join(self.targets)}: their objects audited, no wheel"))
        elif self.stop_after is not None:
            rows.append(("stop after", f"{self.stop_after}: no wheel (--stop-after)"))
        if self.check_reproducible:
            rows.append(("reproducibility", "build twice without cache and compare"))
        return rows


def build_user(uid: int | None = None, gid: int | None = None) -> tuple[int, int]:
    """The invoking user's uid:gid, or an unprivileged fallback when that is root."""
    uid = os.getuid() if uid is None else uid
    gid = os.getgid() if gid is None else gid
    if uid == 0:
        return FALLBACK_BUILD_USER
    return uid, gid


def make_plan(
    recipe: Recipe,
    arch: CheckedArchList,
    options: BuildOptions,
    source: ResolvedSource,
    *,
    jobs: JobCount,
    pip: PipSettings,
    user: tuple[int, int],
    torch: TorchBuild | None = None,
    ninja_off: tuple[str, ...] | None = None,
    own_threads: tuple[str, ...] = (),
) -> BuildPlan:
    """Decide everything; run nothing. ``arch`` comes from ``check_arch_list``; ``ninja_off``:
    where the source's build files turn ninja off (None: the source is not read yet);
    ``own_threads``: where they pass nvcc ``--threads`` themselves."""
    python = choose_python(recipe, options.python)
    arch_list = arch.arch_list
    arch_value = arch.value
    uid_gid = f"{user[0]}:{user[1]}"
    has_requirements = bool(recipe.build.requirements)
    python_bin = f"{VENV}/bin/python" if has_requirements else f"{IMAGE_VENV}/bin/python"
    # A reproducibility check compiles everything: cache hits would hide nondeterminism.
    cache_on = bool(options.ccache_volume) and not options.check_reproducible
    remote = options.cache_url if cache_on else None

    cuda = recipe.toolchain.cuda or (torch.cuda if torch is not None else None)
    compression = (
        choose_compression(cuda, recipe.build.env, enabled=recipe.build.compress_fatbins)
        if recipe.kind == "extension" and cuda is not None
        else None
    )
    nvcc_env = dict(recipe.build.env)
    if compression is not None and compression.flags:
        own = nvcc_env.get("NVCC_APPEND_FLAGS", "")
        nvcc_env["NVCC_APPEND_FLAGS"] = f"{own} {compression.flags}".strip()
    if recipe.kind == "extension" and cuda is not None:
        # The build's own record of its nvcc compiles (nvcc_record.py; module_gate.py); a
        # recipe's own --time is refused when it is read (recipe_env.sets_nvcc_time)
        own = nvcc_env.get("NVCC_APPEND_FLAGS", "")
        nvcc_env["NVCC_APPEND_FLAGS"] = f"{own} {TIME_FLAG}".strip()
    parallel = choose_parallel(
        recipe.build.parallel,
        jobs,
        archs=len(arch_list),
        ninja_off=ninja_off,
        recipe_env=nvcc_env,
        own_threads=own_threads,
    )
    env: dict[str, str] = {
        **nvcc_env,
        # the arch variable; for CMake also CUDAARCHS and a -D in CMAKE_ARGS (cmake_arch.py)
        **arch_environment(recipe.arch.consumer, recipe.arch.variable, arch_value, nvcc_env),
        recipe.build.jobs_variable: str(parallel.files),
        "SOURCE_DATE_EPOCH": str(source.source_date_epoch),
        "HOME": HOME,
        "CUDA_HOME": "/usr/local/cuda",
        "CUDA_PATH": "/usr/local/cuda",
        "PATH": (
            f"{LAUNCHER_DIR}:"
            + (f"{VENV}/bin:" if has_requirements else "")
            + f"/opt/archwheel/bin:/usr/local/cuda/bin:{IMAGE_VENV}/bin"
            + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        ),
        "ARCHWHEEL_SRC": BUILD_SRC,
        "ARCHWHEEL_DIST": DIST,
        "ARCHWHEEL_BUILD": BUILD,
        "ARCHWHEEL_PYTHON": python_bin,
        "ARCHWHEEL_ARCH_LIST": str(arch_list),
        "ARCHWHEEL_JOBS": str(parallel.files),
        "PYTHONDONTWRITEBYTECODE": "1",
        "TZ": "UTC",
        "LC_ALL": "C.UTF-8",
    }
    # Every build compiles through sccache, with or without the cache: sccache takes each nvcc
    # call apart and gives nvcc's temporary files fixed names, and those names reach the
    # objects (a host object's file symbol), so a build without the cache must take the same
    # path to make the same bytes. Without it sccache only runs the steps
    # (SCCACHE_NO_CACHE=1: no lookup, no store).
    env.update(
        {
            # no daemon restart (and no statistics lost) in the middle of a long compile
            "SCCACHE_IDLE_TIMEOUT": "0",
            # this build's own daemon, on a socket in its work folder: no port shared with
            # another build on a host-network compile
            "SCCACHE_SERVER_UDS": SERVER_SOCKET,
        }
    )
    cache_mounts: tuple[Mount, ...] = ()
    if cache_on:
        assert options.ccache_volume is not None
        env.update({"SCCACHE_DIR": CACHE_DIR, "SCCACHE_CACHE_SIZE": options.ccache_size})
        # the whole-call cache (whole_call.py) keeps its entries in the same volume
        env["ARCHWHEEL_WHOLE_CALL_DIR"] = f"{CACHE_DIR}/{WHOLE_CALL_FOLDER}"
        cache_mounts = (Mount(options.ccache_volume, CACHE_DIR, volume=True),)
    else:
        env.update({"SCCACHE_NO_CACHE": "1", "SCCACHE_DIR": UNUSED_CACHE_DIR})
        env["CCACHE_DISABLE"] = "1"  # a ccache of the base image, if any, passes through
    # CMake projects (scikit-build-core, setup.py driving CMake, PyTorch) compile through
    # sccache only with a launcher, as PyTorch's CI sets them; CMake >= 3.17 reads these from
    # the environment. A recipe's own value wins. torch.utils.cpp_extension needs none: it
    # puts ccache, else sccache, in front of c++ and nvcc itself when one is on PATH
    # (`_wrap_compiler`); archwheel's launcher answers to both names.
    for variable in COMPILER_LAUNCHERS:
        env.setdefault(variable, "sccache")
    # scikit-build-core's own build folder is a new /tmp/tmpXXXX each build: every nvcc call's
    # folder and paths new, the whole-call cache (whole_call.py) could never answer one
    env.setdefault("SKBUILD_BUILD_DIR", f"{BUILD}/skbuild")
    # setuptools compiles with Python's own CC and CXX (x86_64-linux-gnu-g++), and
    # cpp_extension's one-file-at-a-time path (use_ninja=False, torch-scatter) wraps only the
    # `compiler_so` that setuptools >= 72 no longer uses for C++ (`compiler_so_cxx`): those
    # names run the launcher from COMPILER_NAMES, made by the copy-source step.
    env["PATH"] = env["PATH"].replace(
        "/opt/archwheel/bin:", f"{COMPILER_NAMES}:/opt/archwheel/bin:", 1
    )
    apply_parallel(env, recipe, parallel)
    refuse_replaced(recipe, env)  # what archwheel set over the recipe's own: refused, not lost
    env = dict(sorted(env.items()))

    # The work folder (mounted at /build) is made per build by the runner and added then.
    base_mounts = (Mount(str(source.root), SRC, read_only=True), *cache_mounts)
    prepare_steps = []
    if cache_mounts:
        prepare_steps.append(
            Step(
                "cache-owner",
                "give the build user the compiler cache volume",
                ("sh", "-c", f'[ "$(stat -c %u:%g {CACHE_DIR})" = "{uid_gid}" ] || '
                 f"chown -R {uid_gid} {CACHE_DIR}"),
                user="0:0",
            )
        )  # fmt: skip
    copy = f"tar -C {SRC} --null -T {FILE_LIST} -cf - | tar -C {BUILD_SRC} -xf -"
    prepare_steps.append(
        Step(
            "copy-source",
            "copy the listed source files from /src (read-only) to /build/src"
            + f"; compiler names in {COMPILER_NAMES}",
            ("sh", "-c", f"mkdir -p {BUILD_SRC} {DIST} {HOME} && "
             + (f"{{ [ -e {BUILD_SRC}/{COPIED} ] || {{ {copy} && touch {BUILD_SRC}/{COPIED}; }}; }}"
                if options.work_name else copy)
             + f" && {{ {compiler_names_script()}; }}"),
            user=uid_gid,
        )
    )  # fmt: skip
    phases: list[Phase] = []
    compile_network = "host" if recipe.build.network else "none"
    if has_requirements:
        install = Step(
            "requirements",
            "install the build requirements into /build/venv"
            + (" (torch: from the torch image)" if torch is not None else ""),
            (
                "sh", "-c",
                f"{IMAGE_VENV}/bin/python -m venv {VENV} && "
                + (torch_site_command(python) if torch is not None else "")
                + f"{VENV}/bin/python -m pip install --progress-bar off "
                + " ".join(shlex.quote(r) for r in recipe.build.requirements),
            ),
            user=uid_gid,
            env=MappingProxyType({"HOME": HOME, **pip.container_env()}),
        )  # fmt: skip
        phases.append(
            Phase("prepare", "host", (*prepare_steps, install), (*base_mounts, *pip.mounts()))
        )
        prepare_steps = []
    targets = _targets_step(recipe, options, uid_gid, env)
    if options.stop_after is not None and not recipe.build.configure:
        raise UsageError(
            f"--stop-after {options.stop_after}: recipe {recipe.name} has no [build] configure",
            hint="a recipe whose build configures first names that command in [build] configure",
        )
    configure: tuple[Step, ...] = ()
    if recipe.build.configure:  # after the cache's daemon: CMake's test compiles go through it
        configure = (
            tree_step(
                "configure", "run the recipe's configure command in /build/src",
                recipe.build.configure, uid_gid, env,
            ),
        )  # fmt: skip
    compile_step = tree_step(
        "compile", "run the recipe's build command in /build/src", recipe.build.command, uid_gid,
        env,
    )  # fmt: skip
    # The toolkit's identity, part of every cache key (the launcher reads it), then the daemon
    # (and with --cache-url the forwarder to the relay), in the compile container: what
    # starts here lives through the compile step. With or without the cache (see above).
    prepare_steps.append(
        Step(
            "cache-key",
            "hash the toolkit and host compilers into the compiler-cache key",
            toolkit_id_command(),
            user=uid_gid,
            env=MappingProxyType({k: env[k] for k in ("PATH", "CUDA_HOME", "LC_ALL")}),
        )
    )
    start_env = {
        **env,
        **(remote.container_env() if remote is not None else {}),
        **(container_farm_env() if options.farm is not None else {}),
    }
    prepare_steps.append(
        Step(
            "cache-start",
            "start sccache, the compiler cache"
            + (" (local volume and the shared cache)" if remote is not None else "")
            + ("" if cache_mounts else " (caching nothing: it only runs the compilers)"),
            start_command(f"{IMAGE_VENV}/bin/python"),
            user=uid_gid,
            env=MappingProxyType(start_env),
        )
    )
    steps = (*prepare_steps, *configure)
    if targets is not None:
        steps += (targets,)
    elif options.stop_after != "configure":
        steps += (compile_step,)
    phases.append(Phase("compile", compile_network, steps, base_mounts))

    return BuildPlan(
        recipe=recipe,
        arch_list=arch_list,
        arch_value=arch_value,
        python=python,
        jobs=jobs,
        engine=options.engine,
        base_image=recipe.toolchain.base_image,
        source=source,
        build_user=user,
        ccache_volume=options.ccache_volume if cache_mounts else None,
        ccache_size=options.ccache_size,
        pip=pip,
        out_dir=options.out,
        check_reproducible=options.check_reproducible,
        build_env=MappingProxyType(env),
        phases=tuple(phases),
        torch=torch,
        remote_cache=remote,
        farm=options.farm,
        arch_reading=arch.reading,
        parallel=parallel,
        compression=compression,
        stop_after="targets" if options.targets else options.stop_after,
        work_name=options.work_name,
        targets=options.targets,
    )


def _targets_step(
    recipe: Recipe, options: BuildOptions, uid_gid: str, env: Mapping[str, str]
) -> Step | None:
    """A partial build (``--targets``): ninja builds what is named in the configured build
    folder, and nothing is packaged. A source file (``aten/.../Sleep.cu``) names the objects
    compiled from it (ninja's ``FILE^``). ninja keeps going past a failed step (``-k 0``): one
    run names every named object that does not compile, not the first one."""
    if not options.targets:
        return None
    if options.stop_after is not None:
        raise UsageError("--targets builds after configure and stops: leave out --stop-after")
    if not (recipe.build.configure and recipe.build.build_folder):
        raise UsageError(
            f"--targets: recipe {recipe.name} needs [build] configure and [build] build_folder",
            hint='the folder where its configure writes build.ninja, e.g. build_folder = "build"',
        )
    words = []
    for target in options.targets:
        if not _TARGET.match(target) or ".." in target.split("/"):
            raise UsageError(
                f"--targets: {target[:80]!r} is not a ninja target or a source file of the tree"
            )
        source = "/" in target and target.endswith(_SOURCE_SUFFIXES)
        words.append(f"{BUILD_SRC}/{target}^" if source else target)
    folder = f"{BUILD_SRC}/{recipe.build.build_folder}"
    jobs = recipe.build.jobs_variable
    return tree_step(
        "targets",
        f"build only {', '.join(options.targets)} with ninja in {folder}",
        f'ninja -C {folder} -k 0 -j "${jobs}" ' + " ".join(shlex.quote(w) for w in words),
        uid_gid,
        env,
    )


# The steps that run the recipe's own commands in the build's tree, with the build's
# environment (``tree_step``): a variant of the plan changes the environment of each.
TREE_STEPS = ("configure", "compile", "targets")


def tree_step(
    name: str, description: str, script: str, uid_gid: str, env: Mapping[str, str]
) -> Step:
    """A step of ``TREE_STEPS``: ``script`` run by bash (``-eo pipefail``) in /build/src as
    the build user, with ``env``."""
    return Step(
        name,
        description,
        ("bash", "-eo", "pipefail", "-c", script.strip()),
        user=uid_gid,
        workdir=BUILD_SRC,
        env=MappingProxyType(dict(env)),
    )


def apply_parallel(env: dict[str, str], recipe: Recipe, parallel: ParallelPlan) -> None:
    """The parallel plan's variables in ``env`` (a recipe's own value wins, but for nvcc's
    flags, to which ``--threads`` is appended)."""
    env[recipe.build.jobs_variable] = str(parallel.files)
    env["ARCHWHEEL_JOBS"] = str(parallel.files)
    for name, value in parallel.env:
        if name in ("NVCC_APPEND_FLAGS", "PYTHONPATH") or name not in recipe.build.env:
            env[name] = value  # the recipe's PYTHONPATH follows the spread hook's folder
