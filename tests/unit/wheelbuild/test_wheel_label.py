"""The built wheel says what it was built against: local version label and the torch pin."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from archwheel.errors import BuildError
from archwheel.wheelbuild.wheel.reproducible import repack_wheel
from archwheel.wheelbuild.wheel.wheel_label import new_version, relabel_wheel, rewrite_metadata

META = """\
Metadata-Version: 2.1
Name: torch_scatter
Version: 2.1.2
Requires-Dist: torch>=1.8
Requires-Dist: pytest; extra == "test"

Long description, with a line
Version: not a header
"""


def make_wheel(folder: Path, version: str = "2.1.2", meta: str = META) -> Path:
    path = folder / f"torch_scatter-{version}-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("torch_scatter/__init__.py", "__version__ = '2.1.2'\n")
        z.writestr("torch_scatter/_scatter_cuda.so", b"\x7fELF...")
        z.writestr(f"torch_scatter-{version}.data/data/share/x.txt", "x")
        z.writestr(f"torch_scatter-{version}.dist-info/METADATA", meta)
        z.writestr(f"torch_scatter-{version}.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        z.writestr(f"torch_scatter-{version}.dist-info/RECORD", "stale\n")
    return path


def test_new_version_appends_or_extends_the_local_label() -> None:
    assert new_version("2.1.2", "pt2.14.1cu130") == "2.1.2+pt2.14.1cu130"
    assert new_version("2.1.2+abc", "pt2.14.1cu130") == "2.1.2+abc.pt2.14.1cu130"
    assert new_version("2.1.2", None) == "2.1.2"
    assert Version(new_version("2.1.2", "pt2.14.1cu130")).local == "pt2.14.1cu130"


def test_rewrite_metadata_replaces_version_and_the_torch_requirement_only_in_headers() -> None:
    text = rewrite_metadata(META, "2.1.2+pt2.14.1cu130", "torch==2.14.1")
    head, _, body = text.partition("\n\n")
    assert "Version: 2.1.2+pt2.14.1cu130" in head.splitlines()
    assert "Requires-Dist: torch>=1.8" not in head
    assert "Requires-Dist: torch==2.14.1" in head.splitlines()
    assert 'Requires-Dist: pytest; extra == "test"' in head
    assert "Version: not a header" in body


def test_relabel_renames_file_dist_info_and_data_and_repack_rewrites_record(
    tmp_path: Path,
) -> None:
    source = make_wheel(tmp_path)
    labelled = relabel_wheel(source, tmp_path / "out", "pt2.14.1cu130", "torch==2.14.1")
    assert labelled.name == "torch_scatter-2.1.2+pt2.14.1cu130-cp311-cp311-linux_x86_64.whl"
    final = tmp_path / "final" / labelled.name
    final.parent.mkdir()
    repack_wheel(labelled, final, 1_700_000_000)
    with zipfile.ZipFile(final) as z:
        names = z.namelist()
        dist = "torch_scatter-2.1.2+pt2.14.1cu130.dist-info"
        assert f"{dist}/METADATA" in names and f"{dist}/RECORD" in names
        assert "torch_scatter-2.1.2+pt2.14.1cu130.data/data/share/x.txt" in names
        assert not any(n.startswith("torch_scatter-2.1.2.") for n in names)
        record = z.read(f"{dist}/RECORD").decode()
        assert "torch_scatter/_scatter_cuda.so,sha256=" in record
        assert z.read("torch_scatter/_scatter_cuda.so") == b"\x7fELF..."
        meta = z.read(f"{dist}/METADATA").decode()
        assert "Requires-Dist: torch==2.14.1" in meta


def test_relabel_with_nothing_to_do_returns_the_wheel(tmp_path: Path) -> None:
    source = make_wheel(tmp_path)
    assert relabel_wheel(source, tmp_path / "out", None, None) == source


def test_relabel_only_the_pin_keeps_the_version(tmp_path: Path) -> None:
    source = make_wheel(tmp_path)
    out = relabel_wheel(source, tmp_path / "out", None, "torch==2.14.1")
    assert out.name == source.name
    with zipfile.ZipFile(out) as z:
        assert "torch==2.14.1" in z.read("torch_scatter-2.1.2.dist-info/METADATA").decode()


def test_a_wheel_without_metadata_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("x/__init__.py", "")
    with pytest.raises(BuildError, match=r"no x-1\.0\.dist-info/METADATA"):
        relabel_wheel(path, tmp_path / "out", "pt1", None)


def test_a_metadata_without_a_body_keeps_the_pin_among_its_headers() -> None:
    """setuptools writes no body when a project has no readme: the file ends after the headers.
    The pin must not follow an empty line (pip reads no header after it), and a second claim
    (the range a build's checks backed) replaces the first."""
    text = "Metadata-Version: 2.4\nName: x\nVersion: 0.1.0\nRequires-Dist: torch>=2.12\n"
    pinned = rewrite_metadata(text, "0.1.0", "torch==2.14.1")
    assert (
        pinned == "Metadata-Version: 2.4\nName: x\nVersion: 0.1.0\nRequires-Dist: torch==2.14.1\n"
    )
    ranged = rewrite_metadata(pinned, "0.1.0", "torch>=2.12.1,<2.15")
    assert "\n\n" not in ranged
    assert [ln for ln in ranged.splitlines() if ln.startswith("Requires-Dist")] == [
        "Requires-Dist: torch>=2.12.1,<2.15"
    ]
