"""A Debian base image made locally, for machines that reach no container registry.

``debootstrap --variant=minbase SUITE ROOTFS MIRROR`` then ``docker import`` (or ``podman
import``) of the root file system as ``archwheel/debian:SUITE``. The image is made once: when
the tag exists it is reused (``--force`` rebuilds). Its image ID is what provenance records as
the base image digest.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from archwheel.effects.engine import ContainerEngine
from archwheel.effects.process import LineSink, find_program, quote_command
from archwheel.errors import ToolError

DEFAULT_SUITE = "bookworm"
# No mirror by default: debootstrap uses its own default. A company mirror comes from --mirror
# or this variable (also read by .ci/setup-engine.sh).
MIRROR_ENV = "ARCHWHEEL_DEBIAN_MIRROR"
IMAGE_REPOSITORY = "archwheel/debian"
LABEL_BASE = "org.archwheel.base"


def default_tag(suite: str = DEFAULT_SUITE) -> str:
    return f"{IMAGE_REPOSITORY}:{suite}"


def is_local_base(reference: str) -> bool:
    """Whether ``reference`` names an image ``archwheel base-image`` makes."""
    return reference.startswith(IMAGE_REPOSITORY + ":")


def suite_of(reference: str) -> str:
    return reference.split(":", 1)[1]


@dataclass(frozen=True)
class BaseImage:
    tag: str
    image_id: str
    created: bool  # made now (False: it existed)


def ensure_base_image(
    engine: ContainerEngine,
    *,
    suite: str = DEFAULT_SUITE,
    mirror: str | None = None,
    tag: str | None = None,
    force: bool = False,
    work_dir: Path | None = None,
    sink: LineSink | None = None,
) -> BaseImage:
    """Return the base image, making it with debootstrap when it is missing."""
    tag = tag or default_tag(suite)
    engine.version()
    existing = engine.image_id(tag)
    if existing and not force:
        return BaseImage(tag, existing, created=False)
    debootstrap = find_program(
        "debootstrap", hint="apt-get install debootstrap (see .ci/setup-engine.sh)"
    )
    if os.geteuid() != 0:
        raise ToolError(
            "debootstrap needs root to make the base image",
            hint="run `sudo archwheel base-image` once, or import an image tagged " + tag,
        )
    with tempfile.TemporaryDirectory(prefix="archwheel-rootfs-", dir=work_dir) as tmp:
        rootfs = Path(tmp) / "rootfs"
        mirror = mirror or os.environ.get(MIRROR_ENV) or None
        command = [debootstrap, "--variant=minbase", suite, str(rootfs)]
        if mirror:
            command.append(mirror)
        if engine.echo:
            engine.echo(quote_command(["debootstrap", *command[1:]]))
        _stream(command, sink)
        # Package caches are dead weight in the image.
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (rootfs / leftover).glob("*"):
                if entry.is_file():
                    entry.unlink()
        tarball = Path(tmp) / "rootfs.tar"
        tar = find_program("tar")
        tar_cmd = [
            tar,
            "--numeric-owner",
            "--sort=name",
            "-C",
            str(rootfs),
            "-cf",
            str(tarball),
            ".",
        ]
        if engine.echo:
            engine.echo(quote_command(["tar", *tar_cmd[1:]]))
        _stream(tar_cmd, sink)
        shutil.rmtree(rootfs, ignore_errors=True)
        image_id = engine.import_rootfs(
            tarball,
            tag,
            changes=[
                f"LABEL {LABEL_BASE}=debootstrap-{suite}",
                "ENV LANG=C.UTF-8",
                'CMD ["/bin/bash"]',
            ],
        )
    return BaseImage(tag, image_id, created=True)


def _stream(command: list[str], sink: LineSink | None) -> None:
    tail: list[str] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    ) as proc:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            tail = [*tail[-4:], line]
            if sink:
                sink(line)
        code = proc.wait()
    if code != 0:
        last = next((t for t in reversed(tail) if t.strip()), "no output")
        raise ToolError(
            f"{Path(command[0]).name} failed (exit {code}): {last}",
            hint=f"check network access to the Debian mirror (--mirror URL or ${MIRROR_ENV})",
        )
