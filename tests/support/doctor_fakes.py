"""Fakes of the host's GPU tools for the doctor tests: a fake nvidia-smi, and a PATH without one."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def fake_nvidia_smi(tmp_path: Path) -> Callable[[str], Path]:
    """Write a fake nvidia-smi (a shell script) and return the directory holding it."""

    def make(script: str) -> Path:
        folder = tmp_path / "fake-bin"
        folder.mkdir(exist_ok=True)
        path = folder / "nvidia-smi"
        path.write_text("#!/bin/sh\n" + textwrap.dedent(script))
        path.chmod(0o755)
        return folder

    return make


def no_gpu_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A PATH without nvidia-smi, so `--gpu-probe nvidia-smi` sees no driver on any machine."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", f"{empty}:/usr/bin:/bin")
