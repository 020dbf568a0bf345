"""``[[source.patches]]`` (wheelbuild/sources/source_patches.py) with the real ``git apply``: a patched
copy is what the build mounts, the source itself is untouched, the copy is made once, a patch
that is not the recipe's or does not apply is refused with one line, and git never patches a
repository above the copy."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from archwheel.errors import RecipeError
from archwheel.exit_codes import exit_code_for
from archwheel.facts.catalog import load_facts
from archwheel.wheelbuild.recipes.recipe import load_recipe
from archwheel.wheelbuild.sources.source import resolve_source

SETUP = 'ARCHS = ["-gencode", "arch=compute_75,code=sm_75"]\nprint("built")\n'
PATCH = """\
--- a/setup.py
+++ b/setup.py
@@ -1,2 +1,2 @@
-ARCHS = ["-gencode", "arch=compute_75,code=sm_75"]
+ARCHS = []  # from TORCH_CUDA_ARCH_LIST
 print("built")
--- /dev/null
+++ b/NEW.txt
@@ -0,0 +1 @@
+added by the patch
"""


def _recipe(tmp_path: Path, patch_text: str, digest: str | None = None) -> Path:
    source = tmp_path / "project"
    source.mkdir(exist_ok=True)
    (source / "setup.py").write_text(SETUP)
    patch = tmp_path / "fix.diff"
    patch.write_text(patch_text)
    digest = digest or hashlib.sha256(patch.read_bytes()).hexdigest()
    recipe = tmp_path / "r.toml"
    recipe.write_text(
        "schema_version = 1\n"
        '[source]\npath = "project"\n'
        f'[[source.patches]]\npath = "fix.diff"\nsha256 = "{digest}"\n'
        '[toolchain]\ncuda = "13.0"\nbase_image = "archwheel/debian:bookworm"\nsource = "pypi"\n'
        '[arch]\ndefault = "9.0"\n[build]\ncommand = "true"\n'
    )
    return recipe


def test_the_build_sees_a_patched_copy_made_once(tmp_path: Path) -> None:
    recipe = load_recipe(_recipe(tmp_path, PATCH), load_facts())
    assert [p.path.name for p in recipe.source.patches] == ["fix.diff"]
    assert "patched with fix.diff (sha256 " in recipe.source.describe()
    cache = tmp_path / "cache"
    resolved = resolve_source(recipe.source, cache, echo=None)
    assert resolved.root != tmp_path / "project"
    assert (resolved.root / "setup.py").read_text().startswith("ARCHS = []")
    assert (resolved.root / "NEW.txt").read_text() == "added by the patch\n"
    assert resolved.files == ("NEW.txt", "setup.py")
    assert (tmp_path / "project" / "setup.py").read_text() == SETUP  # the source is untouched
    assert resolved.unpatched_sha256 not in (None, resolved.content_sha256)
    document = resolved.to_json_dict()
    assert document["patches"] == [
        {"file": "fix.diff", "sha256": recipe.source.patches[0].sha256, "reason": ""}
    ]
    again = resolve_source(recipe.source, cache, echo=None)
    assert again.root == resolved.root and again.content_sha256 == resolved.content_sha256
    assert len(list((cache / "sources" / "patched").iterdir())) == 1  # no staging left


def test_a_patch_that_is_not_the_recipes_is_refused_when_the_recipe_loads(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match=r"fix.diff has sha256 [0-9a-f]{64}, not the 0{64}"):
        load_recipe(_recipe(tmp_path, PATCH, digest="0" * 64), load_facts())


def test_a_hunk_that_does_not_apply_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    stale = PATCH.replace("compute_75,code=sm_75", "compute_70,code=sm_70")
    recipe = load_recipe(_recipe(tmp_path, stale), load_facts())
    cache = tmp_path / "cache"
    with pytest.raises(RecipeError, match=r"patch fix.diff does not apply to the source: ") as info:
        resolve_source(recipe.source, cache, echo=None)
    assert exit_code_for(info.value) == 2
    assert "\n" not in info.value.one_line()
    assert list((cache / "sources" / "patched").iterdir()) == []


def test_git_never_patches_a_repository_above_the_copy(tmp_path: Path) -> None:
    # The cache inside a checkout (as .cache in the archwheel checkout): the patch must still
    # land in the copy, and the repository's own setup.py stay as it was.
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "setup.py").write_text(SETUP)
    recipe = load_recipe(_recipe(tmp_path, PATCH), load_facts())
    resolved = resolve_source(recipe.source, tmp_path / "cache", echo=None)
    assert (resolved.root / "setup.py").read_text().startswith("ARCHS = []")
    assert (tmp_path / "setup.py").read_text() == SETUP


def test_a_patch_that_escapes_the_tree_is_refused(tmp_path: Path) -> None:
    escape = "--- a/../outside.txt\n+++ b/../outside.txt\n@@ -0,0 +1 @@\n+escaped\n"
    recipe = load_recipe(_recipe(tmp_path, escape), load_facts())
    with pytest.raises(RecipeError, match="does not apply"):
        resolve_source(recipe.source, tmp_path / "cache", echo=None)
    assert not (tmp_path / "cache" / "sources" / "patched" / "outside.txt").exists()
    assert not list(tmp_path.rglob("outside.txt"))
