"""The cross-check use case without cuobjdump: exit codes of several checks, installed inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from archwheel.binary.model import InputInventory
from archwheel.crosscheck.inputs import source_of
from archwheel.errors import ToolError
from archwheel.verdicts.crosscheck import worst_exit_code


def test_the_worst_exit_code_of_several_cross_checks() -> None:
    assert worst_exit_code([]) == 0
    assert worst_exit_code([0, 4, 0]) == 4
    assert worst_exit_code([4, 1, 0]) == 1


def test_an_installed_inventory_without_its_root_cannot_be_cross_checked() -> None:
    with pytest.raises(ToolError, match="did not record where its files are"):
        source_of(InputInventory("torch==2.14.1 (python)", "installed", ()))
    rooted = InputInventory("torch", "installed", (), metadata={"root": "/site"})
    assert source_of(rooted) == Path("/site")
