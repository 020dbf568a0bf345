"""Source resolution: local folders (with git), git refs (a real local repository) and sdists."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from archwheel.errors import InputError, UsageError
from archwheel.wheelbuild.recipes.recipe_model import SourceSpec
from archwheel.wheelbuild.sources.source import (
    ZIP_EPOCH_MIN,
    content_hash,
    resolve_source,
    safe_unpack,
)

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}


def git(cwd: Path, *args: str, when: int = 1_700_000_000) -> str:
    env = {
        **os.environ,
        **GIT_ENV,
        "GIT_AUTHOR_DATE": f"{when} +0000",
        "GIT_COMMITTER_DATE": f"{when} +0000",
    }
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "ext").mkdir(parents=True)
    (root / "ext" / "kernel.cu").write_text("__global__ void k() {}\n")
    (root / "ext" / "build.sh").write_text("#!/bin/sh\n")
    (root / "ext" / "build.sh").chmod(0o755)
    (root / "other.txt").write_text("unrelated\n")
    (root / ".gitignore").write_text("build/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "ext", when=1_700_000_000)
    (root / "other.txt").write_text("changed later\n")
    git(root, "commit", "-q", "-am", "unrelated change", when=1_800_000_000)
    return root


def test_path_in_git_uses_the_last_commit_touching_it(repo: Path, tmp_path: Path) -> None:
    (repo / "ext" / "build").mkdir()
    (repo / "ext" / "build" / "leftover.o").write_bytes(b"\0")  # ignored: never copied
    source = resolve_source(SourceSpec("path", path=repo / "ext"), tmp_path / "cache", echo=None)
    assert source.files == ("build.sh", "kernel.cu")
    assert source.commit == git(repo, "rev-parse", "HEAD")
    assert not source.dirty
    assert source.source_date_epoch == 1_700_000_000  # not the later, unrelated commit
    assert source.content_sha256 == content_hash(repo / "ext", ["build.sh", "kernel.cu"])


def test_uncommitted_changes_are_flagged_and_hashed(repo: Path, tmp_path: Path) -> None:
    spec = SourceSpec("path", path=repo / "ext")
    before = resolve_source(spec, tmp_path, echo=None)
    (repo / "ext" / "kernel.cu").write_text("__global__ void k2() {}\n")
    after = resolve_source(spec, tmp_path, echo=None)
    assert after.dirty
    assert "uncommitted" in after.epoch_origin
    assert after.content_sha256 != before.content_sha256


def test_executable_bit_is_part_of_the_content_hash(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x")
    first = content_hash(tmp_path, ["a"])
    (tmp_path / "a").chmod(0o755)
    assert content_hash(tmp_path, ["a"]) != first


def test_symlinks_are_hashed_as_links_not_followed(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("not part of the source")
    (repo / "ext" / "link").symlink_to(outside)
    git(repo, "add", "ext/link")
    git(repo, "commit", "-q", "-m", "link")
    source = resolve_source(SourceSpec("path", path=repo / "ext"), tmp_path / "c", echo=None)
    assert "link" in source.files
    before = source.content_sha256
    outside.write_text("changed outside")
    again = resolve_source(SourceSpec("path", path=repo / "ext"), tmp_path / "c", echo=None)
    assert again.content_sha256 == before


def test_plain_folder_without_git(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    (folder / "__pycache__").mkdir(parents=True)
    (folder / "__pycache__" / "x.pyc").write_bytes(b"")
    (folder / "setup.py").write_text("")
    source = resolve_source(SourceSpec("path", path=folder), tmp_path, echo=None)
    assert source.files == ("setup.py",)
    assert source.commit is None
    assert source.source_date_epoch == ZIP_EPOCH_MIN


def test_recipe_epoch_wins(repo: Path, tmp_path: Path) -> None:
    spec = SourceSpec("path", path=repo / "ext")
    source = resolve_source(spec, tmp_path, recipe_epoch=1_600_000_000, echo=None)
    assert (source.source_date_epoch, source.epoch_origin) == (1_600_000_000, "recipe")


def test_git_tag_is_resolved_to_its_commit_and_cached(repo: Path, tmp_path: Path) -> None:
    git(repo, "tag", "-a", "v1.0", "-m", "release", when=1_800_000_000)
    commit = git(repo, "rev-parse", "HEAD")
    spec = SourceSpec("git", git_url=f"file://{repo}", ref="v1.0")
    source = resolve_source(spec, tmp_path / "cache", echo=None)
    assert source.commit == commit
    assert (source.root / "ext" / "kernel.cu").is_file()
    assert source.source_date_epoch == 1_800_000_000
    git(repo, "commit", "-q", "--allow-empty", "-m", "newer", when=1_900_000_000)
    again = resolve_source(spec, tmp_path / "cache", echo=None)
    assert again.root == source.root
    assert again.commit == commit  # the tag did not move


def test_unknown_git_ref(repo: Path, tmp_path: Path) -> None:
    spec = SourceSpec("git", git_url=f"file://{repo}", ref="v9.9")
    with pytest.raises(UsageError, match=r"git ref .v9.9. not found"):
        resolve_source(spec, tmp_path, echo=None)


def make_sdist(path: Path, members: dict[str, bytes], mtime: int = 1_650_000_000) -> str:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = mtime
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_sdist_is_verified_and_unpacked(tmp_path: Path) -> None:
    archive = tmp_path / "pkg-1.0.tar.gz"
    digest = make_sdist(archive, {"pkg-1.0/setup.py": b"", "pkg-1.0/src/k.cu": b"// k\n"})
    spec = SourceSpec("sdist", path=archive, sdist=str(archive), sha256=digest)
    source = resolve_source(spec, tmp_path / "cache", echo=None)
    assert source.root.name == "pkg-1.0"
    assert source.files == ("setup.py", "src/k.cu")
    assert source.sdist_sha256 == digest
    assert source.source_date_epoch == 1_650_000_000


def test_sdist_with_the_wrong_hash_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "pkg-1.0.tar.gz"
    make_sdist(archive, {"pkg-1.0/setup.py": b""})
    spec = SourceSpec("sdist", path=archive, sdist=str(archive), sha256="0" * 64)
    with pytest.raises(InputError, match=r"the recipe says 0000"):
        resolve_source(spec, tmp_path / "cache", echo=None)


@pytest.mark.parametrize("name", ["../evil.py", "/etc/evil", "pkg/../../evil"])
def test_sdist_members_leaving_the_tree_are_refused(tmp_path: Path, name: str) -> None:
    archive = tmp_path / "bad.tar.gz"
    make_sdist(archive, {name: b"x"})
    with pytest.raises(InputError, match="unsafe member name"):
        safe_unpack(archive, tmp_path / "out")
    assert not (tmp_path / "evil.py").exists()


def test_sdist_links_are_refused(tmp_path: Path) -> None:
    archive = tmp_path / "link.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("pkg/passwd")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        tar.addfile(info)
    with pytest.raises(InputError, match="is a link or device"):
        safe_unpack(archive, tmp_path / "out")


def test_garbage_sdist(tmp_path: Path) -> None:
    archive = tmp_path / "junk.tar.gz"
    archive.write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(InputError, match="not a tar or zip archive"):
        safe_unpack(archive, tmp_path / "out")


def test_a_plain_folders_links_are_listed_as_links(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    (folder / "debian" / "pocketfft-9d3a").mkdir(parents=True)
    (folder / "debian" / "pocketfft-9d3a" / "pocketfft_hdronly.h").write_text("// header\n")
    (folder / "debian" / "pocketfft").symlink_to("pocketfft-9d3a")  # a link to a folder
    (folder / "debian" / "b.pydist").write_text("x\n")
    (folder / "debian" / "a.pydist").symlink_to("b.pydist")  # a link to a file
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("not part of the source")
    (folder / "escape").symlink_to(outside)
    source = resolve_source(SourceSpec("path", path=folder), tmp_path / "c", echo=None)
    assert source.files == (
        "debian/a.pydist",
        "debian/b.pydist",
        "debian/pocketfft",
        "debian/pocketfft-9d3a/pocketfft_hdronly.h",
        "escape",
    )  # the links themselves; nothing behind "escape" is listed or read
    before = source.content_sha256
    (outside / "secret").write_text("changed outside")
    again = resolve_source(SourceSpec("path", path=folder), tmp_path / "c", echo=None)
    assert again.content_sha256 == before
