"""No file of the project names a public package-index or Debian-mirror host.

The tools' own defaults (pip's configured index, debootstrap's default mirror) are used; company
mirrors come from settings. The host names are assembled from parts here so that this file does
not name them either.
"""

from __future__ import annotations

import subprocess

from tests.support.paths import ROOT

PUBLIC_HOSTS = tuple(
    ".".join(parts)
    for parts in (
        ("pypi", "org"),
        ("files", "pythonhosted", "org"),
        ("pythonhosted", "org"),
        ("deb", "debian", "org"),
        ("ftp", "debian", "org"),
        ("security", "debian", "org"),
        ("download", "pytorch", "org"),
        ("pypi", "nvidia", "com"),
        ("archive", "ubuntu", "com"),
    )
)


def tracked_text_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [name for name in listed.split("\0") if name]


def test_no_tracked_file_names_a_public_index_or_mirror_host() -> None:
    found: list[str] = []
    for name in tracked_text_files():
        path = ROOT / name
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8").lower()
        except (UnicodeDecodeError, OSError):
            continue
        found.extend(f"{name}: {host}" for host in PUBLIC_HOSTS if host in text)
    assert found == []
