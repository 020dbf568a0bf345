"""The repair step's preview on a partial build (wheel/preview.py): the shared libraries a
build tree holds, copied out (links and foreign files skipped), packed into a ``+partial``
wheel, repaired by the real repair step (patchelf, auditwheel) and set beside the official
wheel's libraries of the same names. The libraries are compiled here with gcc; the real
PyTorch run: tests/integration/docker/test_pytorch_debian.py."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from archwheel.binary.dynamic_wheel import read_wheel_dynamic
from archwheel.facts.pytorch_official import load_official
from archwheel.wheelbuild.wheel.preview import (
    MAX_LIBRARY_BYTES,
    LibraryRow,
    compare_libraries,
    preview_wheel,
    read_preview,
    tree_libraries,
)
from archwheel.wheelbuild.wheel.repair import RepairSpec, repair_wheel
from tests.support.components import require


def _gcc(folder: Path, name: str, *, soname: str | None, needs: tuple[str, ...] = ()) -> Path:
    require(shutil.which("gcc") is not None, "gcc is not installed")
    source = folder / f"{name}.c"
    source.write_text(f"int {name.replace('.', '_')}_value(void) {{ return 1; }}\n")
    out = folder / name
    flags = [f"-Wl,-soname,{soname}"] if soname else []
    libs = [f"-l:{n}" for n in needs]
    subprocess.run(
        ["gcc", "-shared", "-fPIC", *flags, "-o", str(out), str(source),
         f"-L{folder}", "-Wl,--no-as-needed", *libs],
        check=True,
    )  # fmt: skip
    source.unlink()
    return out


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A build folder's lib/ as CMake leaves it, and what a hostile build could put there."""
    lib = tmp_path_factory.mktemp("build") / "lib"
    lib.mkdir()
    _gcc(lib, "libc10.so", soname="libc10.so")
    _gcc(lib, "libc10_cuda.so", soname="libc10_cuda.so", needs=("libc10.so",))
    # a versioned library and its links (Debian's HAVE_SOVERSION): one copy, under its SONAME
    _gcc(lib, "libshm.so.2.6.0", soname="libshm.so.2.6")
    (lib / "libshm.so.2.6").symlink_to("libshm.so.2.6.0")
    (lib / "libshm.so").symlink_to("libshm.so.2.6")
    outside = _gcc(lib.parent, "libsecret.so", soname="libsecret.so")
    (lib / "libsecret.so").symlink_to(outside)  # a link out of the tree: never followed
    (lib / "libtext.so").write_text("not an ELF file\n")
    (lib / "libstatic.a").write_bytes(b"!<arch>\n")
    os.mkfifo(lib / "libfifo.so")  # not a regular file: never opened for reading
    with (lib / "libhuge.so").open("wb") as huge:  # sparse, past the limit: never copied
        huge.write(b"\x7fELF")
        huge.truncate(MAX_LIBRARY_BYTES + 1)
    return lib


def test_the_tree_libraries_are_copied_by_soname_links_and_foreign_files_skipped(
    tree: Path, tmp_path: Path
) -> None:
    copies = tree_libraries(tree, tmp_path / "libs")
    assert [p.name for p in copies] == ["libc10.so", "libc10_cuda.so", "libshm.so.2.6"]
    assert all(p.is_file() and not p.is_symlink() for p in copies)
    assert sorted(p.name for p in (tmp_path / "libs").iterdir()) == [p.name for p in copies]
    assert tree_libraries(tree / "missing", tmp_path / "none") == ()
    linked = tmp_path / "linked"
    linked.symlink_to(tree)
    assert tree_libraries(linked, tmp_path / "none") == ()  # the folder itself a link


