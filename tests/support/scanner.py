"""The ``scan`` fixture: archwheel's scanner module, for tests that run it on real inputs."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def scan() -> ModuleType:
    """archwheel's scanner; these tests fail (not skip) until it exists."""
    return importlib.import_module("archwheel.binary.scan")
