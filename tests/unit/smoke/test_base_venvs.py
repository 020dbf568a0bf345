"""Kept base venvs for smoke's venv backend (``smoke/base_venvs.py``), with real venvs and real
pip installs from a local find-links folder: the wheels' requirements are installed once, each
later run gets a hard-linked copy and installs only the wheels under test, and nothing a run
installs reaches the base."""

from __future__ import annotations

import subprocess
from pathlib import Path

from archwheel.effects.watchdog import Watchdog
from archwheel.smoke.base_venvs import BASES, requirements_of
from archwheel.smoke.environments import IndexOptions, VenvEnvironment
from tests.support.index_wheels import make_dist


def _stages(env: VenvEnvironment) -> list[str]:
    outcome = env.prepare(Watchdog())
    assert outcome.ok, outcome.problem
    return [name for name, _ in outcome.stages]


def test_the_requirements_are_installed_once_and_each_run_gets_a_linked_copy(
    tmp_path: Path,
) -> None:
    links = tmp_path / "links"
    make_dist(links, "basedep", "1.0")
    first = make_dist(
        tmp_path / "w1", "myext", "1.0", requires=("basedep==1.0", "x[y]; extra == 'y'")
    )
    second = make_dist(tmp_path / "w2", "myext", "1.1", requires=("basedep==1.0",))
    assert requirements_of([first]) == ("basedep==1.0",)  # the extra's requirement is not one
    index = IndexOptions(index_url=(links / "none").as_uri(), find_links=links)
    cache = tmp_path / "cache"
    env = VenvEnvironment(wheels=(first,), index=index, base_cache=cache)
    try:
        assert _stages(env) == ["create-venv", "install-base", "install"]
        assert not env.reused
    finally:
        env.close()
    [base] = [p for p in (cache / BASES).iterdir() if p.is_dir()]
    marker = next(base.glob("venv/lib/python*/site-packages/basedep/__init__.py"))
    again = VenvEnvironment(wheels=(second,), index=index, base_cache=cache)
    try:
        assert _stages(again) == ["install"]  # no venv made, nothing of the base reinstalled
        assert again.reused and "a copy of a kept base venv" in again.description
        python = str(again.venv_python)
        out = subprocess.run([python, "-c", "import basedep, myext; print(myext.BUILD)"],
                             capture_output=True, text=True, check=True)  # fmt: skip
        assert out.stdout.strip() == "1.1"
        copied = next(
            again.venv_python.parent.parent.glob("lib/python*/site-packages/basedep/__init__.py")
        )
        assert copied.stat().st_ino == marker.stat().st_ino  # a hard link, not a copy
    finally:
        again.close()
    # the wheels under test never entered the base
    assert not list(base.glob("venv/lib/python*/site-packages/myext"))
    assert marker.is_file()


def test_a_fresh_venv_is_made_without_a_base_cache(tmp_path: Path) -> None:
    wheel = make_dist(tmp_path / "w", "plainext", "1.0")
    env = VenvEnvironment(wheels=(wheel,), index=IndexOptions(find_links=tmp_path / "w"))
    try:
        assert _stages(env) == ["create-venv", "install"]
    finally:
        env.close()