def test_the_preview_wheel_is_repaired_and_compared_with_the_official_libraries(
    tree: Path, tmp_path: Path
) -> None:
    copies = tree_libraries(tree, tmp_path / "libs")
    wheel = preview_wheel(
        copies, distribution="torch", version="2.6.0", python="3.13",
        library_folder="torch/lib", into=tmp_path / "in",
    )  # fmt: skip
    assert wheel.name == "torch-2.6.0+partial-cp313-cp313-linux_x86_64.whl"
    with zipfile.ZipFile(wheel) as zf:
        assert sorted(zf.namelist()) == [
            "torch-2.6.0+partial.dist-info/METADATA",
            "torch-2.6.0+partial.dist-info/RECORD",
            "torch-2.6.0+partial.dist-info/WHEEL",
            "torch/lib/libc10.so",
            "torch/lib/libc10_cuda.so",
            "torch/lib/libshm.so.2.6",
        ]
        assert (
            "Tag: cp313-cp313-linux_x86_64"
            in zf.read("torch-2.6.0+partial.dist-info/WHEEL").decode()
        )
    spec = RepairSpec(
        origin="test: [repair]",
        rpath_folders=("nvidia/cu13/lib",),
        rpath_base="torch/lib",
        library_folder="torch/lib",
        requirements=('nvidia-cuda-runtime==13.0.*; platform_system == "Linux"',),
    )
    report = repair_wheel(wheel, tmp_path / "out", spec)
    repaired = {Path(i.path).name: i for i in read_wheel_dynamic(report.wheel)}
    assert repaired["libc10_cuda.so"].rpath == ("$ORIGIN/../../nvidia/cu13/lib", "$ORIGIN")
    variant = load_official().variant("2.6.0", "12.4")
    assert variant is not None
    rows = {r.library: r for r in compare_libraries(repaired.values(), variant, "torch/lib")}
    # libc10_cuda.so needs libc10.so, in the wheel as in the official one; nothing from outside
    # but the C library, where the official one also needs libcudart.so.12 and libstdc++
    cuda = rows["libc10_cuda.so"]
    assert cuda.official and cuda.soname == cuda.official_soname == "libc10_cuda.so"
    assert cuda.more == () and "libcudart.so.12" in cuda.less and "libc10.so" not in cuda.less
    assert "libcudart.so.12" in cuda.line() and cuda.line().startswith("libc10_cuda.so: same")
    shm = rows["libshm.so.2.6"]
    assert not shm.official and shm.line() == "libshm.so.2.6: not in the official wheel"
    preview = read_preview(report.wheel, {"platform": "linux_x86_64"}, variant, "torch/lib")
    lines = preview.lines()
    assert lines[0].startswith("tag: linux_x86_64")
    assert lines[1] == "against the official wheel 2.6.0/cu124 (CUDA 12.4):"
    assert preview.to_json_dict()["against"] == "2.6.0/cu124 (CUDA 12.4)"
    alone = read_preview(report.wheel, {}, None, "torch/lib")
    assert alone.rows == () and alone.lines()[-1].startswith("no official wheel")


def test_a_library_needing_more_than_the_official_one_says_what() -> None:
    row = LibraryRow(
        "libc10.so", "libc10.so.2.6", "$ORIGIN", True, "libc10.so",
        more=("libcpuinfo.so.0", "libnuma.so.1"), less=("libdl.so.2",),
    )  # fmt: skip
    assert row.line() == (
        "libc10.so: SONAME libc10.so.2.6 (official: libc10.so); needs libcpuinfo.so.0, "
        "libnuma.so.1, which the official one does not; does not need the official one's "
        "libdl.so.2"
    )
    assert dataclasses.replace(row, more=(), less=(), soname="libc10.so").line() == (
        "libc10.so: same SONAME; needs what the official one needs"
    )


def test_the_official_wheel_compared_is_the_release_and_cuda_or_the_releases_newest() -> None:
    facts = load_official()
    exact = facts.closest("2.14.1", "13.0")
    assert exact is not None and exact.key == "2.14.1/cu130"
    other_cuda = facts.closest("2.6.0", "13.0")
    assert other_cuda is not None and other_cuda.key == "2.6.0/cu124"
    assert facts.closest("1.0.0", "13.0") is None
