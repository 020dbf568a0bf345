"""A Debian source package fetched for real: PyTorch 2.6.0+dfsg-7 from trixie's archive (27 MB),
verified against its .dsc, unpacked by dpkg-source -x with Debian's patches; a version the
archive does not serve and a tampered file refused. About a minute on 2 cores (apt-get update,
dpkg-dev, the download); the trixie base is made once by debootstrap when missing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from archwheel.effects.engine import ContainerEngine, EngineSettings
from archwheel.effects.settings import Settings
from archwheel.errors import InputError, RecipeError
from archwheel.wheelbuild.images.baseimage import ensure_base_image
from archwheel.wheelbuild.planning.plan import build_user
from archwheel.wheelbuild.recipes.recipe_model import SourceSpec
from archwheel.wheelbuild.sources.debian_source import (
    DebianTree,
    cached_tree,
    fetch_debian_source,
    parse_dsc,
    verify_files,
)

PACKAGE, VERSION = "pytorch", "2.6.0+dfsg-7"
DSC_SHA256 = "24783f3515b228ee476e788608ea0beea80409dbc8e861b6b8035c592d79646e"
ORIG_SHA256 = "099a9601bc40d67656e75735c44abedb0fbe92d08817852ab7472eebb7e6ddff"


def _spec(version: str = VERSION) -> SourceSpec:
    return SourceSpec("debian", debian=PACKAGE, project_version=version, suite="trixie")


@pytest.fixture(scope="module")
def engine(docker_engine: str) -> ContainerEngine:
    return ContainerEngine(EngineSettings.create("docker", Settings.from_environ({})), echo=None)


@pytest.fixture(scope="module")
def trixie(engine: ContainerEngine) -> str:
    return ensure_base_image(engine, suite="trixie").tag


@pytest.fixture(scope="module")
def fetched(
    engine: ContainerEngine, trixie: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[DebianTree, Path]:
    cache = tmp_path_factory.mktemp("cache")
    tree = fetch_debian_source(_spec(), cache, engine, trixie, user=build_user())
    return tree, cache


@pytest.mark.docker
def test_the_source_package_is_verified_and_unpacked_with_debians_patches(
    fetched: tuple[DebianTree, Path],
) -> None:
    tree, _cache = fetched
    assert (tree.root / "setup.py").is_file()
    assert (tree.root / "CMakeLists.txt").is_file()
    record = tree.record
    assert record["dsc_sha256"] == DSC_SHA256
    files = {f["file"]: f for f in record["files"]}  # type: ignore[attr-defined]
    assert files["pytorch_2.6.0+dfsg.orig.tar.xz"] == {
        "file": "pytorch_2.6.0+dfsg.orig.tar.xz",
        "sha256": ORIG_SHA256,
        "size": 27212640,
    }
    # the base image's own archive (whatever mirror debootstrap used), its pool folder of pytorch
    archives = record["archive"]
    assert isinstance(archives, list) and len(archives) == 1
    assert str(archives[0]).startswith("http")
    assert str(archives[0]).endswith("/pool/main/p/pytorch/")
    assert "2300-torch-cuda-no-use-nvtx3.patch" in record["patches_applied"]  # type: ignore[operator]
    # Patch 2300 is applied: torch_cuda links the legacy nvToolsExt without the NVTX3 branch.
    cuda_cmake = (tree.root / "cmake" / "public" / "cuda.cmake").read_text()
    assert "if(nvtx3_FOUND)" not in cuda_cmake
    assert "PROPERTY INTERFACE_LINK_LIBRARIES CUDA::nvToolsExt" in cuda_cmake
    # SOURCE_DATE_EPOCH: the changelog's top entry, Fri, 11 Apr 2025 06:45:18 -0400.
    assert tree.epoch == 1744368318


@pytest.mark.docker
def test_a_second_fetch_reads_the_cache(fetched: tuple[DebianTree, Path]) -> None:
    tree, cache = fetched
    again = cached_tree(_spec(), cache)
    assert again is not None and again.root == tree.root and again.record == tree.record


@pytest.mark.docker
def test_a_tampered_download_is_refused(fetched: tuple[DebianTree, Path], tmp_path: Path) -> None:
    tree, _cache = fetched
    download = tree.root.parent / "download"
    copy = tmp_path / "download"
    shutil.copytree(download, copy)
    dsc = parse_dsc((copy / "pytorch_2.6.0+dfsg-7.dsc").read_text(), "the .dsc")
    verify_files(copy, dsc, "the .dsc")  # as downloaded: passes
    target = copy / "pytorch_2.6.0+dfsg-7.debian.tar.xz"
    data = bytearray(target.read_bytes())
    data[100] ^= 1
    target.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"pytorch_2\.6\.0\+dfsg-7\.debian\.tar\.xz has sha256"):
        verify_files(copy, dsc, "the .dsc")


@pytest.mark.docker
def test_a_version_the_archive_does_not_serve_is_one_line(
    engine: ContainerEngine, trixie: str, tmp_path: Path
) -> None:
    with pytest.raises(RecipeError) as caught:
        fetch_debian_source(_spec("2.14.1+dfsg-1"), tmp_path, engine, trixie, user=build_user())
    line = caught.value.one_line()
    assert "\n" not in line
    assert "no source package pytorch=2.14.1+dfsg-1" in line
    assert not list((tmp_path / "sources" / "debian").glob("pytorch_*"))
