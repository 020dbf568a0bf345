"""Load every extension module of installed wheels the way a clean host would.

With no ``LD_LIBRARY_PATH`` and no ``PYTHONPATH``: first the dynamic loader itself resolves each
extension module (every ``*.so`` member of the wheel) in list mode (``ldd``: the loader's own
search, RPATHs included, no code run), before anything imports torch, so a dependency such as
libc10.so or libcudart.so.13 is found only through the RPATHs the repair step wrote (an
``import`` alone would not prove it: ``import torch`` preloads those sonames). Then the package
is imported in a child interpreter, which loads its modules for real. (Opening every module in
one process is not possible for every project: torch-scatter's ``_cpu`` and ``_cuda`` modules
register the same operators and exclude each other.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path


def extension_modules(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        return sorted(n for n in zf.namelist() if n.endswith(".so") or ".so." in n)


def site_packages(python: Path) -> Path:
    proc = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return Path(proc.stdout.strip())


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH")}


def load_everything(python: Path, wheel: Path, package: str, cwd: Path) -> dict[str, str]:
    """member -> "loaded" or what the loader could not find, for every library of ``wheel``;
    ``import PACKAGE`` -> "loaded" or the error."""
    ldd = shutil.which("ldd")
    assert ldd is not None, "ldd is not installed"
    site = site_packages(python)
    result: dict[str, str] = {}
    for member in extension_modules(wheel):
        proc = subprocess.run(
            [ldd, str(site / member)], env=clean_env(), capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        missing = [ln.split()[0] for ln in proc.stdout.splitlines() if "not found" in ln]
        if proc.returncode != 0 and not missing:
            missing = [proc.stderr.strip()[-300:] or f"ldd exit {proc.returncode}"]
        result[member] = "loaded" if not missing else "not found: " + " ".join(missing)
    proc = subprocess.run(
        [str(python), "-c", f"import {package}"], env=clean_env(), capture_output=True,
        text=True, timeout=600, check=False, cwd=cwd,
    )  # fmt: skip
    result[f"import {package}"] = "loaded" if proc.returncode == 0 else proc.stderr[-2000:]
    return result
