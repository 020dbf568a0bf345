"""Helpers for tests that run real containers (docker and podman).

``tiny_rootfs`` packs a few of the host's own programs (sh, sleep, cat, env, id) with the
shared libraries they load into a root file system tarball of a couple of MB: importing it gives
a real image in a second, without a registry or debootstrap. ``containers_created`` asks the
engine's event log which containers carrying a label were created, so a test can prove that a
command failed *before* any container started (even one that was removed again).
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import tarfile
import time
import uuid
from pathlib import Path

TINY_PROGRAMS = ("sh", "sleep", "cat", "env", "id", "echo", "true", "stat", "chown", "mkdir")


def _libraries(program: str) -> list[str]:
    proc = subprocess.run(["ldd", program], capture_output=True, text=True, check=False)
    found = []
    for line in proc.stdout.splitlines():
        m = re.search(r"(/\S+)", line.split("=>")[-1])
        if m and Path(m.group(1)).exists():
            found.append(m.group(1))
    return found


def tiny_rootfs(target: Path) -> Path:
    """Write a minimal root file system tarball made of the host's binaries."""
    files: dict[str, str] = {}
    for name in TINY_PROGRAMS:
        path = shutil.which(name)
        assert path is not None, f"host lacks {name}"
        real = str(Path(path).resolve())
        files[f"bin/{name}"] = real
        for lib in _libraries(real):
            files[lib.lstrip("/")] = str(Path(lib).resolve())
    with tarfile.open(target, "w") as tar:
        for directory in ("tmp", "etc", "proc", "sys", "dev"):
            info = tarfile.TarInfo(directory)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if directory == "tmp" else 0o755
            tar.addfile(info)
        passwd = b"root:x:0:0:root:/root:/bin/sh\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size = len(passwd)
        tar.addfile(info, io.BytesIO(passwd))
        for arcname, source in sorted(files.items()):
            tar.add(source, arcname=arcname)
        # Programs are found in /bin and /usr/bin, as on a distribution.
        info = tarfile.TarInfo("usr")
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        tar.addfile(info)
        info = tarfile.TarInfo("usr/bin")
        info.type = tarfile.SYMTYPE
        info.linkname = "../bin"
        tar.addfile(info)
    return target


def import_tiny_image(engine_cli: list[str], tarball: Path) -> str:
    tag = f"archwheel-test/tiny:{uuid.uuid4().hex[:10]}"
    with tarball.open("rb") as handle:
        subprocess.run(
            [*engine_cli, "import", "-", tag], stdin=handle, check=True, capture_output=True
        )
    return tag


def containers_with_label(engine_cli: list[str], label: str) -> list[str]:
    proc = subprocess.run(
        [*engine_cli, "ps", "-a", "--filter", f"label={label}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [n for n in proc.stdout.split() if n]


def containers_created(engine_cli: list[str], label: str, since: float) -> list[str]:
    """Names of containers with ``label`` created since ``since`` (engine event log)."""
    proc = subprocess.run(
        [
            *engine_cli, "events",
            "--since", str(int(since) - 1), "--until", str(int(time.time()) + 1),
            "--filter", "type=container", "--filter", "event=create",
            "--filter", f"label={label}", "--format", "{{json .}}",
        ],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    names = []
    for line in proc.stdout.splitlines():
        event = json.loads(line)
        attributes = event.get("Actor", {}).get("Attributes", {}) or {}
        names.append(str(attributes.get("name") or event.get("Name") or event.get("id")))
    return names
