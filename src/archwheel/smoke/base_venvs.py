"""Kept base environments for smoke's venv backend: a torch installed once, reused in seconds.

A fresh venv per smoke run reinstalls torch and its CUDA wheels (minutes, GBs) although they
rarely change between runs. So the wheels' own requirements (their ``Requires-Dist`` lines,
without the extras and without the wheels under test) are installed once into a base venv under
the cache folder, keyed by the interpreter, those requirements and pip's index options; each run
then gets a hard-linked copy of it (``link_tree``: no byte copied; pip replaces a file by
unlinking it, so nothing a run installs reaches the base) and installs only the wheels under
test into the copy, where everything else is already satisfied. A base is made in a temporary
folder and renamed into place when complete, so a killed run never leaves a half base that a
later run would trust.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from archwheel.binary.wheelmeta import read_wheel_metadata
from archwheel.effects.owner import owned_tempdir, remove_owned

BASES = "smoke-venvs"
COMPLETE = ".archwheel-complete"


def requirements_of(wheels: Sequence[Path]) -> tuple[str, ...]:
    """What the wheels need that they do not provide themselves, as pip requirement lines."""
    metas = [read_wheel_metadata(w) for w in wheels]
    own = {m.name for m in metas}
    lines = {
        str(pin) + (f"; {pin.marker}" if pin.marker else "")
        for meta in metas
        for pin in meta.requires
        if not pin.is_optional and pin.name not in own
    }
    return tuple(sorted(lines))


def base_key(python: str, requirements: Sequence[str], pip_args: Sequence[str]) -> str:
    """The base venv's key: the interpreter (resolved), the requirements, pip's index options."""
    real = os.path.realpath(python)
    try:
        info = Path(real).stat()
        stamp = [info.st_size, info.st_mtime_ns]  # an interpreter replaced in place
    except OSError:
        stamp = []
    identity = {"python": real, "stamp": stamp, "requirements": list(requirements),
                "pip": list(pip_args)}  # fmt: skip
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]


def base_folder(cache: Path, key: str) -> Path:
    """Where the base venv of ``key`` (``base_key``) lives in the smoke cache."""
    return cache / BASES / key


def is_complete(base: Path) -> bool:
    """Whether ``base`` was published whole (its marker and its interpreter exist); an incomplete
    one is made again rather than copied."""
    return (base / COMPLETE).is_file() and (base / "venv" / "bin" / "python").exists()


def staging_folder(cache: Path) -> Path:
    """A temporary folder (with an owner record) where a base is made before it is renamed."""
    parent = cache / BASES
    parent.mkdir(parents=True, exist_ok=True)
    return owned_tempdir("archwheel-smoke-base-", parent)


def publish_base(staged: Path, base: Path) -> Path:
    """Rename a complete ``staged`` base into place; another run's base, there first, wins."""
    (staged / COMPLETE).write_text("complete\n")
    try:
        staged.rename(base)
    except OSError:
        if not is_complete(base):
            raise
    finally:
        if staged.exists():
            remove_owned(staged)
        else:
            (staged.parent / (staged.name + ".owner")).unlink(missing_ok=True)
    return base


def link_tree(source: Path, target: Path) -> None:
    """Copy a folder as hard links (symlinks kept as links); files are copied where the two
    lie on different file systems."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, symlinks=True, copy_function=link)
