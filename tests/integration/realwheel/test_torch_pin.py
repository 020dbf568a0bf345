"""The pinned torch read from the real torch wheels on the package index."""

from __future__ import annotations

from pathlib import Path

import pytest

from archwheel.effects.pipconfig import PipSettings
from archwheel.errors import RecipeError
from archwheel.exit_codes import exit_code_for
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild.images.toolkit import (
    manylinux_platforms,
)
from archwheel.wheelbuild.recipes.torch_pin import (
    TORCH_WHEELS,
    fetch_torch_wheel,
    find_torch_pin,
    read_torch_wheel,
)
from tests.support.torch_pin_support import TOOLKIT_PIN


@pytest.mark.realwheel
@pytest.mark.slow
def test_the_real_torch_wheel_says_cuda_13_0_and_pins_cuda_toolkit_13_0_3(tmp_path: Path) -> None:
    pin = find_torch_pin(["torch==2.14.1"], "r")
    assert pin is not None
    path = fetch_torch_wheel(
        pin, "3.11", manylinux_platforms((2, 36)), PipSettings.from_host(), tmp_path
    )
    wheel = read_torch_wheel(path)
    assert wheel.cuda == CudaVersion(13, 0)
    assert wheel.version.startswith("2.14.1")
    assert str(wheel.toolkit_requirement()) == TOOLKIT_PIN


@pytest.mark.realwheel
@pytest.mark.slow
def test_a_python_without_a_torch_wheel_is_refused_with_the_fix(tmp_path: Path) -> None:
    pin = find_torch_pin(["torch==2.14.1"], "r")
    assert pin is not None
    with pytest.raises(RecipeError, match=r"no torch 2.14.1 wheel for Python 3.9") as info:
        fetch_torch_wheel(
            pin, "3.9", manylinux_platforms((2, 36)), PipSettings.from_host(), tmp_path
        )
    assert exit_code_for(info.value) == 2
    assert "Python version" in (info.value.hint or "")
    assert not list((tmp_path / TORCH_WHEELS).glob("*.whl"))
