"""An archive copy whose Release is past its Valid-Until (wheelbuild/images/apt_release.py): read
from the Release files debootstrap leaves in a new root file system, refused unless accepted,
and then accepted by an apt setting the image carries."""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone
from pathlib import Path

from archwheel.wheelbuild.images.apt_release import (
    APT_CONF,
    accept_expired,
    describe,
    expired,
    release_valid_until,
)

# The head of the sid Release these machines' archive copy served (2026-10-30).
SID = (
    "Origin: Debian\nLabel: Debian\nSuite: unstable\nCodename: sid\n"
    "Date: Fri, 30 Oct 2026 08:08:01 UTC\nValid-Until: Fri, 06 Nov 2026 08:08:01 UTC\n"
    "Acquire-By-Hash: yes\n"
)
# A stable release's Release has no Valid-Until.
BOOKWORM = (
    "Origin: Debian\nSuite: stable\nCodename: bookworm\nDate: Sat, 10 Jan 2026 11:00:00 UTC\n"
)
NOW = datetime(2026, 12, 7, 12, 0, tzinfo=timezone.utc)


def rootfs_with(tmp_path: Path, **files: str) -> Path:
    lists = tmp_path / "rootfs" / "var" / "lib" / "apt" / "lists"
    lists.mkdir(parents=True)
    for name, text in files.items():
        (lists / name).write_text(text)
    return tmp_path / "rootfs"


def test_an_expired_release_is_found_and_a_stable_one_has_no_date(tmp_path: Path) -> None:
    sid = rootfs_with(tmp_path / "a", deb_debian_org_debian_dists_sid_Release=SID)
    until = release_valid_until(sid)
    assert until == datetime(2026, 11, 6, 8, 8, 1, tzinfo=timezone.utc)
    assert expired(until, NOW) and not expired(until, datetime(2026, 11, 1, tzinfo=timezone.utc))
    assert describe(until) == "2026-11-06 08:08 UTC"
    stable = rootfs_with(tmp_path / "b", deb_debian_org_debian_dists_bookworm_Release=BOOKWORM)
    assert release_valid_until(stable) is None and not expired(None, NOW)
    assert release_valid_until(tmp_path / "nothing") is None


def test_odd_release_files_are_passed_over_never_raised(tmp_path: Path) -> None:
    """The mirror's files: a date that is no date, a field past its bound, a link."""
    root = rootfs_with(
        tmp_path,
        a_Release="Valid-Until: tomorrow\n",
        b_Release="Valid-Until: " + "9" * 200 + "\n",
        c_InRelease="-----BEGIN PGP SIGNED MESSAGE-----\n" + SID.replace("06 Nov", "20 Nov"),
    )
    (root / "var/lib/apt/lists/d_Release").symlink_to("/etc/passwd")
    assert release_valid_until(root) == datetime(2026, 11, 20, 8, 8, 1, tzinfo=timezone.utc)


def test_an_accepted_image_carries_an_apt_setting_apt_reads(tmp_path: Path) -> None:
    root = tmp_path / "rootfs"
    accept_expired(root)
    conf = root / APT_CONF
    assert 'Acquire::Check-Valid-Until "false";' in conf.read_text()
    # apt-config, the host's apt, reads the file as apt in the image will
    dump = subprocess.run(
        ["apt-config", "-c", str(conf), "dump", "Acquire::Check-Valid-Until"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert 'Acquire::Check-Valid-Until "false";' in dump.stdout
