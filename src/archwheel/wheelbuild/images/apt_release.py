"""An archive copy whose ``Release`` is past its ``Valid-Until``: found when the base is made.

A Debian suite's ``Release`` file says until when apt may trust it (``Valid-Until``: a week
for sid and the security suites); apt refuses an older one ("is not valid yet / expired"),
which guards against a mirror that replays an old index with old, vulnerable packages.
debootstrap does not check it, so a base made from a copy that is no longer refreshed (a
frozen company mirror, the archive copy these machines reach for sid) debootstraps, and then
every ``apt-get update`` in it fails: the builder image's provisioning, the Debian source
fetch, the Python bases of can-load.

archwheel reads the ``Release`` debootstrap fetched into the new root file system. An
expired one is refused in one line before the image is imported, unless the user accepts it
for this image (``archwheel base-image --allow-expired-release``): then the image carries an
apt setting that drops the date check for its archive (signatures are still checked, the
date only is not) and a label that says so.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path

# The apt setting an accepted image carries, and the label that records the acceptance.
APT_CONF = "etc/apt/apt.conf.d/99archwheel-release-past-valid-until"
APT_SETTING = 'Acquire::Check-Valid-Until "false";\n'
LABEL = "org.archwheel.apt-release-valid-until"
_LISTS = "var/lib/apt/lists"
_FIELD = re.compile(rb"^Valid-Until:[ \t]*([^\r\n]{1,80})$", re.M)
_READ = 1 << 20  # a Release file of a suite is some hundreds of KiB at most


def release_valid_until(rootfs: Path) -> datetime | None:
    """The earliest ``Valid-Until`` of the ``Release`` files debootstrap left in ``rootfs``
    (None: none says one, as a stable release's does not)."""
    lists = rootfs / _LISTS
    found: list[datetime] = []
    for path in sorted(lists.glob("*Release")):
        if path.is_symlink() or not path.is_file():
            continue
        with path.open("rb") as handle:
            head = handle.read(_READ)
        match = _FIELD.search(head)
        if match is None:
            continue
        try:
            when = parsedate_to_datetime(match.group(1).decode("ascii", "replace"))
        except (TypeError, ValueError):
            continue
        found.append(when if when.tzinfo else when.replace(tzinfo=timezone.utc))
    return min(found) if found else None


def expired(until: datetime | None, now: datetime | None = None) -> bool:
    """Whether a ``Valid-Until`` is past (None never is)."""
    return until is not None and until < (now or datetime.now(timezone.utc))


def describe(until: datetime) -> str:
    """``2026-11-06 08:08 UTC``."""
    return until.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def accept_expired(rootfs: Path) -> None:
    """Write the apt setting that accepts the archive's expired ``Release`` into ``rootfs``."""
    conf = rootfs / APT_CONF
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(
        "// archwheel base-image --allow-expired-release: this archive copy's Release is past\n"
        "// its Valid-Until; apt accepts it in this image (signatures are still checked).\n"
        + APT_SETTING
    )
