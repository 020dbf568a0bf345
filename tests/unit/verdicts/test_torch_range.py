"""The loader's view of a torch wheel kept between runs (``verdicts.torch_range``), and the
request checks of ``can-load --torch``."""

from __future__ import annotations

from pathlib import Path

import pytest

from archwheel.binary.dynamic import DynamicInfo, UndefinedSymbol
from archwheel.effects.pipconfig import PipSettings
from archwheel.errors import InputError, UsageError
from archwheel.verdicts import torch_range
from archwheel.verdicts.load import WheelFiles

VIEW = WheelFiles(
    filename="torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl",
    name="torch",
    version="2.14.1",
    tags=("cp311-cp311-manylinux_2_28_x86_64",),
    libraries=(
        DynamicInfo(
            path="torch/lib/libc10.so",
            size=1000,
            file_kind="shared-object",
            is_dynamic=True,
            machine=62,
            soname="libc10.so",
            needed=("libstdc++.so.6",),
            rpath=("$ORIGIN",),
            undefined=(UndefinedSymbol("_Znwm", "GLIBCXX_3.4", "libstdc++.so.6", False, "func"),),
            exports={"_ZN3c105ErrorC1Ev": (None,), "versioned": ("V1", "V2")},
            version_needs=(("libstdc++.so.6", ("GLIBCXX_3.4",)),),
        ),
    ),
    requires=(("nvidia-nccl-cu13", "==2.30.7", 'platform_system == "Linux"'),),
    cuda_major=13,
)


def test_a_kept_view_reads_back_equal(tmp_path: Path) -> None:
    path = tmp_path / "view.json"
    torch_range._keep_view(path, VIEW)
    assert torch_range._cached_view(path, VIEW.filename) == VIEW


@pytest.mark.parametrize(
    "content",
    [b"", b"{", b'{"format": 99, "wheel": {}}', b'{"format": 1, "wheel": {"x": 1}}', b"[]"],
)
def test_a_damaged_or_foreign_view_is_read_again(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "view.json"
    path.write_bytes(content)
    assert torch_range._cached_view(path, VIEW.filename) is None


def test_a_view_of_another_file_is_not_used(tmp_path: Path) -> None:
    path = tmp_path / "view.json"
    torch_range._keep_view(path, VIEW)
    assert (
        torch_range._cached_view(path, "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl") is None
    )


def test_the_request_is_checked_before_anything_is_read(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        torch_range.can_load_range(tmp_path / "x.whl", "banana", pip=PipSettings(), cache=tmp_path)
    with pytest.raises(InputError, match="not a wheel"):
        torch_range.can_load_range(tmp_path / "x.txt", ">=2.11", pip=PipSettings(), cache=tmp_path)
