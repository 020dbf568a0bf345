"""The repair step against the real thing: the official torch 2.14.1 (cu130) and 2.15.0 (cu132:
PyPI's 2.15.0 is the CUDA 13.2 build) wheels from PyPI.

The official wheel's libraries are taken out of it, their RPATHs removed (as they come out of
the build, before PyTorch's repair_wheel.py), and packed into a wheel tagged linux_x86_64 whose
METADATA lacks the pinned requirements; libgomp.so.1 is left out of it and offered in a folder,
as the builder image holds it. archwheel's repair with the shipped cu130 recipe's ``[repair]``
table must then give every library exactly the RPATH the official wheel has, the same
``nvidia-*`` requirements, libgomp bundled, and the manylinux_2_28 tag, with auditwheel
agreeing. For 2.14.1 the repair is the shipped cu130 recipe's; for 2.15.0, whose recipe cannot
name CUDA 13.2 yet, it is what a PyTorch recipe with pins = "official" gets from the 2.15.0/cu132
table (libgfortran.so.5 bundled too). Everything is read back with archwheel's own readers. The two largest libraries
(libtorch_cpu.so, libtorch_cuda.so: 950 MB unpacked) are left out to keep the test short; their
place is taken by stand-ins compiled here with the same SONAMEs (and no dependencies), so the
RPATHs of all 13 libraries are compared; auditwheel then judges the dependencies of the 11 real
ones.
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from archwheel.binary.dynamic_wheel import read_wheel_dynamic
from archwheel.binary.wheelmeta import read_wheel_metadata
from archwheel.effects.process import run_program
from archwheel.facts.catalog import load_facts
from archwheel.facts.pytorch_official import load_official
from archwheel.wheelbuild.recipes.recipe import load_recipe
from archwheel.wheelbuild.wheel.repair import (
    RepairSpec,
    official_torch_spec,
    repair_wheel,
    spec_for_recipe,
    tool_path,
)
from tests.support.components import TORCH_2_15_SPEC, TORCH_SPEC, fetch_wheel, require
from tests.support.paths import ROOT
from tests.support.repair_wheels import write_wheel

FACTS = load_facts()

pytestmark = [pytest.mark.slow, pytest.mark.realwheel]

LEFT_OUT = {"torch/lib/libtorch_cpu.so", "torch/lib/libtorch_cuda.so"}


def shipped_recipe_spec() -> RepairSpec:
    spec = spec_for_recipe(load_recipe(ROOT / "recipes" / "pytorch-2.14.1-cu130.toml", facts=FACTS))
    assert spec is not None
    return spec


def table_spec_2_15() -> RepairSpec:
    variant = load_official().variant("2.15.0", "13.2")
    assert variant is not None
    return official_torch_spec(variant, "2.15.0/cu132")


@pytest.mark.parametrize(
    ("version", "cuda", "fetch", "make_spec"),
    [
        ("2.14.1", "13.0", lambda: fetch_wheel(TORCH_SPEC), shipped_recipe_spec),
        (
            "2.15.0",
            "13.2",
            lambda: fetch_wheel(TORCH_2_15_SPEC, unconstrained=True),
            table_spec_2_15,
        ),
    ],
    ids=["2.14.1-cu130", "2.15.0-cu132"],
)
def test_repair_reproduces_the_official_wheel(
    tmp_path: Path,
    version: str,
    cuda: str,
    fetch: Callable[[], Path],
    make_spec: Callable[[], RepairSpec],
) -> None:
    official = fetch()
    spec = make_spec()
    truth = {i.path: i for i in read_wheel_dynamic(official)}
    truth_meta = read_wheel_metadata(official)

    libs = tmp_path / "libs"
    image_libs = tmp_path / "image-lib64"
    image_libs.mkdir()
    files: dict[str, Path | bytes] = {"torch/__init__.py": b""}
    with zipfile.ZipFile(official) as zf:
        for member in truth:
            if member in LEFT_OUT:
                continue
            bundled = member.rsplit("/", 1)[1] in spec.bundle
            target = (image_libs / member.rsplit("/", 1)[1]) if bundled else libs / member
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(member))
            run_program([tool_path("patchelf"), "--remove-rpath", str(target)], echo=None)
            if not bundled:
                files[member] = target
        metadata = zf.read(f"torch-{version}.dist-info/METADATA").decode()
    require(shutil.which("gcc") is not None, "gcc is not installed")
    (tmp_path / "stub.c").write_text("int archwheel_stand_in(void) { return 0; }\n")
    for member in sorted(LEFT_OUT):
        name = member.rsplit("/", 1)[1]
        subprocess.run(
            ["gcc", "-shared", "-fPIC", f"-Wl,-soname,{name}", "-o", str(tmp_path / name),
             str(tmp_path / "stub.c")],
            check=True,
        )  # fmt: skip
        files[member] = tmp_path / name
    pinned = {r.split(";")[0].strip() for r in spec.requirements}
    stripped = "\n".join(
        line
        for line in metadata.splitlines()
        if not (line.startswith("Requires-Dist: ") and line[15:].split(";")[0].strip() in pinned)
    )
    assert stripped.count("Requires-Dist:") == metadata.count("Requires-Dist:") - len(pinned)
    files[f"torch-{version}.dist-info/METADATA"] = (stripped + "\n").encode()
    built = write_wheel(
        tmp_path / f"torch-{version}-cp311-cp311-linux_x86_64.whl",
        files,
        "torch",
        "cp311-cp311-linux_x86_64",
        version=version,
    )
    for info in read_wheel_dynamic(built):
        assert info.rpath == () and info.runpath == ()

    report = repair_wheel(built, tmp_path / "out", spec, library_dirs=[image_libs])

    assert report.wheel.name == f"torch-{version}-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert report.bundled == {name: str(image_libs / name) for name in spec.bundle}
    # Read back by the streaming member reader: the repacked (deflated) libshm.so is read whole.
    repaired = {i.path: i for i in read_wheel_dynamic(report.wheel)}
    assert set(repaired) >= set(truth)
    assert not [i.problems for i in repaired.values() if i.problems]
    for member, info in truth.items():
        assert repaired[member].rpath == info.rpath, member
        assert repaired[member].runpath == info.runpath == (), member
    meta = read_wheel_metadata(report.wheel)
    nvidia = sorted(p.name for p in meta.requires if p.name.startswith(("nvidia-", "cuda-")))
    official_nvidia = sorted(
        p.name for p in truth_meta.requires if p.name.startswith(("nvidia-", "cuda-"))
    )
    assert nvidia == official_nvidia
    assert [(p.name, p.specifier, p.extras, p.marker) for p in meta.requires] == [
        (p.name, p.specifier, p.extras, p.marker) for p in truth_meta.requires
    ]
    assert meta.tags == truth_meta.tags
    assert report.auditwheel["sym_tag"] == "manylinux_2_28_x86_64"
    # the table's list of torch's own libraries (what an extension of torch may link)
    variant = load_official().variant(version, cuda)
    assert variant is not None
    shipped = {m.rsplit("/", 1)[1] for m in truth if m.startswith("torch/lib/")}
    assert variant.libraries == shipped
