"""The Debian source form's pure parts: the .dsc reader, the file verifier (a tampered file
refused), the changelog's date, apt's --print-uris lines, and the recipe's [source] debian."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from archwheel.errors import InputError, RecipeError
from archwheel.facts.catalog import load_facts
from archwheel.wheelbuild.recipes.recipe import parse_recipe
from archwheel.wheelbuild.sources.debian_source import (
    changelog_epoch,
    parse_dsc,
    parse_print_uris,
    verify_files,
)


def _dsc(files: dict[str, bytes]) -> str:
    lines = "".join(f" {hashlib.sha256(d).hexdigest()} {len(d)} {n}\n" for n, d in files.items())
    return (
        "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nFormat: 3.0 (quilt)\n"
        "Source: demo\nVersion: 1.0-1\nChecksums-Sha256:\n" + lines + "\n"
        "-----BEGIN PGP SIGNATURE-----\n\nxyz\n-----END PGP SIGNATURE-----\n"
    )


def test_every_file_is_checked_and_a_tampered_one_refused(tmp_path: Path) -> None:
    files = {"demo_1.0.orig.tar.xz": b"orig" * 100, "demo_1.0-1.debian.tar.xz": b"deb" * 50}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    dsc = parse_dsc(_dsc(files), "demo.dsc")
    assert (dsc.source, dsc.version, len(dsc.files)) == ("demo", "1.0-1", 2)
    records = verify_files(tmp_path, dsc, "demo.dsc")
    assert [r["size"] for r in records] == [400, 150]
    (tmp_path / "demo_1.0-1.debian.tar.xz").write_bytes(b"dEb" + b"deb" * 49)  # same size
    with pytest.raises(InputError, match=r"demo_1\.0-1\.debian\.tar\.xz has sha256 .* demo\.dsc"):
        verify_files(tmp_path, dsc, "demo.dsc")
    (tmp_path / "demo_1.0-1.debian.tar.xz").unlink()
    with pytest.raises(InputError, match="was not downloaded"):
        verify_files(tmp_path, dsc, "demo.dsc")


def test_a_dsc_naming_a_path_or_a_bad_line_is_refused() -> None:
    with pytest.raises(InputError, match="not a file beside it"):
        parse_dsc(f"Source: a\nVersion: 1\nChecksums-Sha256:\n {'0' * 64} 1 ../x\n", "a.dsc")
    with pytest.raises(InputError, match="malformed"):
        parse_dsc("Source: a\nVersion: 1\nChecksums-Sha256:\n zz 1 x\n", "a.dsc")
    with pytest.raises(InputError, match="no Source"):
        parse_dsc("Format: 3.0\n", "a.dsc")


def test_the_epoch_is_the_top_changelog_entry(tmp_path: Path) -> None:
    log = tmp_path / "changelog"
    log.write_text(
        "pytorch (2.6.0+dfsg-7) unstable; urgency=medium\n\n  * x\n\n"
        " -- Mo Zhou <lumin@debian.org>  Fri, 11 Apr 2025 06:45:18 -0400\n\n"
        "pytorch (2.6.0+dfsg-6) unstable; urgency=medium\n\n"
        " -- Mo Zhou <lumin@debian.org>  Mon, 01 Jan 2024 00:00:00 +0000\n"
    )
    assert changelog_epoch(log) == 1744368318
    assert changelog_epoch(tmp_path / "missing") is None


def test_print_uris_lines() -> None:
    text = (
        "Need to get 27.4 MB of source archives.\n"
        "'http://mirror.invalid/debian/pool/main/p/pytorch/pytorch_2.6.0%2bdfsg-7.dsc' "
        f"pytorch_2.6.0+dfsg-7.dsc 3614 SHA256:{'a' * 64}\n"
    )
    (entry,) = parse_print_uris(text)
    assert entry.uri.endswith("pytorch_2.6.0+dfsg-7.dsc") and entry.size == 3614


def _recipe(tmp_path: Path, source: str, base: str = "archwheel/debian:trixie") -> object:
    data = {
        "recipe": {"kind": "pytorch", "version": "2.6.0"},
        "source": source,
        "toolchain": {"cuda": "13.0", "base_image": base, "source": "pypi"},
        "python": {"versions": ["3.13"]},
        "arch": {"default": "8.0;9.0"},
        "build": {"command": "true"},
    }
    return parse_recipe(data, origin=tmp_path / "r.toml", facts=load_facts())


def test_the_recipe_form(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path, {"debian": "pytorch", "version": "2.6.0+dfsg-7"})  # type: ignore[arg-type]
    source = recipe.source  # type: ignore[attr-defined]
    assert (source.kind, source.debian, source.project_version, source.suite) == (
        "debian",
        "pytorch",
        "2.6.0+dfsg-7",
        "trixie",
    )
    assert "Debian source package pytorch 2.6.0+dfsg-7" in source.describe()
    with pytest.raises(RecipeError, match="suite: missing"):
        _recipe(tmp_path, {"debian": "pytorch", "version": "1-1"}, base="nvidia/cuda:13")  # type: ignore[arg-type]
    with pytest.raises(RecipeError, match="version: missing"):
        _recipe(tmp_path, {"debian": "pytorch"})  # type: ignore[arg-type]
    with pytest.raises(RecipeError, match="not a Debian version"):
        _recipe(tmp_path, {"debian": "pytorch", "version": "2.6 ;rm"})  # type: ignore[arg-type]
    with pytest.raises(RecipeError, match="only valid with git"):
        _recipe(tmp_path, {"debian": "pytorch", "version": "1-1", "ref": "x"})  # type: ignore[arg-type]


def test_the_shipped_debian_recipe_and_every_pytorch_recipes_memory() -> None:
    from archwheel.wheelbuild.recipes.recipe import load_recipe

    root = Path(__file__).resolve().parents[3] / "recipes"
    recipe = load_recipe(root / "pytorch-2.6.0-debian-cu130.toml", load_facts())
    assert recipe.source.kind == "debian" and recipe.source.suite == "trixie"
    assert [p.path.name for p in recipe.source.patches] == [
        "pytorch-2.6.0-findcub-cccl.diff",
        "pytorch-2.6.0-debian-reverse-2300-nvtx3.diff",
        "pytorch-2.6.0-debian-no-soversion.diff",
        "pytorch-2.6.0-cufft12-removed-errors.diff",
        "pytorch-2.6.0-cub3-removed-names.diff",
        "pytorch-2.6.0-cudnn-frontend-cuda13-graph-api.diff",
    ]
    assert all(p.reason for p in recipe.source.patches)
    for path in sorted(root.glob("pytorch-*.toml")):
        # RowwiseScaledMM.cu peaks at 4.6 GiB with two archs (measured on PyTorch 2.6.0).
        assert load_recipe(path, load_facts()).build.memory_per_job_gib >= 4.6, path.name
