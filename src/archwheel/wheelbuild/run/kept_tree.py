"""A build tree kept under a name, so that a build that stops (killed, timed out, a CI job's
limit, ``--stop-after configure``) resumes where it stopped instead of from zero.

``archwheel build --work-name NAME`` keeps the build's copy of the source, with everything its
build wrote into it (CMake's build folder, ninja's log, the objects), in
``<cache>/work/NAME/src``, and mounts it at ``/build/src`` over the build's fresh work folder. The
rest of the work folder (archwheel's launcher and records, the requirements' virtual
environment, ``/build/dist``) is new each run, as for any build: nothing archwheel writes on the
host goes into a folder a container has written. The next build with the same name finds the
tree and its build system goes on: ninja rebuilds only what is out of date or never finished (a
step killed before it ended has no entry in ``.ninja_log``, so it runs again); the compiler
cache volume is kept as always.

A tree is only resumed by the build it was made for: ``inputs.json`` beside it records the
plan's inputs (recipe, source, arch list, Python, images, environment, commands), and a build
whose inputs differ is refused in one line naming what changed (exit 2). One build at a time
holds a name (a lock beside the tree). ``archwheel clean --work NAME`` removes a kept tree.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archwheel.effects.files import read_regular, write_json_atomic
from archwheel.errors import UsageError
from archwheel.wheelbuild.planning.plan import BuildPlan

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
WORK_FOLDER = "work"  # under archwheel's cache folder
INPUTS = "inputs.json"
LOCK = "lock"
TREE = "src"
PREVIEW_FOLDER = "preview"  # the repair step's preview of a partial build (wheel/preview.py)
NVCC_HISTORY = "nvcc-record.csv"  # every run's nvcc record, appended (workfolder.py)
# How this run compiles, not what: the job count, the compiler cache and the farm may change
# between the runs of one tree.
_RUN_ONLY = re.compile(r"SCCACHE_|CCACHE_|ARCHWHEEL_(JOBS|WHOLE_CALL|CACHE_SOCKET|FARM)")
# Recipe tables that act only on the wheel the tree makes (the repair step, the smoke test, the
# gate), and keys that shape how many compiles run, not what they make: changing them keeps the
# tree (hours of compiling are not thrown away for a repair pin or a description).
_AFTER_COMPILE = frozenset({"repair", "smoke", "gate"})
_NOT_SHAPING = {"recipe": frozenset({"description"}), "build": frozenset({"memory_per_job_gib"})}


def check_name(name: str) -> str:
    """A work name: letters, digits, ``.``, ``_``, ``-``, at most 64; UsageError otherwise."""
    if not NAME.match(name):
        raise UsageError(
            f"--work-name {name[:80]!r} is not a name",
            hint="letters, digits, '.', '_' and '-', at most 64, starting with a letter or digit",
        )
    return name


def recipe_shape(document: Mapping[str, Any]) -> str:
    """The sha256 of what in a recipe's document shapes a build tree: every table but those
    acting only on the finished wheel, less the keys that change how many compiles run."""
    shape: dict[str, Any] = {}
    for key, value in document.items():
        if key in _AFTER_COMPILE:
            continue
        drop = _NOT_SHAPING.get(key, frozenset())
        kept = isinstance(value, Mapping)
        shape[key] = {k: v for k, v in value.items() if k not in drop} if kept else value
    text = json.dumps(shape, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def plan_inputs(plan: BuildPlan) -> dict[str, str]:
    """What a kept tree was made from: a build whose values differ must not resume it."""
    recipe, source = plan.recipe, plan.source
    toolchain = recipe.toolchain
    shaping = {k: v for k, v in plan.build_env.items() if not _RUN_ONLY.match(k)}
    shaping.pop(recipe.build.jobs_variable, None)
    env = json.dumps(shaping, sort_keys=True)
    return {
        "recipe": f"{recipe.name}, what shapes the tree: sha256 {recipe_shape(recipe.document)}",
        "source": f"{recipe.source.describe()} content {source.content_sha256}",
        "arch list": plan.arch_value,
        "python": plan.python,
        "base image": plan.base_image,
        "toolkit": f"CUDA {toolchain.cuda} from {toolchain.source}: "
        + " ".join((*toolchain.pypi_packages, *toolchain.system_packages)),
        "environment": hashlib.sha256(env.encode()).hexdigest(),
        "configure": recipe.build.configure.strip(),
        "command": recipe.build.command.strip(),
    }


@dataclass(frozen=True)
class KeptTree:
    """A named build tree: its folder, and whether this build resumes it."""

    name: str
    folder: Path  # <cache>/work/NAME
    resumed: bool

    @property
    def tree(self) -> Path:
        """The build's tree, mounted at /build/src."""
        return self.folder / TREE


@contextmanager
def _held(folder: Path, name: str, hint: str | None = None) -> Iterator[None]:
    """The lock beside a kept tree, held while the body runs; UsageError while another build
    holds it."""
    fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(
                f"the kept build tree {name!r} is in use by a running build", hint=hint
            ) from None
        yield
    finally:
        os.close(fd)


@contextmanager
def kept_tree(cache: Path, name: str, plan: BuildPlan) -> Iterator[KeptTree]:
    """The tree named ``name``, made or resumed, held by this build while it runs."""
    check_name(name)
    folder = cache / WORK_FOLDER / name
    folder.mkdir(parents=True, exist_ok=True)
    if folder.is_symlink() or not folder.is_dir():
        raise UsageError(f"{folder} is not a folder archwheel made for a kept build tree")
    with _held(folder, name, hint="wait for it, or use another --work-name"):
        inputs = plan_inputs(plan)
        recorded = _recorded(folder / INPUTS)
        tree = folder / TREE
        resumed = recorded is not None and tree.is_dir()
        if recorded is not None and resumed and recorded != inputs:
            changed = [key for key in inputs if recorded.get(key) != inputs[key]]
            raise UsageError(
                f"the kept build tree {name!r} was made for other inputs "
                f"(changed: {', '.join(changed) or 'the record'})",
                hint=f"`archwheel clean --work {name}` removes it, or use another --work-name",
            )
        if not resumed:
            (folder / NVCC_HISTORY).unlink(missing_ok=True)
            shutil.rmtree(tree, ignore_errors=True)
            tree.mkdir(mode=0o755)
            os.chown(tree, *plan.build_user)
            write_json_atomic(folder / INPUTS, inputs)
        yield KeptTree(name, folder, resumed)


def _recorded(path: Path) -> dict[str, str] | None:
    """The inputs a tree was made for; None where there is no readable record."""
    try:
        document = json.loads(read_regular(path, 1 << 20))
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in document.items()
    ):
        return None
    return document


def kept_trees(cache: Path) -> list[Path]:
    """Every kept build tree's folder under ``cache``."""
    root = cache / WORK_FOLDER
    if not root.is_dir() or root.is_symlink():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())


def remove_kept(cache: Path, name: str) -> Path:
    """Remove the kept tree ``name``; UsageError where there is none or while a build holds
    it."""
    check_name(name)
    folder = cache / WORK_FOLDER / name
    if folder.is_symlink() or not folder.is_dir():
        raise UsageError(f"no kept build tree named {name!r} in {cache / WORK_FOLDER}")
    with _held(folder, name):
        shutil.rmtree(folder)
    return folder
