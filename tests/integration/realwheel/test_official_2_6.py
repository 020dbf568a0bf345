"""The official torch 2.6.0 wheel (PyPI: the CUDA 12.4 build) against what
``facts/pytorch_official.toml`` records of it: the libraries of torch/lib, each one's SONAME,
DT_NEEDED and RPATH (the layout's folders, then ``$ORIGIN``), and the nvidia-* and triton pins
of its METADATA. What archwheel builds from Debian's source package of the same release is
compared with these facts, library by library (wheel/preview.py), so they must be the wheel's.
The facts cite the cp313 wheel; this reads the build for this machine's Python (the same
libraries but libtorch_python.so's Python)."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement

from archwheel.binary.dynamic_wheel import read_wheel_dynamic
from archwheel.binary.wheelmeta import read_wheel_metadata
from archwheel.facts.pytorch_official import load_official
from tests.support.components import TORCH_2_6_SPEC, fetch_wheel

pytestmark = [pytest.mark.slow, pytest.mark.realwheel]


def test_the_recorded_2_6_0_facts_are_the_official_wheels() -> None:
    official = fetch_wheel(TORCH_2_6_SPEC)
    variant = load_official().variant("2.6.0", "12.4")
    assert variant is not None
    libs = {
        Path(i.path).name: i
        for i in read_wheel_dynamic(official)
        if i.path.startswith("torch/lib/") and i.file_kind == "shared-object"
    }
    assert set(libs) == variant.libraries == set(variant.needed)
    rpath = (*(f"$ORIGIN/../../{f}" for f in variant.rpath_folders), "$ORIGIN")
    for name, info in libs.items():
        assert info.needed == variant.needed[name], name
        expected_soname = "libgomp.so.1" if name.startswith("libgomp-") else name
        assert info.soname == expected_soname, name
        if not name.startswith("libgomp-"):  # auditwheel's graft keeps no RPATH of torch's
            assert info.rpath == rpath, name
    meta = read_wheel_metadata(official)
    pinned = [r for r in meta.requires if r.name.startswith(("nvidia-", "triton"))]
    recorded = [Requirement(line) for line in variant.requirements]
    assert [(r.name, str(r.specifier), str(r.marker)) for r in pinned] == [
        (r.name, str(r.specifier), str(r.marker)) for r in recorded
    ]
    outside = {n for i in libs.values() for n in i.needed} - set(libs) - {"libgomp.so.1"}
    assert outside & (variant.provided | variant.driver) == {
        n for n in outside if n.startswith(("libcu", "libnv", "libnccl"))
    }
