"""Helpers for the torch-pin tests: torch wheels with the metadata layout of the official ones."""

from __future__ import annotations

import textwrap
import zipfile
from pathlib import Path

TOOLKIT_PIN = (
    "cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]"
    "==13.0.3"
)


def fake_torch_wheel(
    folder: Path,
    version: str = "2.14.1",
    cuda: str | None = "13.0",
    python: str = "cp311",
    requires: tuple[str, ...] = (f'{TOOLKIT_PIN}; platform_system == "Linux"',),
) -> Path:
    """A torch wheel with the METADATA and version.py layout of the official ones."""
    public = version.split("+", maxsplit=1)[0]
    full = version if "+" in version else f"{version}+cu130" if cuda else f"{version}+cpu"
    path = folder / f"torch-{version}-{python}-{python}-manylinux_2_28_x86_64.whl"
    meta = "\n".join(
        [
            "Metadata-Version: 2.4",
            "Name: torch",
            f"Version: {version}",  # as the file name says (pip checks that they agree)
            *(f"Requires-Dist: {r}" for r in ("filelock", *requires)),
            'Requires-Dist: pyyaml; extra == "pyyaml"',
            "",
            "body",
        ]
    )
    version_py = textwrap.dedent(
        f"""\
        from typing import Optional

        __version__ = '{full}'
        debug = False
        cuda: Optional[str] = {repr(cuda) if cuda else "None"}
        hip: Optional[str] = None
        """
    )
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"torch-{public}.dist-info/METADATA", meta)
        z.writestr(
            f"torch-{public}.dist-info/WHEEL",
            f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {python}-{python}-manylinux_2_28_x86_64\n",
        )
        z.writestr("torch/version.py", version_py)
    return path
