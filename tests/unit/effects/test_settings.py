"""``Settings``: every ARCHWHEEL_* variable archwheel's host side reads, read once into one
frozen object (CLI > environment > defaults)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from archwheel.effects.settings import (
    SWITCHES,
    VARIABLES,
    Settings,
    check_switches,
    switch_setting,
)
from archwheel.errors import UsageError
from archwheel.exit_codes import ExitCode
from archwheel.interfaces.cli import build_parser, main
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
        "ARCHWHEEL_DIST_SCHEDULER": "http://farm:10600",
        "ARCHWHEEL_DIST_TOKEN_FILE": "/secrets/farm-token",
        "ARCHWHEEL_DIST_REQUIRED": "yes",
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
        dist_scheduler="http://farm:10600",
        dist_token_file=Path("/secrets/farm-token"),
        dist_required=True,
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


# -- switches: one spelling table for every boolean setting ---------------------------------------

SWITCH_VARIABLES = (
    "ARCHWHEEL_DEBUG",
    "ARCHWHEEL_KEEP_CONTAINERS",
    "ARCHWHEEL_PURE_PYTHON",
    "ARCHWHEEL_DIST_REQUIRED",
)


@pytest.mark.parametrize("variable", SWITCH_VARIABLES)
@pytest.mark.parametrize(
    ("text", "value"),
    [("1", True), ("true", True), ("TRUE", True), (" Yes ", True), ("0", False),
     ("false", False), ("False", False), ("no", False), ("NO", False), ("", False)],
)  # fmt: skip
def test_every_switch_reads_the_same_spellings(variable: str, text: str, value: bool) -> None:
    assert switch_setting(variable, {variable: text}) is value
    check_switches({variable: text})
    if variable in VARIABLES.values():
        field = next(f for f, v in VARIABLES.items() if v == variable)
        assert getattr(Settings.from_environ({variable: text}), field) is value


def test_debug_zero_is_off() -> None:
    """ARCHWHEEL_DEBUG=0 turned debugging on (any non-empty value did)."""
    assert Settings.from_environ({"ARCHWHEEL_DEBUG": "0"}).debug is False
    assert Settings.from_environ({"ARCHWHEEL_DEBUG": "false"}).debug is False


@pytest.mark.parametrize("variable", SWITCH_VARIABLES)
@pytest.mark.parametrize("text", ["2", "on", "banana", "yes please", "0x1", "\x1b[31m"])
def test_a_value_that_is_not_a_switch_is_a_usage_error_naming_it(variable: str, text: str) -> None:
    with pytest.raises(UsageError, match=f"^{variable}=") as caught:
        check_switches({variable: text})
    line = caught.value.one_line()
    assert "\n" not in line and "\x1b" not in line and "not a switch" in line
    if variable in VARIABLES.values():
        with pytest.raises(UsageError, match=variable):
            Settings.from_environ({variable: text})


def _main(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.mark.parametrize("variable", SWITCH_VARIABLES)
def test_the_command_line_refuses_a_switch_it_cannot_read_with_exit_2(
    variable: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever the command: `arch` reads none of these settings itself."""
    monkeypatch.setenv(variable, "banana")
    assert _main(["arch", "8.0"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{variable}='banana': not a switch" in err


def test_debug_zero_on_the_command_line_prints_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ARCHWHEEL_DEBUG", "0")
    assert _main(["arch", "sm_nonsense"]) == ExitCode.USAGE
    assert capsys.readouterr().err.startswith("archwheel: error:")
    monkeypatch.setenv("ARCHWHEEL_DEBUG", "true")
    with pytest.raises(UsageError):  # debugging: the exception itself, with its traceback
        main(["arch", "sm_nonsense"])


@pytest.mark.parametrize("make", ["missing", "file", "empty-folder"])
def test_a_wrong_archwheel_root_is_a_usage_error(
    make: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was a ToolError (exit 4: a tool missing); it is the user's setting."""
    root = tmp_path / "root"
    if make == "file":
        root.write_text("")
    elif make == "empty-folder":
        root.mkdir()
    with pytest.raises(UsageError, match=r"ARCHWHEEL_ROOT=.* does not hold recipes/"):
        Settings(root=str(root)).docker_dir()
    with pytest.raises(UsageError, match="ARCHWHEEL_ROOT"):
        Settings(root=str(root)).recipe_dirs()
    monkeypatch.setenv("ARCHWHEEL_ROOT", str(root))
    monkeypatch.delenv("ARCHWHEEL_RECIPES", raising=False)
    assert _main(["build", "--list-recipes"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ARCHWHEEL_ROOT=" in err


def test_every_setting_is_in_the_documented_table() -> None:
    """docs/settings.md lists every variable ``Settings`` reads and every switch, once each."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "settings.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `ARCHWHEEL_")]
    documented = [line.split("`")[1] for line in rows]
    assert sorted(documented) == sorted({*VARIABLES.values(), *SWITCHES})
    for line in rows:
        if line.split("`")[1] in SWITCHES:
            assert "a switch" in line and "not a switch: usage error" in line, line
