"""PyTorch-style sources from an internal git mirror, with real git.

A superproject whose ``.gitmodules`` names its submodule by a public URL
(``https://git.example/...``, unreachable here) is served, with the submodule, from bare
repositories under a local folder over ``file://``. The recipe's ``[source] mirror`` maps the
public prefix to the mirror; archwheel resolves the tag to a commit through the mirror, fetches
the superproject and the submodule at the pinned commits, and records the commit, the mirrors
and the submodule commit for provenance. A mirror whose submodule lacks the pinned commit is
one clear error, and no checkout is left in the cache.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from archwheel.errors import RecipeError, ToolError
from archwheel.facts.catalog import load_facts
from archwheel.wheelbuild.recipes.recipe import parse_recipe
from archwheel.wheelbuild.sources.source import resolve_source
from tests.support.cli import CliRun
from tests.support.components import require

FACTS = load_facts()

PUBLIC = "https://git.example/"
ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
       "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"}  # fmt: skip


def git(*args: str, cwd: Path | None = None) -> str:
    proc = subprocess.run(
        ["git", "-c", "protocol.file.allow=always", "-c", "init.defaultBranch=main", *args],
        cwd=cwd, capture_output=True, text=True, env={**ENV, "PATH": "/usr/bin:/bin"},
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def make_mirror(root: Path) -> tuple[Path, str, str]:
    """mirror/org/{super,sub}.git; returns (mirror folder, tag commit, submodule commit)."""
    require(shutil.which("git") is not None, "git is not installed")
    mirror = root / "mirror" / "org"
    mirror.mkdir(parents=True)
    work = root / "work"
    git("init", "-q", str(work / "sub"))
    (work / "sub" / "kernel.cu").write_text("// v1\n")
    git("add", ".", cwd=work / "sub")
    git("commit", "-qm", "sub v1", cwd=work / "sub")
    sub_commit = git("rev-parse", "HEAD", cwd=work / "sub")
    (work / "sub" / "kernel.cu").write_text("// v2 (later, not pinned)\n")
    git("commit", "-qam", "sub v2", cwd=work / "sub")
    git("clone", "-q", "--bare", str(work / "sub"), str(mirror / "sub.git"))

    git("init", "-q", str(work / "super"))
    (work / "super" / "setup.py").write_text("print('build')\n")
    git("add", ".", cwd=work / "super")
    git("submodule", "add", "-q", f"file://{mirror}/sub.git", "third_party/sub", cwd=work / "super")
    git("-C", "third_party/sub", "checkout", "-q", sub_commit, cwd=work / "super")
    git("config", "-f", ".gitmodules", "submodule.third_party/sub.url", f"{PUBLIC}org/sub.git",
        cwd=work / "super")  # fmt: skip
    git("add", ".", cwd=work / "super")
    git("commit", "-qm", "super v1", cwd=work / "super")
    git("tag", "-a", "v1.0", "-m", "release", cwd=work / "super")
    commit = git("rev-parse", "HEAD", cwd=work / "super")
    git("clone", "-q", "--bare", str(work / "super"), str(mirror / "super.git"))
    return mirror.parent, commit, sub_commit


def recipe(tmp_path: Path, mirror: str | None) -> dict[str, object]:
    source: dict[str, object] = {
        "git": f"{PUBLIC}org/super.git", "ref": "v1.0", "submodules": True,
    }  # fmt: skip
    if mirror is not None:
        source["mirror"] = {PUBLIC: mirror}
    return {
        "schema_version": 1,
        "source": source,
        "toolchain": {"cuda": "13.0", "base_image": "archwheel/debian:bookworm", "source": "pypi"},
        "arch": {"default": "9.0"},
        "build": {"command": "true"},
    }


def test_mirror_with_submodules(tmp_path: Path) -> None:
    mirror, commit, sub_commit = make_mirror(tmp_path)
    spec = parse_recipe(
        recipe(tmp_path, f"file://{mirror}/"), origin=tmp_path / "r.toml", facts=FACTS
    ).source
    resolved = resolve_source(spec, tmp_path / "cache", echo=None)
    assert resolved.commit == commit
    assert (resolved.root / "third_party" / "sub" / "kernel.cu").read_text() == "// v1\n"
    assert resolved.submodule_commits == (f"{sub_commit} third_party/sub",)
    record = resolved.to_json_dict()
    assert record["commit"] == commit
    assert record["location"] == f"{PUBLIC}org/super.git"
    assert record["mirrors"] == {PUBLIC: f"file://{mirror}/"}
    assert record["submodule_commits"] == [f"{sub_commit} third_party/sub"]
    assert "third_party/sub/kernel.cu" in resolved.files


def test_without_the_mirror_the_public_url_is_tried(tmp_path: Path) -> None:
    make_mirror(tmp_path)
    spec = parse_recipe(recipe(tmp_path, None), origin=tmp_path / "r.toml", facts=FACTS).source
    with pytest.raises(ToolError, match="git ls-remote failed"):
        resolve_source(spec, tmp_path / "cache", echo=None)


def test_a_mirror_that_lacks_the_submodule_commit(tmp_path: Path) -> None:
    mirror, _commit, sub_commit = make_mirror(tmp_path)
    # The mirror's sub.git is replaced by an unrelated history without the pinned commit.
    shutil.rmtree(mirror / "org" / "sub.git")
    other = tmp_path / "other"
    git("init", "-q", str(other))
    (other / "x").write_text("unrelated\n")
    git("add", ".", cwd=other)
    git("commit", "-qm", "other", cwd=other)
    git("clone", "-q", "--bare", str(other), str(mirror / "org" / "sub.git"))
    spec = parse_recipe(
        recipe(tmp_path, f"file://{mirror}/"), origin=tmp_path / "r.toml", facts=FACTS
    ).source
    cache = tmp_path / "cache"
    with pytest.raises(ToolError) as caught:
        resolve_source(spec, cache, echo=None)
    message = caught.value.one_line()
    assert f"could not fetch third_party/sub @ {sub_commit}" in message
    assert f"{PUBLIC} -> file://{mirror}/" in message
    assert "\n" not in message
    assert not any((cache / "sources" / "git").iterdir())  # no half checkout left


def test_mirror_key_checks(tmp_path: Path) -> None:
    data = recipe(tmp_path, "-x")
    with pytest.raises(RecipeError, match="mirror"):
        parse_recipe(data, origin=tmp_path / "r.toml", facts=FACTS)
    data = recipe(tmp_path, None)
    data["source"] = {"sdist": "https://index.example/x.tar.gz", "sha256": "0" * 64,
                      "mirror": {PUBLIC: "file:///m/"}}  # fmt: skip
    with pytest.raises(RecipeError, match="only valid with git"):
        parse_recipe(data, origin=tmp_path / "r.toml", facts=FACTS)


def test_git_mirror_flag() -> None:
    from archwheel.errors import UsageError
    from archwheel.wheelbuild import with_git_mirrors
    from archwheel.wheelbuild.recipes.recipe import load_recipe
    from tests.support.paths import ROOT

    pytorch = load_recipe(ROOT / "recipes" / "pytorch-2.14.1-cu130.toml", facts=FACTS)
    changed = with_git_mirrors(pytorch, ("https://github.com/=https://git.corp.example/gh/",))
    assert changed.source.mirrors == (("https://github.com/", "https://git.corp.example/gh/"),)
    with pytest.raises(UsageError, match="expected PUBLIC=MIRROR"):
        with_git_mirrors(pytorch, ("https://github.com/",))
    with pytest.raises(UsageError, match="has no git source"):
        with_git_mirrors(load_recipe(ROOT / "recipes" / "example.toml", facts=FACTS), ("a=b",))


def test_the_build_command_stops_on_a_mirror_that_lacks_the_submodule_commit(
    tmp_path: Path, cli_run: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same defect through `archwheel build`: one error line, nothing in the output folder.
    mirror, _commit, sub_commit = make_mirror(tmp_path)
    shutil.rmtree(mirror / "org" / "sub.git")
    other = tmp_path / "other"
    git("init", "-q", str(other))
    (other / "x").write_text("unrelated\n")
    git("add", ".", cwd=other)
    git("commit", "-qm", "other", cwd=other)
    git("clone", "-q", "--bare", str(other), str(mirror / "org" / "sub.git"))
    path = tmp_path / "r.toml"
    path.write_text(
        "schema_version = 1\n"
        f'[source]\ngit = "{PUBLIC}org/super.git"\nref = "v1.0"\nsubmodules = true\n'
        f'mirror = {{ "{PUBLIC}" = "file://{mirror}/" }}\n'
        '[toolchain]\ncuda = "13.0"\nbase_image = "archwheel/debian:bookworm"\nsource = "pypi"\n'
        '[arch]\ndefault = "9.0"\n[build]\ncommand = "true"\n'
    )
    monkeypatch.setenv("ARCHWHEEL_CACHE", str(tmp_path / "cache"))
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    out = tmp_path / "dist"
    code, _out, err = cli_run("build", "--recipe", str(path), "--out", str(out),
                              "--no-host-pip-config")  # fmt: skip
    errors = [ln for ln in err.splitlines() if ln.startswith("archwheel: error")]
    assert code != 0 and len(errors) == 1, err
    assert f"could not fetch third_party/sub @ {sub_commit}" in errors[0]
    assert "Traceback" not in err
    assert not out.exists()
