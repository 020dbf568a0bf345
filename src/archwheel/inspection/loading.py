"""can-load: will a wheel's libraries load next to a given torch? (``archwheel can-load``,
``archwheel.can_load``). The environment probes live here: the torch and nvidia-* packages
installed in an interpreter's environment, and this machine's own copies of the system
libraries the wheel's manylinux policy allows (stand-ins for the system's)."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

from archwheel.binary.dynamic import DynamicInfo, read_file_dynamic, read_installed_dynamic
from archwheel.errors import UsageError
from archwheel.inspection.wheel_files import read_wheel_files, read_wheels_files
from archwheel.verdicts.load import LoadReport, WheelFiles, is_torch, judge_load, policy_for

# Where the host's own copies of system libraries are looked for (ld.so's default folders).
HOST_LIBRARY_DIRS = (
    "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64",
)  # fmt: skip
# The dynamic loaders, looked for beside the policy's libraries.
LOADERS = frozenset({"ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"})


def can_load(
    wheel: Path,
    with_wheels: Sequence[Path] = (),
    *,
    installed: bool = False,
    interpreter: str | None = None,
    host_libraries: bool = True,
    system_folders: Sequence[str] = HOST_LIBRARY_DIRS,
) -> LoadReport:
    """Whether every shared library of ``wheel`` loads after ``import torch``, with the torch
    (and any nvidia-* wheels) of ``with_wheels`` laid out as pip installs them, or, with
    ``installed``, the torch installed for ``interpreter`` (default: this one).

    ``host_libraries``: read this machine's libc/libstdc++ as stand-ins for the system
    libraries, from ``system_folders`` (another system's copies, as ``python_container``
    brings them out of the base whose Python the wheel is for). ``UsageError`` when there is
    no torch to load against, or two, or an argument
    is not a ``.whl``; ``InputError`` when a wheel cannot be read."""
    if not with_wheels and not installed:
        raise UsageError(
            "can-load needs the torch to load against", hint="give --with TORCH.whl or --installed"
        )
    if with_wheels and installed:
        raise UsageError("give --with wheels or --installed, not both")
    for path in [wheel, *with_wheels]:
        if path.suffix != ".whl":
            raise UsageError(f"{path}: not a wheel (.whl)")
    if installed:
        files = read_wheel_files(wheel)
        others = installed_wheels(interpreter)
        if not any(is_torch(w) for w in others):
            raise UsageError(
                f"no torch installed for {interpreter or sys.executable}",
                hint="install torch there, or give --with TORCH.whl",
            )
    else:  # all read together: the extension's libraries while torch's inflate
        files, *others = read_wheels_files([wheel, *with_wheels])
    torches = [w for w in others if is_torch(w)]
    if not torches:
        raise UsageError(
            "none of the --with wheels is torch: "
            + ", ".join(f"{w.filename} is {w.name}" for w in others),
            hint="give the torch wheel with --with",
        )
    if len(torches) > 1:
        raise UsageError(
            "two torches given: " + " and ".join(w.filename for w in torches),
            hint="one environment holds one torch: run can-load once per torch",
        )
    torch = torches[0]
    system: dict[str, DynamicInfo] = {}
    if host_libraries:
        policy = policy_for(files.tags)
        if policy is not None:
            system = host_library_files(policy.libraries | LOADERS, system_folders)
    return judge_load(files, torch, [w for w in others if w is not torch], system)


def installed_wheels(python: str | None) -> list[WheelFiles]:
    """torch and the nvidia-*/cuda-* packages of an environment, as the model's wheels."""
    from packaging.requirements import InvalidRequirement, Requirement

    out: list[WheelFiles] = []
    for dist in read_installed_dynamic(python):
        requires: list[tuple[str, str, str]] = []
        for line in dist.requires:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            requires.append((req.name.lower(), str(req.specifier), str(req.marker or "")))
        local = re.search(r"\+cu([0-9]{2,3})", dist.version)
        out.append(
            WheelFiles(
                filename=f"{dist.name} {dist.version} (installed)",
                name=dist.name,
                version=dist.version,
                tags=(),
                libraries=dist.libraries,
                requires=tuple(requires),
                cuda_major=int(local.group(1)[:-1]) if local else None,
            )
        )
    return out


def host_library_files(
    names: frozenset[str], folders: Sequence[str] = HOST_LIBRARY_DIRS
) -> dict[str, DynamicInfo]:
    """This machine's copy of each library of ``names`` (the first of ``folders`` that holds
    it), where it is a complete dynamic ELF file."""
    found: dict[str, DynamicInfo] = {}
    for name in sorted(names):
        for folder in folders:
            candidate = Path(folder) / name
            if candidate.is_file():
                info = read_file_dynamic(candidate)
                if info.is_dynamic and info.complete:
                    found[name] = info
                break
    return found
