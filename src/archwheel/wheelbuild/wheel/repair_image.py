"""The repair step's two uses of the builder image: copying libraries out of it, and stripping
with its own binutils (``repair.repair_step`` runs both, each in one container without network).

The libraries a ``[repair] bundle`` names are found as the loader would find them inside the
image (``ldconfig -p``), then in the usual library folders, then by the compiler; stripping uses
the ``strip`` that linked the libraries, so the bytes of a repaired wheel do not depend on the
host that ran archwheel.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from archwheel.effects.engine import ContainerEngine, ContainerSpec, Mount

# Strips the files in place with the given flag (repair_step: in the builder image, whose
# binutils made them; repair.host_strip: this machine's, for the tests).
Stripper = Callable[[str, Sequence[Path]], None]
# Where the builder image is searched when ldconfig does not know a library.
IMAGE_LIBRARY_DIRS = (
    "/usr/lib64",
    "/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/local/lib",
    "/usr/local/lib64",
)

_COLLECT = r"""
set -u
for name in "$@"; do
  path=$(ldconfig -p 2>/dev/null | awk -v n="$name" '$1 == n { print $NF; exit }')
  if [ -z "$path" ]; then
    for d in DIRS; do
      if [ -f "$d/$name" ]; then path="$d/$name"; break; fi
    done
  fi
  if [ -z "$path" ] && command -v gcc >/dev/null 2>&1; then
    p=$(gcc -print-file-name="$name"); [ "$p" != "$name" ] && [ -f "$p" ] && path=$p
  fi
  if [ -n "$path" ]; then cp -L "$path" "/archwheel-libs/$name"; echo "$name <- $path"; fi
done
"""


def collect_image_libraries(
    engine: ContainerEngine,
    image: str,
    names: Sequence[str],
    dest: Path,
    *,
    user: str | None = None,
    sink: Callable[[str], None] | None = None,
) -> dict[str, str]:
    """Copy the named libraries out of ``image`` into ``dest``: soname -> path in the image.

    Found like the loader would (``ldconfig -p``), then in the usual library folders, then by
    the compiler (``gcc -print-file-name``); a library not found is simply absent (the repair
    then names it).
    """
    dest.mkdir(parents=True, exist_ok=True)
    if not names:
        return {}
    if user and os.getuid() == 0:  # the build user must be able to write there
        uid, _, gid = user.partition(":")
        os.chown(dest, int(uid), int(gid or uid))
    script = _COLLECT.replace("DIRS", " ".join(IMAGE_LIBRARY_DIRS))
    spec = ContainerSpec(
        image=image,
        network="none",
        user=user,
        mounts=(Mount(str(dest), "/archwheel-libs"),),
        labels={"org.archwheel.step": "repair-libraries"},
    )
    found: dict[str, str] = {}
    lines: list[str] = []
    with engine.container(spec) as container:
        container.call(
            ["bash", "-c", script, "collect", *names],
            sink=lines.append,
            what="step 'repair-libraries'",
        )
    for line in lines:
        if sink:
            sink(line)
        name, sep, path = line.partition(" <- ")
        if sep:
            found[name.strip()] = path.strip()
    return found


def image_stripper(
    engine: ContainerEngine, image: str, folder: Path, *, user: str | None = None
) -> Stripper:
    """A ``Stripper`` that runs the builder image's own ``strip`` (the binutils that linked the
    libraries, so that the bytes do not depend on the host), on copies in ``folder``, mounted
    into one container without network, as the build user; the results are copied back."""

    def strip(flag: str, files: Sequence[Path]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        owner = None
        if user and os.getuid() == 0:  # the build user must be able to write there
            uid, _, gid = user.partition(":")
            owner = (int(uid), int(gid or uid))
            os.chown(folder, *owner)
        copies = [folder / str(i) for i in range(len(files))]
        for source, copy in zip(files, copies, strict=True):
            shutil.copyfile(source, copy)
            if owner:
                os.chown(copy, *owner)
        spec = ContainerSpec(
            image=image,
            network="none",
            user=user,
            mounts=(Mount(str(folder), "/archwheel-strip"),),
            labels={"org.archwheel.step": "repair-strip"},
        )
        with engine.container(spec) as container:
            container.call(
                ["strip", flag, "--", *(f"/archwheel-strip/{c.name}" for c in copies)],
                what="step 'repair-strip'",
            )
        for source, copy in zip(files, copies, strict=True):
            shutil.copyfile(copy, source)
            copy.unlink()

    return strip
