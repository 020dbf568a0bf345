"""The bad-input matrix of ``can-load --torch`` and ``matrix --recheck`` for what a package index
and the network settings can say: a hostile index served by a real HTTP server on 127.0.0.1
(tests/support/range_server.py), as an HTML and a PEP 691 page, answers one line per release
and exit 3, writes nothing outside the cache folder and keeps nothing of what it served; a
network time limit that is not one is a usage error (exit 2) before anything is read."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from archwheel.exit_codes import ExitCode
from tests.support.can_load_fakes import TAG, Fakes
from tests.support.cli import CliRun
from tests.support.fuzz import watchdog
from tests.support.range_server import index_page, range_server

# -- can-load --torch against a hostile package index (a real server on 127.0.0.1) ----------------

HOSTILE_INDEX: dict[str, Callable[[Path, Path, Path], list[tuple[str, str, str | None]]]] = {
    # (folder served, the honest 2.13.0 wheel, 2.14.1's wheel) -> the page's links
    "sha256-of-another-release": lambda root, old, new: [
        (old.name, _served(root, "x-" + old.name, new), _sha256(old))
    ],
    "sha256-a-relative-path": lambda root, old, _: [
        (old.name, _served(root, old.name, old), "../../../victim")
    ],
    "sha256-an-absolute-path": lambda root, old, _: [
        (old.name, _served(root, old.name, old), str(root / "victim"))
    ],
    "link-to-a-local-file": lambda _, old, __: [(old.name, old.as_uri(), None)],
    "link-to-ftp": lambda _, old, __: [(old.name, "ftp://127.0.0.1/" + old.name, None)],
    "download-cut-short": lambda root, old, _: [
        (old.name, _served(root, old.name, old).replace("/files/", "/cut/"), _sha256(old))
    ],
}


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _served(root: Path, name: str, wheel: Path) -> str:
    import shutil

    shutil.copy(wheel, root / name)
    return f"/files/{name}"


@pytest.mark.parametrize("pep691", [False, True], ids=["html", "pep691"])
@pytest.mark.parametrize("shape", sorted(HOSTILE_INDEX))
def test_a_hostile_index_is_one_line_and_exit_3_and_leaves_nothing(
    shape: str,
    pep691: bool,
    fakes: Fakes,
    cli_run: CliRun,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "served"
    root.mkdir()
    old = tmp_path / f"torch-2.13.0-{TAG}.whl"
    old.write_bytes(fakes.torch_old.read_bytes())
    cache = tmp_path / "cache"
    monkeypatch.setenv("ARCHWHEEL_CACHE", str(cache))
    with range_server(root) as server, watchdog(60):
        links = HOSTILE_INDEX[shape](root, old, fakes.torch_new)
        page = index_page(root, "torch", links, pep691=pep691)
        argv = ["can-load", str(fakes.ext), "--torch", "2.13.0", "--index-url", server.url + page]
        code, out, err = cli_run(*argv, "--format", "json")
    assert code == ExitCode.INCOMPLETE, (code, err[-2000:])
    assert "Traceback" not in err and "internal error" not in err
    document = json.loads(out)
    assert document["verdict"] == "unknown" and "2.13.0" not in document["loads_with"]
    for torch in document["torches"]:
        assert torch["error"] and "\n" not in torch["error"]
    assert not list(tmp_path.rglob("*victim*"))
    assert not list(cache.rglob("torch-views/*.json"))
    assert not [p for p in cache.rglob("ranges/*/data") if p.stat().st_blocks]


@pytest.mark.parametrize(
    ("variable", "value"),
    [("ARCHWHEEL_NET_TIMEOUT", "soon"), ("ARCHWHEEL_NET_RUN_TIMEOUT", "0"),
     ("ARCHWHEEL_NET_RUN_TIMEOUT", "nan"), ("ARCHWHEEL_NET_TIMEOUT", "1e400"),
     ("ARCHWHEEL_NET_TIMEOUT", "\uff15"), ("ARCHWHEEL_NET_RUN_TIMEOUT", "1_000")],
)  # fmt: skip
@pytest.mark.parametrize("command", ["can-load", "matrix-recheck"])
def test_a_network_limit_that_is_not_one_is_a_usage_error(
    variable: str,
    value: str,
    command: str,
    cli_run: CliRun,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(variable, value)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "simple").as_uri())
    wheel = tmp_path / f"demo-1.0-{TAG}.whl"
    wheel.write_bytes(b"")
    (tmp_path / "index").mkdir()
    argv = (
        ["can-load", str(wheel), "--torch", ">=2.11"]
        if command == "can-load"
        else ["matrix", "--recheck", "--index", str(tmp_path / "index")]
    )
    code, _out, err = cli_run(*argv)
    assert code == ExitCode.USAGE, err
    assert variable in err and len(err.strip().splitlines()) <= 2, err
