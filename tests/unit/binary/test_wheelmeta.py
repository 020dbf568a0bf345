"""Reading a wheel's metadata from the zip: versions, tags, pins, CUDA evidence, bad input."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from archwheel.binary.wheelmeta import (
    MAX_METADATA_BYTES,
    MAX_REQUIREMENTS,
    MAX_WARNINGS_SHOWN,
    read_wheel_metadata,
    sha256_file,
)
from archwheel.errors import InputError
from archwheel.facts.versions import CudaVersion
from tests.support.builders import write_zip
from tests.support.inventory_builders import build_wheel, record_hash


def test_local_version_pins_and_hashes(tmp_path: Path) -> None:
    lib = b"\x7fELF not really"
    wheel = build_wheel(
        tmp_path,
        "myext",
        "1.2.0+cu128",
        {"myext/__init__.py": b"", "myext/libk.so": lib, "myext/libk.so.1.2": lib},
        requires=[
            "nvidia-cuda-runtime-cu12==12.8.90",
            'nvidia-cudnn-cu12==9.8.0.87; platform_system == "Linux"',
            "nvidia-nccl-cu12 (==2.26.2)",
            "numpy>=1.26",
            "nvidia-ml-py; extra == 'gpu'",
        ],
        tag="cp311-cp311-manylinux_2_28_x86_64",
    )
    meta = read_wheel_metadata(wheel)
    assert meta.name == "myext"
    assert meta.version == "1.2.0+cu128"
    assert meta.local_version == "cu128"
    assert meta.tags == ("cp311-cp311-manylinux_2_28_x86_64",)
    assert [str(p) for p in meta.cuda_pins] == [
        "nvidia-cuda-runtime-cu12==12.8.90",
        "nvidia-cudnn-cu12==9.8.0.87",
        "nvidia-nccl-cu12==2.26.2",
    ]
    assert meta.cudnn_version == "9.8.0.87"
    assert meta.nccl_version == "2.26.2"
    assert meta.cuda_runtime == CudaVersion(12, 8)
    assert [e.source for e in meta.cuda_evidence] == [
        "local version",
        "Requires-Dist",
        "pin suffix",
    ]
    assert meta.native_library_hashes == {
        "myext/libk.so": record_hash(lib),
        "myext/libk.so.1.2": record_hash(lib),
    }
    assert meta.warnings == ()


def test_cuda_from_version_py_when_metadata_has_no_local_version(tmp_path: Path) -> None:
    # PyPI's torch: Version 2.14.1 (no +cu130); torch/version.py has cuda = '13.0'.
    wheel = build_wheel(
        tmp_path,
        "torch",
        "2.14.1",
        {"torch/version.py": b"__version__ = '2.14.1+cu130'\ncuda: Optional[str] = '13.0'\n"},
    )
    meta = read_wheel_metadata(wheel)
    assert meta.cuda_runtime == CudaVersion(13, 0)
    assert meta.cuda_source == "CUDA 13.0 from version.py (torch/version.py: cuda = '13.0')"


def test_cuda_major_only_from_a_bundled_cudart(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path, "vision", "0.1.0", {"vision.libs/libcudart.faf08d9a.so.13": b"x"})
    meta = read_wheel_metadata(wheel)
    assert meta.cuda_runtime is None
    assert meta.cuda_major == 13
    assert meta.cuda_source == (
        "CUDA 13.x from bundled libcudart (vision.libs/libcudart.faf08d9a.so.13)"
    )


def test_bundled_cudart_with_minor(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path, "ext", "0.1.0", {"ext/lib/libcudart.so.12.8.90": b"x"})
    assert read_wheel_metadata(wheel).cuda_runtime == CudaVersion(12, 8)


def test_conflicting_evidence_is_a_warning(tmp_path: Path) -> None:
    wheel = build_wheel(
        tmp_path, "ext", "1.0+cu126", {}, requires=["nvidia-cuda-runtime-cu12==12.8.90"]
    )
    meta = read_wheel_metadata(wheel)
    assert meta.cuda_runtime == CudaVersion(12, 6)  # the local version wins
    assert meta.warnings[0].startswith("conflicting CUDA versions: CUDA 12.6 from local version")


def test_cpu_wheel_has_no_cuda(tmp_path: Path) -> None:
    meta = read_wheel_metadata(build_wheel(tmp_path, "pure", "1.0", {"pure/__init__.py": b""}))
    assert meta.cuda_evidence == ()
    assert meta.cuda_runtime is None
    assert meta.cuda_source is None


def test_real_torch_wheel_metadata(torch_wheel: Path) -> None:
    meta = read_wheel_metadata(torch_wheel)
    assert (meta.name, meta.version) == ("torch", "2.14.1")
    assert meta.cuda_runtime == CudaVersion(13, 0)
    assert meta.cudnn_version == "9.24.0.43"
    assert meta.nccl_version == "2.30.7"
    assert "torch/lib/libtorch_cuda.so" in meta.native_library_hashes


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([("a.txt", b"x")], "no *.dist-info/METADATA inside"),
        ([("x-1.dist-info/METADATA", b"Summary: nothing\n")], "METADATA has no Name or Version"),
    ],
)
def test_bad_wheels_get_one_line(
    tmp_path: Path, members: list[tuple[str, bytes]], message: str
) -> None:
    wheel = write_zip(tmp_path / "x-1-py3-none-any.whl", members)
    with pytest.raises(InputError) as info:
        read_wheel_metadata(wheel)
    assert message in info.value.one_line()
    assert "\n" not in info.value.one_line()


def test_not_a_zip(tmp_path: Path) -> None:
    path = tmp_path / "fake-1-py3-none-any.whl"
    path.write_bytes(b"not a zip at all")
    with pytest.raises(InputError, match="not a readable wheel"):
        read_wheel_metadata(path)


def test_missing_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_wheel_metadata(tmp_path / "nope.whl")
    with pytest.raises(InputError, match="is a directory"):
        read_wheel_metadata(tmp_path)


def test_metadata_larger_than_allowed_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big-1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(
            "big-1.dist-info/METADATA", b"Name: big\n" + b"a" * (MAX_METADATA_BYTES + 1)
        )
    with pytest.raises(InputError, match="more than the"):
        read_wheel_metadata(path)


def test_requirements_and_their_warnings_are_bounded(tmp_path: Path) -> None:
    # 30000 unparseable Requires-Dist (540 KB of METADATA) were 30000 warning lines.
    requires = "".join(f"Requires-Dist: bad name {i} !!\n" for i in range(MAX_REQUIREMENTS * 3))
    requires += "Requires-Dist: nvidia-cublas==13.0.0\n"  # past the limit: not read
    path = write_zip(
        tmp_path / "many-1-py3-none-any.whl",
        [("many-1.dist-info/METADATA", f"Name: many\nVersion: 1\n{requires}".encode())],
    )
    meta = read_wheel_metadata(path)
    assert len(meta.warnings) <= MAX_WARNINGS_SHOWN + 3
    assert f"lists {MAX_REQUIREMENTS * 3 + 1} Requires-Dist, above the limit" in meta.warnings[0]
    assert (
        f"... and {MAX_REQUIREMENTS - MAX_WARNINGS_SHOWN} more unparseable Requires-Dist"
        in meta.warnings
    )
    assert all("\n" not in w for w in meta.warnings)
    assert meta.requires == ()


def test_lying_declared_size_is_caught(tmp_path: Path) -> None:
    # A zip whose central directory understates METADATA's size (a zip bomb's trick): the read
    # stops at the limit or fails the CRC; either way one clear error, no unbounded read.
    path = tmp_path / "liar-1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("liar-1.dist-info/METADATA", b"Name: liar\nVersion: 1\n" + b"a" * 5000)
    data = bytearray(path.read_bytes())
    central = data.rfind(b"PK\x01\x02")
    data[central + 24 : central + 28] = (10).to_bytes(4, "little")  # uncompressed size: 10
    path.write_bytes(bytes(data))
    with pytest.raises(InputError):
        read_wheel_metadata(path)


def test_sha256_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    assert sha256_file(path) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    with pytest.raises(InputError):
        sha256_file(tmp_path / "missing")
