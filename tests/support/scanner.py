"""The ``scan`` fixture: archwheel's scanner entry points, for tests that run it on real inputs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from archwheel.binary.scan.binary import scan_bytes
from archwheel.binary.scan.inputs import scan_path


@pytest.fixture(scope="module")
def scan() -> SimpleNamespace:
    """``scan.scan_bytes`` (one binary in memory) and ``scan.scan_path`` (any input)."""
    return SimpleNamespace(scan_bytes=scan_bytes, scan_path=scan_path)
