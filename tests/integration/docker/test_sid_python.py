"""The table's sid row against the archive: sid's python3 and libc6, read with sid's sources on
archwheel/debian:trixie (apt-get update over the network; sid moves, so this is `heavy`, kept
out of the normal run: a new CPython in sid is a table update, not a failure of the build)."""

from __future__ import annotations

import re
import subprocess

import pytest

from archwheel.facts.base_pythons import load_base_pythons

pytestmark = [pytest.mark.docker, pytest.mark.heavy]

SCRIPT = (
    # the base's own archive line, its suite turned to sid
    "sed -i 's/ trixie / sid /' /etc/apt/sources.list\n"
    # an archive copy's Release may be past its Valid-Until (a frozen mirror's is)
    "apt-get -o Acquire::Check-Valid-Until=false update >/dev/null\n"
    "apt-cache policy python3 libc6\n"
)


def test_sid_offers_the_python_and_glibc_the_table_says(docker_engine: str) -> None:
    sid = load_base_pythons().suite("sid")
    assert sid is not None
    proc = subprocess.run(
        [docker_engine, "run", "--rm", "--network", "host", "archwheel/debian:trixie",
         "sh", "-c", SCRIPT],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    python, libc = re.findall(r"Candidate: (\S+)", proc.stdout)
    assert python.startswith(f"{sid.python}."), proc.stdout
    assert libc.startswith(f"{sid.glibc[0]}.{sid.glibc[1]}-"), proc.stdout
