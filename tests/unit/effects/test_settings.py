"""``Settings``: every ARCHWHEEL_* variable archwheel's host side reads, read once into one
frozen object (CLI > environment > defaults)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from archwheel.effects.settings import VARIABLES, Settings
from archwheel.interfaces.cli import build_parser
from archwheel.interfaces.commands.build import BuildCommand


def test_each_field_is_read_from_its_variable(tmp_path: Path) -> None:
    environ = {
        "ARCHWHEEL_CACHE": str(tmp_path / "c"),
        "ARCHWHEEL_ROOT": "/checkout",
        "ARCHWHEEL_RECIPES": os.pathsep.join(["/a", "", "/b"]),
        "ARCHWHEEL_KEEP_CONTAINERS": "1",
        "ARCHWHEEL_RUN_LABEL": "archwheel.test=x",
        "ARCHWHEEL_PODMAN_RUNTIME": "crun",
        "ARCHWHEEL_CACHE_URL": "redis://cache:6379",
        "ARCHWHEEL_DEBIAN_MIRROR": "http://mirror/debian",
        "ARCHWHEEL_CUOBJDUMP": "/opt/cuobjdump",
        "ARCHWHEEL_CUOBJDUMP_TIMEOUT": " 30 ",
        "ARCHWHEEL_DEBUG": "1",
        "ARCHWHEEL_NET_TIMEOUT": " 5 ",
        "ARCHWHEEL_NET_RUN_TIMEOUT": "600",
    }
    assert set(environ) == set(VARIABLES.values())
    assert set(VARIABLES) == {f.name for f in dataclasses.fields(Settings)}
    settings = Settings.from_environ(environ)
    assert settings == Settings(
        cache=(tmp_path / "c" / "archwheel").resolve(),
        root="/checkout",
        recipes=(Path("/a"), Path("/b")),
        keep_containers=True,
        run_label="archwheel.test=x",
        podman_runtime="crun",
        cache_url="redis://cache:6379",
        debian_mirror="http://mirror/debian",
        cuobjdump=Path("/opt/cuobjdump"),
        cuobjdump_timeout="30",
        debug=True,
        net_timeout="5",
        net_run_timeout="600",
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.debug = False  # type: ignore[misc]


def test_unset_or_empty_variables_are_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    defaults = Settings()
    assert defaults.cache == tmp_path / ".cache" / "archwheel"
    assert Settings.from_environ({}) == defaults
    empty = {name: "" for name in VARIABLES.values() if name != "ARCHWHEEL_PODMAN_RUNTIME"}
    assert Settings.from_environ(empty) == defaults
    assert not Settings.from_environ({"ARCHWHEEL_KEEP_CONTAINERS": "0"}).keep_containers
    # Set but empty: podman gets no --runtime (unset: runc when it is on PATH).
    assert Settings.from_environ({"ARCHWHEEL_PODMAN_RUNTIME": ""}).podman_runtime == ""
    assert defaults.podman_runtime is None
    xdg = Settings.from_environ({"XDG_CACHE_HOME": str(tmp_path / "x")})
    assert xdg.cache == tmp_path / "x" / "archwheel"


def test_the_command_line_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCHWHEEL_CACHE_URL", "redis://from-env:6379")
    parse = build_parser("build").parse_args
    from_env = BuildCommand.from_args(parse(["build", "--plan"])).request
    assert from_env.cache_url is not None and from_env.cache_url.text == "redis://from-env:6379"
    assert from_env.settings == Settings.from_environ(os.environ)
    given = BuildCommand.from_args(parse(["build", "--plan", "--cache-url", "redis://cli:1"]))
    assert given.request.cache_url is not None
    assert given.request.cache_url.text == "redis://cli:1"
