"""Parts of a build plan: the shell fragments its steps run (the compiler names, the torch
site of a build against a pinned torch) and its ``torch`` row."""

from __future__ import annotations

import shlex

from archwheel.wheelbuild.compile.remote_cache import COMPILER_NAMES, LAUNCHER_DIR
from archwheel.wheelbuild.images.toolkit import TorchBuild

IMAGE_VENV = "/opt/archwheel/venv"
VENV = "/build/venv"


def compiler_names_script() -> str:
    """Scripts named like Python's CC and CXX (sysconfig) in COMPILER_NAMES, each running
    archwheel's launcher with its own name. A shell fragment that always succeeds."""
    return (
        f"mkdir -p {COMPILER_NAMES}; "
        f"for name in $({IMAGE_VENV}/bin/python -c "
        '\'import sysconfig; print(*{(sysconfig.get_config_var(v) or "").split()[0] '
        'for v in ("CC", "CXX") if sysconfig.get_config_var(v)})\'); do '
        "case $name in */*|ccache|sccache) continue ;; esac; "
        f'printf \'#!/bin/sh\\nexec {LAUNCHER_DIR}/sccache %s "$@"\\n\' "$name" '
        f'> {COMPILER_NAMES}/"$name" && chmod 755 {COMPILER_NAMES}/"$name"; '
        "done; true"
    )


def torch_site_command(python: str) -> str:
    """Make the torch image's packages visible in /build/venv (a ``.pth`` file), so pip
    finds the pinned torch installed and the build compiles against it, isolation off."""
    site = f"{IMAGE_VENV}/lib/python{python}/site-packages"
    target = f"{VENV}/lib/python{python}/site-packages/archwheel-torch.pth"
    return f"echo {shlex.quote(site)} > {shlex.quote(target)} && "


def torch_row(torch: TorchBuild) -> str:
    """The plan's ``torch`` row: the pin, its wheel, the toolkit and the Requires-Dist."""
    label = f"+{torch.local_version}" if torch.local_version else "off"
    return (
        f"{torch.pin.requirement}"
        + (f" (--torch; the recipe pins {torch.pin.replaces})" if torch.pin.replaces else "")
        + f" -> {torch.wheel.version} (CUDA {torch.cuda}); toolkit "
        f"{torch.toolkit_requirement or 'of the image'}; local version {label}; "
        f"Requires-Dist {torch.pin_requirement or 'not added'}"
        + (
            f", or the range of the releases among {', '.join(torch.loads_with)} that load it "
            "(can-load against each after the build: [torch] loads_with)"
            if torch.loads_with
            else ""
        )
    )
