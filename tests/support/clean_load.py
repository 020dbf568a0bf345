"""Load every extension module of installed wheels the way a clean host would.

One child interpreter per wheel, with no ``LD_LIBRARY_PATH`` and no ``PYTHONPATH``: each
extension module (every ``*.so`` member of the wheel) is opened with ``ctypes.CDLL`` *before*
anything imports torch, so its dependencies (libc10.so, libcudart.so.13, ...) can be found only
through the RPATHs the repair step wrote; then the package itself is imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from pathlib import Path

_PROBE = r"""
import ctypes, json, sys, sysconfig
from pathlib import Path
site = Path(sysconfig.get_paths()["purelib"])
out = {}
for member in json.loads(sys.argv[1]):
    try:
        ctypes.CDLL(str(site / member))
        out[member] = "loaded"
    except OSError as exc:
        out[member] = str(exc)
__import__(sys.argv[2])
out["import " + sys.argv[2]] = "loaded"
print(json.dumps(out))
"""


def extension_modules(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        return sorted(n for n in zf.namelist() if n.endswith(".so") or ".so." in n)


def load_everything(python: Path, wheel: Path, package: str, cwd: Path) -> dict[str, str]:
    """member -> "loaded" or the loader's error, for every library of ``wheel``."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH")}
    proc = subprocess.run(
        [str(python), "-c", _PROBE, json.dumps(extension_modules(wheel)), package],
        env=env, capture_output=True, text=True, timeout=600, check=False, cwd=cwd,
    )  # fmt: skip
    if proc.returncode != 0:
        return {"probe": proc.stderr.strip()[-2000:]}
    result: dict[str, str] = json.loads(proc.stdout.splitlines()[-1])
    return result
