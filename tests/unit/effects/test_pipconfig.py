"""The host's pip configuration (``effects.pipconfig.PipSettings.from_host``), read through the
real ``pip config list`` from real configuration files (``PIP_CONFIG_FILE``).

A configuration pip itself refuses to load was taken as "no configuration", and archwheel then
asked pip's default index, one the user never named; an empty ``--index-url`` did the same.
Each is now a usage error (exit 2) that names the file or the option. Whether pip refuses a
file is asked of pip itself, on every generated file.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archwheel.effects.pipconfig import PipSettings, configuration_refusal
from archwheel.errors import UsageError
from tests.support.cli import CliRun
from tests.support.fuzz import FUZZ_SETTINGS
from tests.support.index_wheels import make_dist
from tests.support.wheels import make_wheel

# A local index nobody listens on: a read that reaches it fails at once, never the network.
NAMED = "http://127.0.0.1:9/simple"

REFUSED = {
    "header-without-bracket": b"[global\nindex-url = " + NAMED.encode() + b"\n",
    "no-section-header": b"index-url = " + NAMED.encode() + b"\n",
    "option-twice": b"[global]\nindex-url = " + NAMED.encode() + b"\nindex-url = x\n",
    "section-twice": b"[global]\nindex-url = " + NAMED.encode() + b"\n[global]\n",
    "line-without-value": b"[global]\nindex-url = " + NAMED.encode() + b"\ngarbage line\n",
    "not-text": b"[global]\nindex-url = " + NAMED.encode() + b"\ntimeout = \xff\xfe\n",
}


def _pip_refuses(config: Path) -> bool:
    """Whether the real pip refuses to load ``config`` (its ``pip config list`` fails)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        env={"PIP_CONFIG_FILE": str(config), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    return proc.returncode != 0


@pytest.mark.parametrize("shape", sorted(REFUSED))
def test_a_configuration_pip_refuses_is_a_usage_error_naming_the_file(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "pip.conf"
    config.write_bytes(REFUSED[shape])
    assert _pip_refuses(config), "pip itself loads it: not a refused configuration"
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    with pytest.raises(UsageError) as caught:
        PipSettings.from_host()
    line = caught.value.one_line()
    assert f"pip refuses its configuration file {config}" in line
    assert "\n" not in line


def test_a_configuration_pip_loads_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\nindex-url = {NAMED}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    assert PipSettings.from_host().index_url == NAMED


# Lines a hand-edited pip.conf may hold; some make pip refuse the file.
LINES = st.sampled_from(
    [
        b"[global]",
        b"[install]",
        b"[global",
        b"global]",
        b"index-url = " + NAMED.encode(),
        b"extra-index-url = http://127.0.0.1:9/other",
        b"timeout = 5",
        b"# a comment",
        b"",
        b"  continued",
        b"just words",
        b"= no name",
        b"\xff\xfe",
    ]
)


@settings(FUZZ_SETTINGS, max_examples=12, suppress_health_check=list(HealthCheck))
@given(lines=st.lists(LINES, min_size=1, max_size=6))
def test_archwheel_refuses_exactly_what_pip_refuses(lines: list[bytes]) -> None:
    """Generated configuration files: ``from_host`` is an error naming the file exactly when
    the real pip refuses to load it, and never an empty configuration in its place."""
    with tempfile.TemporaryDirectory() as box:
        config = Path(box) / "pip.conf"
        config.write_bytes(b"\n".join(lines) + b"\n")
        refused = _pip_refuses(config)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("PIP_CONFIG_FILE", str(config))
            if refused:
                with pytest.raises(UsageError) as caught:
                    PipSettings.from_host()
                assert str(config) in caught.value.one_line()
            else:
                PipSettings.from_host()


@pytest.mark.parametrize(
    ("stderr", "expected"),
    [
        (
            "Configuration file could not be loaded.\nFile contains no section headers.\n"
            "file: '/etc/pip.conf', line: 1\n'[global\\n'",
            "pip refuses its configuration file /etc/pip.conf, line 1: "
            "File contains no section headers",
        ),
        (
            "Configuration file could not be loaded.\nWhile reading from '/x/pip.conf' "
            "[line  3]: option 'index-url' in section 'global' already exists",
            "pip refuses its configuration file /x/pip.conf, line 3: "
            "option 'index-url' in section 'global' already exists",
        ),
        (
            "Configuration file contains invalid UTF-8 characters in /x/pip.conf.",
            "pip refuses its configuration file /x/pip.conf: contains invalid UTF-8 characters",
        ),
        ("ERROR: something else\n", "pip refuses its configuration (ERROR: something else)"),
    ],
)
def test_the_refusal_is_one_line_from_pips_words(stderr: str, expected: str) -> None:
    assert configuration_refusal(stderr) == expected


def test_the_commands_that_ask_an_index_stop_on_a_refused_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli_run: CliRun
) -> None:
    """``can-load --torch`` and ``matrix --recheck`` asked pip's default index when the
    configuration was refused; now exit 2 naming the file, and no index is asked."""
    from archwheel.matrix.index import Candidate, publish

    config = tmp_path / "pip.conf"
    config.write_bytes(REFUSED["header-without-bracket"])
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    wheel = make_wheel(tmp_path, "demo")
    index = tmp_path / "index"
    assert publish(index, [Candidate(make_dist(tmp_path / "w", "pure", "1.0"))]).ok
    for argv in (
        ["can-load", str(wheel), "--torch", "2.4.0", "--python-version", "3.11"],
        ["matrix", "--recheck", "--index", str(index)],
    ):
        code, out, err = cli_run(*argv)
        assert code == 2, (argv, out, err)
        assert err.count("\n") == 1 and str(config) in err, err


@pytest.mark.parametrize(
    "argv",
    [
        ["can-load", "{wheel}", "--torch", "2.4.0", "--python-version", "3.11", "--index-url="],
        ["can-load", "{wheel}", "--torch", "2.4.0", "--python-version", "3.11", "--index-url", " "],
        ["build", "--recipe", "example", "--plan", "--index-url="],
        ["build", "--recipe", "example", "--plan", "--extra-index-url="],
        ["build", "--recipe", "example", "--plan", "--find-links="],
        ["smoke", "{wheel}", "--index-url="],
        ["smoke", "{wheel}", "--find-links="],
    ],
)
def test_an_empty_index_url_is_a_usage_error(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An empty ``--index-url`` was taken for "not given": the configured index (here one
    nobody listens on), or pip's default, was asked instead."""
    from archwheel.interfaces.cli import main

    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\nindex-url = {NAMED}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    wheel = make_wheel(tmp_path, "demo")
    try:
        code = main([a.format(wheel=wheel) for a in argv])
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "an empty URL" in err


def test_an_empty_location_is_refused_below_the_command_line() -> None:
    """The same at the floor the command line and the Python callers share."""
    for kwargs in ({"index_url": ""}, {"extra_index_urls": [" "]}, {"find_links": [""]}):
        with pytest.raises(UsageError, match="empty package index URL"):
            PipSettings().override(**kwargs)


def test_a_refusal_pip_prints_on_standard_output_names_the_file(tmp_path: Path) -> None:
    """A continuation line makes ``timeout`` no number: pip says so on standard output, naming
    no file; the one line carries pip's words and the file PIP_CONFIG_FILE names."""
    config = tmp_path / "pip.conf"
    config.write_bytes(b"[global]\ntimeout = 5\n  continued\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PIP_CONFIG_FILE", str(config))
        with pytest.raises(UsageError) as caught:
            PipSettings.from_host()
    line = caught.value.one_line()
    assert "invalid floating-point value" in line
    assert str(config) in line
