"""The loader's view of a torch wheel kept between runs (``inspection.torch_range``), the
request checks of ``can-load --torch``, and an index as hostile input: fake torch wheels
(g++) served by a real HTTP server on 127.0.0.1 (tests/support/range_server.py) under stated
sha256s that lie or are paths, with local links, trickling, cut short."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from archwheel.binary.dynamic import DynamicInfo, UndefinedSymbol
from archwheel.effects import net
from archwheel.effects.deadline import NetBudget, NetLimits
from archwheel.effects.pipconfig import PipSettings
from archwheel.effects.ranged import RangedFile
from archwheel.errors import InputError, UsageError
from archwheel.inspection import torch_range
from archwheel.verdicts.load import LoadVerdict, WheelFiles
from tests.support.can_load_fakes import TAG, Fakes
from tests.support.fuzz import watchdog
from tests.support.range_server import index_page, range_server

VIEW = WheelFiles(
    filename="torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl",
    name="torch",
    version="2.14.1",
    tags=("cp311-cp311-manylinux_2_28_x86_64",),
    libraries=(
        DynamicInfo(
            path="torch/lib/libc10.so",
            size=1000,
            file_kind="shared-object",
            is_dynamic=True,
            machine=62,
            soname="libc10.so",
            needed=("libstdc++.so.6",),
            rpath=("$ORIGIN",),
            undefined=(UndefinedSymbol("_Znwm", "GLIBCXX_3.4", "libstdc++.so.6", False, "func"),),
            exports={"_ZN3c105ErrorC1Ev": (None,), "versioned": ("V1", "V2")},
            version_needs=(("libstdc++.so.6", ("GLIBCXX_3.4",)),),
        ),
    ),
    requires=(("nvidia-nccl-cu13", "==2.30.7", 'platform_system == "Linux"'),),
    cuda_major=13,
)


def test_a_kept_view_reads_back_equal(tmp_path: Path) -> None:
    path = tmp_path / "view.json"
    torch_range._keep_view(path, VIEW)
    assert torch_range._cached_view(path, VIEW.filename) == VIEW


@pytest.mark.parametrize(
    "content",
    [b"", b"{", b'{"format": 99, "wheel": {}}', b'{"format": 1, "wheel": {"x": 1}}', b"[]"],
)
def test_a_damaged_or_foreign_view_is_read_again(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "view.json"
    path.write_bytes(content)
    assert torch_range._cached_view(path, VIEW.filename) is None


def test_a_view_of_another_file_is_not_used(tmp_path: Path) -> None:
    path = tmp_path / "view.json"
    torch_range._keep_view(path, VIEW)
    assert (
        torch_range._cached_view(path, "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl") is None
    )


def test_the_request_is_checked_before_anything_is_read(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        torch_range.can_load_range(tmp_path / "x.whl", "banana", pip=PipSettings(), cache=tmp_path)
    with pytest.raises(InputError, match="not a wheel"):
        torch_range.can_load_range(tmp_path / "x.txt", ">=2.11", pip=PipSettings(), cache=tmp_path)


# -- an index is data, never a path or an authority (against a real server on 127.0.0.1) -------

OLD = f"torch-2.13.0-{TAG}.whl"
NEW = f"torch-2.14.1-{TAG}.whl"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _serve(root: Path, name: str, wheel: Path) -> str:
    """``wheel`` served as ``/files/NAME`` (its href on a page)."""
    target = root / name
    if not target.exists():
        shutil.copy(wheel, target)
    return f"/files/{name}"


def _range(
    fakes: Fakes, url: str, cache: Path, torch: str = "2.13.0", **kwargs: Any
) -> tuple[torch_range.TorchRangeReport, list[str]]:
    said: list[str] = []
    report = torch_range.can_load_range(
        fakes.ext, torch, pip=PipSettings(index_url=url), cache=cache, host_libraries=False,
        on_event=said.append, **kwargs,
    )  # fmt: skip
    return report, said


@pytest.mark.parametrize("pep691", [False, True], ids=["html", "pep691"])
def test_an_index_serving_one_release_under_another_s_hash_poisons_nothing(
    fakes: Fakes, tmp_path: Path, pep691: bool
) -> None:
    """2.14.1's bytes served as 2.13.0 under 2.13.0's sha256: that release is unknown (a
    mismatch, one line), nothing is kept, and a later run against an honest index says 2.13.0
    does not load the extension (it lacks c10::foo), not "loads"."""
    root = tmp_path / "served"
    root.mkdir()
    cache = tmp_path / "cache"
    with range_server(root) as server:
        hostile = index_page(
            root, "torch", [(OLD, _serve(root, "lie-" + OLD, fakes.torch_new), _sha(fakes.torch_old))],
            pep691=pep691,
        )  # fmt: skip
        report, _ = _range(fakes, server.url + hostile, cache)
        (check,) = report.checks
        assert check.verdict is LoadVerdict.UNKNOWN
        assert f"the index states {_sha(fakes.torch_old)}: not kept" in (check.error or "")
        assert not (cache / "torch-views").exists() or not any((cache / "torch-views").iterdir())
        assert not any((cache / "ranges").iterdir())
        honest = index_page(
            root, "torch", [(OLD, _serve(root, OLD, fakes.torch_old), _sha(fakes.torch_old))],
            name="honest", pep691=pep691,
        )  # fmt: skip
        report, _ = _range(fakes, server.url + honest, cache)
        assert report.checks[0].verdict is LoadVerdict.FAILS
        # verified: its view is kept under that sha256, and a later run reads nothing
        again, _ = _range(fakes, server.url + honest, cache)
        assert again.checks[0].cached and again.checks[0].verdict is LoadVerdict.FAILS


@pytest.mark.parametrize("stated", ["../../../victim", "/ABS/victim", "..%2f..%2fvictim"])
@pytest.mark.parametrize("pep691", [False, True], ids=["html", "pep691"])
def test_a_stated_sha256_that_is_a_path_names_nothing_on_disk(
    fakes: Fakes, tmp_path: Path, stated: str, pep691: bool
) -> None:
    root = tmp_path / "served"
    root.mkdir()
    cache = tmp_path / "deep" / "er" / "cache"
    with range_server(root) as server:
        page = index_page(
            root, "torch", [(OLD, _serve(root, OLD, fakes.torch_old), stated)], pep691=pep691
        )
        report, _ = _range(fakes, server.url + page, cache)
    (check,) = report.checks
    assert check.verdict is LoadVerdict.UNKNOWN
    assert "which is not one: not read" in (check.error or "")
    assert server.requests["files"] == 1  # the page only: the wheel was never asked for
    assert not list(tmp_path.rglob("*victim*"))
    assert not cache.exists() or not any(cache.rglob("*"))


@pytest.mark.parametrize("pep691", [False, True], ids=["html", "pep691"])
def test_a_remote_page_cannot_make_archwheel_read_a_local_file(
    fakes: Fakes, tmp_path: Path, pep691: bool
) -> None:
    root = tmp_path / "served"
    root.mkdir()
    fifo = tmp_path / "fifo.whl"
    os.mkfifo(fifo)
    with range_server(root) as server:
        links = [
            (NEW, fakes.torch_new.as_uri(), None),
            (OLD, fifo.as_uri(), None),  # a FIFO: opening it would hang
            (f"torch-2.12.0-{TAG}.whl", "ftp://127.0.0.1/torch.whl", None),
        ]
        page = index_page(root, "torch", links, pep691=pep691)
        with watchdog(30):
            report, _ = _range(fakes, server.url + page, tmp_path / "cache", "2.14.1,2.13.0")
    assert report.checks == ()
    assert set(report.not_found) == {"2.14.1", "2.13.0"}
    assert report.verdict is LoadVerdict.UNKNOWN


def test_a_local_index_the_user_named_may_link_local_files_but_no_fifo(
    fakes: Fakes, tmp_path: Path
) -> None:
    root = tmp_path / "local"
    fifo = tmp_path / "fifo.whl"
    os.mkfifo(fifo)
    links = [(NEW, fakes.torch_new.as_uri(), None), (OLD, fifo.as_uri(), None)]
    index_page(root, "torch", links)
    with watchdog(30):
        report, _ = _range(fakes, (root / "hostile").as_uri(), tmp_path / "cache", "2.14.1,2.13.0")
    by_version = {c.version: c for c in report.checks}
    assert by_version["2.14.1"].verdict is LoadVerdict.LOADS
    assert by_version["2.13.0"].verdict is LoadVerdict.UNKNOWN
    assert "not a regular file" in (by_version["2.13.0"].error or "")


def test_a_damaged_kept_view_is_removed_with_a_warning_and_the_wheel_read_again(
    fakes: Fakes, tmp_path: Path
) -> None:
    root = tmp_path / "served"
    root.mkdir()
    cache = tmp_path / "cache"
    view = cache / "torch-views" / f"{_sha(fakes.torch_old)}.json"
    view.parent.mkdir(parents=True)
    view.write_bytes(b"[" * 200_000 + b"]" * 200_000)  # RecursionError in json.loads
    with range_server(root) as server:
        page = index_page(
            root, "torch", [(OLD, _serve(root, OLD, fakes.torch_old), _sha(fakes.torch_old))]
        )
        report, said = _range(fakes, server.url + page, cache)
    assert report.checks[0].verdict is LoadVerdict.FAILS and not report.checks[0].cached
    assert [line for line in said if "damaged" in line] == [
        f"warning: the kept view {view} is damaged (view: nested deeper than the limit of 16): "
        "removed, read again"
    ]
    assert torch_range._cached_view(view, OLD) is not None  # kept again, sound


def test_a_failed_whole_download_leaves_nothing(fakes: Fakes, tmp_path: Path) -> None:
    root = tmp_path / "served"
    root.mkdir()
    cache = tmp_path / "cache"
    with range_server(root) as server:
        _serve(root, OLD, fakes.torch_old)
        page = index_page(root, "torch", [(OLD, f"/cut/{OLD}", _sha(fakes.torch_old))])
        report, said = _range(fakes, server.url + page, cache)
    assert report.checks[0].verdict is LoadVerdict.UNKNOWN
    assert any("the download failed: nothing of it kept" in line for line in said)
    assert not any((cache / "ranges").iterdir())


def test_blocks_an_earlier_run_kept_that_do_not_match_are_read_again(
    fakes: Fakes, tmp_path: Path
) -> None:
    root = tmp_path / "served"
    root.mkdir()
    cache = tmp_path / "cache"
    with range_server(root) as server:
        page = index_page(
            root, "torch", [(OLD, _serve(root, OLD, fakes.torch_old), _sha(fakes.torch_old))]
        )
        url = f"{server.url}/files/{OLD}"
        # an earlier run, cut off, kept a block of other bytes under this URL and sha256
        with RangedFile(url, cache / "ranges", digest=_sha(fakes.torch_old)) as earlier:
            earlier.pread(10, 0)
            data = os.open(earlier.folder / "data", os.O_WRONLY)
            os.pwrite(data, b"\0" * 100, 0)
            os.close(data)
        report, said = _range(fakes, server.url + page, cache)
    assert report.checks[0].verdict is LoadVerdict.FAILS
    assert any("kept by an earlier run do not match" in line for line in said)


def test_an_index_without_sha256_is_judged_but_nothing_is_kept(
    fakes: Fakes, tmp_path: Path
) -> None:
    root = tmp_path / "served"
    root.mkdir()
    cache = tmp_path / "cache"
    with range_server(root) as server:
        page = index_page(root, "torch", [(OLD, _serve(root, OLD, fakes.torch_old), None)])
        report, said = _range(fakes, server.url + page, cache)
    assert report.checks[0].verdict is LoadVerdict.FAILS
    assert any("states no sha256" in line for line in said)
    assert not (cache / "torch-views").exists()
    assert not any((cache / "ranges").iterdir())


def test_a_range_states_its_bound_and_stops_at_it(
    fakes: Fakes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every release's wheel trickles: the run's bound (1 s here) ends the first, and the
    others are not asked for; without the bound each would cost a rate window."""
    monkeypatch.setattr(net, "RATE_WINDOW_S", 5)
    root = tmp_path / "served"
    root.mkdir()
    links = []
    for version in ("2.13.0", "2.14.1", "2.15.0"):
        name = f"torch-{version}-{TAG}.whl"
        _serve(root, name, fakes.torch_old)
        links.append((name, f"/trickle/{name}", _sha(fakes.torch_old)))
    started = time.monotonic()
    with range_server(root) as server:
        page = index_page(root, "torch", links)
        budget = NetBudget(NetLimits(request_timeout_s=5, run_timeout_s=1.0))
        report, said = _range(fakes, server.url + page, tmp_path / "c", ">=2.13", budget=budget)
    assert time.monotonic() - started < 4
    assert any("3 torch releases to check: the network reads of this run stop after" in line
               for line in said)  # fmt: skip
    assert [c.verdict for c in report.checks] == [LoadVerdict.UNKNOWN] * 3
    assert all("the network time limit of the run was reached" in (c.error or "")
               for c in report.checks)  # fmt: skip
    assert server.requests["trickle"] == 2  # the first wheel's size and its first range only
