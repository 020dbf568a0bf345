"""``archwheel clean`` names the volume ccache filled before builds cached with sccache, with the
command that frees it (real Docker; no build)."""

from __future__ import annotations

import subprocess

import pytest

from archwheel.wheelbuild import OLD_CCACHE_VOLUME
from tests.support.cli import CliRun

pytestmark = [pytest.mark.docker]


def test_clean_names_the_old_ccache_volume(docker_engine: str, cli_run: CliRun) -> None:
    existed = subprocess.run([docker_engine, "volume", "inspect", OLD_CCACHE_VOLUME],
                             capture_output=True, check=False).returncode == 0  # fmt: skip
    if not existed:
        subprocess.run([docker_engine, "volume", "create", OLD_CCACHE_VOLUME], check=True,
                       capture_output=True)  # fmt: skip
    try:
        code, out, _ = cli_run("clean", "--dry-run", "--engine", "docker")
        assert code == 0
        assert f"volume {OLD_CCACHE_VOLUME} is the ccache cache of earlier" in out
        assert f"`docker volume rm {OLD_CCACHE_VOLUME}` frees it" in out
    finally:
        if not existed:
            subprocess.run([docker_engine, "volume", "rm", OLD_CCACHE_VOLUME],
                           capture_output=True, check=False)  # fmt: skip
    if not existed:
        code, out, _ = cli_run("clean", "--dry-run", "--engine", "docker")
        assert OLD_CCACHE_VOLUME not in out
