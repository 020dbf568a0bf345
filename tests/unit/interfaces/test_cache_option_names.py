"""The compiler-cache options name the cache that is used (sccache): `--cache-volume VOLUME`
and `--cache-size SIZE` in `--help`, the spellings of the ccache days accepted as aliases and
kept out of the help."""

from __future__ import annotations

import pytest

from archwheel.interfaces.cli import build_parser


@pytest.mark.parametrize("command", ["build", "matrix"])
def test_help_names_the_compiler_cache_not_ccache(command: str) -> None:
    parser = build_parser(command)
    sub = parser._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr,index]
    text = sub.format_help()
    assert "--cache-volume VOLUME" in text
    assert "sccache" in text
    assert "CCACHE_" not in text.replace("SCCACHE_", "")
    assert "--ccache-volume VOLUME" not in text  # the alias is named in the help text only


@pytest.mark.parametrize("command", ["build", "matrix"])
@pytest.mark.parametrize("option", ["--cache-volume", "--ccache-volume"])
def test_both_spellings_set_the_volume(command: str, option: str) -> None:
    extra = ["--arch", "8.0"] if command == "build" else ["m.toml", "--index", "idx"]
    args = build_parser(command).parse_args([command, *extra, option, "my-vol"])
    assert args.ccache_volume == "my-vol"


def test_the_default_volume_stays_when_no_spelling_is_given() -> None:
    args = build_parser("build").parse_args(["build", "--recipe", "example", "--arch", "8.0"])
    assert args.ccache_volume == "archwheel-sccache"
    assert args.ccache_size == "20G"
    old = build_parser("build").parse_args(["build", "--arch", "8.0", "--ccache-size", "5G"])
    assert old.ccache_size == "5G"
