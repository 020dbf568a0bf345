"""An sdist named by project and version, found through the simple API of pip's indexes.

The indexes here are real PEP 503 folders (file://, as pip reads them) written by the tests.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from archwheel.effects.pipconfig import PipSettings
from archwheel.effects.simple_index import parse_simple_page
from archwheel.errors import InputError, RecipeError
from archwheel.exit_codes import exit_code_for
from archwheel.wheelbuild.recipes.recipe_model import SourceSpec
from archwheel.wheelbuild.sources.index_sdist import locate_sdist, sdist_names
from archwheel.wheelbuild.sources.source import resolve_source


def make_index(root: Path, project: str, files: dict[str, bytes], *, hashes: bool = True) -> str:
    """A PEP 503 index with ``files`` for ``project``; returns its file:// URL."""
    page = root / "simple" / project
    page.mkdir(parents=True)
    (root / "files").mkdir(exist_ok=True)
    links = []
    for name, data in files.items():
        (root / "files" / name).write_bytes(data)
        frag = f"#sha256={hashlib.sha256(data).hexdigest()}" if hashes else ""
        links.append(f'<a href="../../files/{name}{frag}">{name}</a>')
    (page / "index.html").write_text("<html><body>" + "\n".join(links) + "</body></html>")
    return (root / "simple").as_uri()


def spec(digest: str, version: str = "2.1.2") -> SourceSpec:
    return SourceSpec("sdist", sha256=digest, project="torch-scatter", project_version=version)


def test_sdist_names_cover_normalised_forms() -> None:
    names = sdist_names("torch-scatter", "2.1.2")
    assert "torch_scatter-2.1.2.tar.gz" in names and "torch-scatter-2.1.2.tar.gz" in names


def test_parse_pep_691_json() -> None:
    body = json.dumps(
        {
            "files": [
                {"filename": "a-1.tar.gz", "url": "../../f/a-1.tar.gz", "hashes": {"sha256": "ab"}}
            ]
        }
    ).encode()
    files = parse_simple_page(
        body, "application/vnd.pypi.simple.v1+json", "https://index.example/simple/a/"
    )
    assert files[0].filename == "a-1.tar.gz"
    assert files[0].url == "https://index.example/f/a-1.tar.gz"
    assert files[0].sha256 == "ab"


def test_locate_finds_the_sdist_with_the_recipes_hash_on_an_extra_index(tmp_path: Path) -> None:
    data = b"sdist bytes"
    digest = hashlib.sha256(data).hexdigest()
    empty = tmp_path / "empty" / "simple"
    empty.mkdir(parents=True)
    url = make_index(
        tmp_path / "idx",
        "torch-scatter",
        {"torch_scatter-2.1.2.tar.gz": data, "torch_scatter-2.1.1.tar.gz": b"old"},
    )
    pip = PipSettings(index_url=empty.as_uri(), extra_index_urls=(url,))
    located = locate_sdist(spec(digest), pip, recipe=Path("r.toml"))
    assert located.sdist is not None and located.sdist.endswith("/files/torch_scatter-2.1.2.tar.gz")
    assert located.sdist.startswith("file://")


def test_a_file_with_another_hash_is_refused_naming_both(tmp_path: Path) -> None:
    url = make_index(tmp_path, "torch-scatter", {"torch_scatter-2.1.2.tar.gz": b"tampered"})
    with pytest.raises(InputError) as info:
        locate_sdist(spec("0" * 64), PipSettings(index_url=url), recipe=Path("r.toml"))
    assert exit_code_for(info.value) == 3
    assert "0" * 64 in info.value.message and "torch_scatter-2.1.2.tar.gz" in info.value.message


def test_a_missing_release_is_refused_naming_the_index(tmp_path: Path) -> None:
    url = make_index(tmp_path, "torch-scatter", {"torch_scatter-2.1.1.tar.gz": b"old"})
    with pytest.raises(RecipeError, match=r"no sdist of torch-scatter 2\.1\.2") as info:
        locate_sdist(spec("0" * 64), PipSettings(index_url=url), recipe=Path("r.toml"))
    assert url in info.value.message


def test_located_sdist_resolves_through_the_source_cache(tmp_path: Path) -> None:
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        member = b"from setuptools import setup\nsetup()\n"
        info = tarfile.TarInfo("torch_scatter-2.1.2/setup.py")
        info.size = len(member)
        info.mtime = 1_700_000_000
        tar.addfile(info, io.BytesIO(member))
    data = buffer.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    url = make_index(
        tmp_path / "idx", "torch-scatter", {"torch_scatter-2.1.2.tar.gz": data}, hashes=False
    )
    located = locate_sdist(spec(digest), PipSettings(index_url=url), recipe=Path("r.toml"))
    resolved = resolve_source(located, tmp_path / "cache", echo=None)
    assert resolved.files == ("setup.py",)
    assert resolved.sdist_sha256 == digest
    assert resolved.source_date_epoch == 1_700_000_000


def test_an_unreadable_index_does_not_hide_the_next_one(tmp_path: Path) -> None:
    data = b"sdist bytes"
    url = make_index(tmp_path / "idx", "torch-scatter", {"torch_scatter-2.1.2.tar.gz": data})
    # Port 9 on localhost: nothing listens, the connection is refused.
    pip = PipSettings(index_url="http://127.0.0.1:9/simple", extra_index_urls=(url,))
    located = locate_sdist(spec(hashlib.sha256(data).hexdigest()), pip, recipe=Path("r.toml"))
    assert located.sdist is not None and located.sdist.startswith("file://")


def test_only_unreadable_indexes_is_a_tool_error(tmp_path: Path) -> None:
    from archwheel.errors import ToolError

    pip = PipSettings(index_url="http://127.0.0.1:9/simple")
    with pytest.raises(ToolError, match="cannot read the package index page"):
        locate_sdist(spec("0" * 64), pip, recipe=Path("r.toml"))
