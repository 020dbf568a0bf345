"""A Debian base image made locally, for machines that reach no container registry.

``debootstrap --variant=minbase SUITE ROOTFS MIRROR`` then ``docker import`` (or ``podman
import``) of the root file system as ``archwheel/debian:SUITE``. The image is made once: when
the tag exists it is reused (``--force`` rebuilds). Its image ID is what provenance records as
the base image digest.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from archwheel.effects.engine import ContainerEngine
from archwheel.effects.process import Echo, LineSink, find_program, stream_lines
from archwheel.errors import RecipeError, ToolError, UsageError
from archwheel.facts.base_pythons import DEBIAN_REPOSITORY
from archwheel.wheelbuild.images.apt_release import LABEL as RELEASE_LABEL
from archwheel.wheelbuild.images.apt_release import (
    accept_expired,
    describe,
    expired,
    release_valid_until,
)

DEFAULT_SUITE = "bookworm"
# No mirror by default: debootstrap uses its own default. A company mirror comes from --mirror
# or this variable (read into effects.settings.Settings.debian_mirror; also read by
# .ci/setup-engine.sh): the caller passes it.
MIRROR_ENV = "ARCHWHEEL_DEBIAN_MIRROR"
IMAGE_REPOSITORY = DEBIAN_REPOSITORY  # archwheel/debian
LABEL_BASE = "org.archwheel.base"


_SUITE = re.compile(r"[a-z][a-z0-9-]{1,31}")
_MIRROR = re.compile(r"https?://[A-Za-z0-9.\[\]:@-]+(/[^\s'\"]*)?|file:///[^\s'\"]*")


def default_tag(suite: str = DEFAULT_SUITE) -> str:
    """The tag ``archwheel base-image`` gives the image of ``suite`` when no ``--tag`` is named."""
    return f"{IMAGE_REPOSITORY}:{suite}"


def is_local_base(reference: str) -> bool:
    """Whether ``reference`` names an image ``archwheel base-image`` makes."""
    return reference.startswith(IMAGE_REPOSITORY + ":")


def suite_of(reference: str) -> str:
    """The Debian suite an ``archwheel/debian:SUITE`` reference was made from (after the colon)."""
    return reference.split(":", 1)[1]


@dataclass(frozen=True)
class BaseImage:
    """A locally made base image: its tag, its ID (provenance's base digest), new or reused."""

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
    allow_expired_release: bool = False,
) -> BaseImage:
    """Return the base image, making it with debootstrap when it is missing (from ``mirror``;
    None: debootstrap's own default). An archive whose ``Release`` is past its
    ``Valid-Until`` is refused unless ``allow_expired_release`` (apt_release.py)."""
    if not _SUITE.fullmatch(suite):
        raise UsageError(f"{suite[:80]!r} is not a Debian suite name (bookworm, trixie, ...)")
    mirror = mirror or None
    if mirror is not None and not _MIRROR.fullmatch(mirror):
        # debootstrap takes it as a word of its command line: "--keyring=..." would be an option.
        raise UsageError(f"{mirror[:80]!r} is not a mirror URL (http://, https:// or file:///)")
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
        command = [debootstrap, "--variant=minbase", suite, str(rootfs)]
        if mirror:
            command.append(mirror)
        _stream(command, sink, engine.echo, "debootstrap")
        changes = [f"LABEL {LABEL_BASE}=debootstrap-{suite}"]
        until = release_valid_until(rootfs)
        if expired(until):
            assert until is not None
            if not allow_expired_release:
                raise ToolError(
                    f"the {suite} archive's Release was valid until {describe(until)} (a copy "
                    f"that is no longer refreshed): apt-get in {tag} would refuse it",
                    hint="refresh the mirror (--mirror URL), or accept it for this image: "
                    f"archwheel base-image --suite {suite} --allow-expired-release",
                )
            accept_expired(rootfs)
            changes.append(f'LABEL {RELEASE_LABEL}="expired {describe(until)}, accepted"')
            if sink is not None:
                sink(f"{tag}: the archive's Release expired {describe(until)}; apt accepts it")
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
        _stream(tar_cmd, sink, engine.echo, "tar")
        shutil.rmtree(rootfs, ignore_errors=True)
        image_id = engine.import_rootfs(
            tarball,
            tag,
            changes=[*changes, "ENV LANG=C.UTF-8", 'CMD ["/bin/bash"]'],
        )
    return BaseImage(tag, image_id, created=True)


def _stream(command: list[str], sink: LineSink | None, echo: Echo | None, name: str) -> None:
    """Run a step of the image making, its output to ``sink``; echoed as ``name ...``."""
    code, last = stream_lines(command, sink=sink, echo=echo, shown=[name, *command[1:]])
    if code != 0:
        raise ToolError(
            f"{Path(command[0]).name} failed (exit {code}): {last or 'no output'}",
            hint=f"check network access to the Debian mirror (--mirror URL or ${MIRROR_ENV})",
        )


def check_base_image_pin(reference: str, image_id: str, pin: str | None, recipe: Path) -> None:
    """Refuse a base image whose ID is not the recipe's ``base_image_id`` (a re-tagged image)."""
    if pin is None or image_id == pin:
        return
    raise RecipeError(
        f"{recipe}: [toolchain] base_image_id pins {reference} to {pin[:19]}..., "
        f"but {reference} is now {image_id[:19]}...: the tag names another image",
        hint="load the pinned image, or review the new one and update base_image_id",
    )
