"""Small real wheels for the index tests: any name, version, python tag, Requires-Dist pins and
Requires-Python, optionally with a shared library holding device code (synthetic fatbins), and
fresh virtual environments that install from an index with pip or uv, offline.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support.builders import Entry, container, elf64
from tests.support.components import require


def device_library(*sms: int) -> bytes:
    """An ELF shared library whose .nv_fatbin holds one SASS entry per SM in ``sms``."""
    return elf64([(".nv_fatbin", container(*(Entry(sm=sm) for sm in sms)))])


def make_dist(
    folder: Path,
    name: str,
    version: str,
    *,
    python_tag: str = "py3",
    abi_tag: str = "none",
    platform_tag: str = "any",
    requires: tuple[str, ...] = (),
    requires_python: str | None = None,
    libraries: dict[str, bytes] | None = None,
) -> Path:
    """A valid wheel (one module, RECORD with hashes) written with zipfile."""
    module = name.replace("-", "_")
    dist_info = f"{module}-{version}.dist-info"
    tag = f"{python_tag}-{abi_tag}-{platform_tag}"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    if requires_python:
        metadata += f"Requires-Python: {requires_python}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    files: dict[str, bytes] = {
        f"{module}/__init__.py": f"BUILD = {version!r}\n".encode(),
        f"{dist_info}/METADATA": metadata.encode(),
        f"{dist_info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: archwheel-tests\n"
            f"Root-Is-Purelib: {'true' if platform_tag == 'any' else 'false'}\nTag: {tag}\n"
        ).encode(),
    }
    for member, data in (libraries or {}).items():
        files[f"{module}/{member}"] = data
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{module}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path, data in files.items():
            zf.writestr(zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0)), data)
    return wheel


def _clean_env() -> dict[str, str]:
    """This environment without any pip or uv settings: only the given index is seen."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["UV_NO_CONFIG"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def fresh_venv(path: Path) -> Path:
    """A new venv (without pip); returns its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path / "bin" / "python"


def pip_from_index(python: Path, index_url: str, *specs: str) -> subprocess.CompletedProcess[str]:
    """``pip install --index-url INDEX SPECS`` into ``python``'s environment, nothing else seen."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-cache-dir",
         "--index-url", index_url, *specs],
        capture_output=True, text=True, check=False, timeout=300, env=_clean_env(),
    )  # fmt: skip


def extra_tool(name: str) -> str:
    """A command from the test extra (beside this interpreter) or PATH; missing: skip or fail."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    require(found is not None, f"{name} is not installed (pip install -e '.[test]')")
    assert found is not None
    return found


def uv_binary() -> str:
    return extra_tool("uv")


def uv_from_index(python: Path, index_url: str, *specs: str) -> subprocess.CompletedProcess[str]:
    """``uv pip install --index-url INDEX SPECS`` into ``python``'s environment, offline."""
    return subprocess.run(
        [uv_binary(), "pip", "install", "--no-cache", "--python", str(python),
         "--index-url", index_url, *specs],
        capture_output=True, text=True, check=False, timeout=300, env=_clean_env(),
    )  # fmt: skip


def installed(python: Path, distribution: str) -> str | None:
    proc = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({distribution!r}))"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return proc.stdout.strip() if proc.returncode == 0 else None
