"""Reading a file on an index by HTTP range requests (``effects.ranged``), against a real HTTP
server on 127.0.0.1 that serves ranges, ignores them, or misbehaves (tests/support/range_server).
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from archwheel.binary.zipread import WheelReader
from archwheel.effects import net
from archwheel.effects.ranged import BLOCK, HashMismatch, LocalFile, RangedFile, RemoteFileError
from archwheel.errors import InputError
from tests.support.builders import write_zip
from tests.support.range_server import RangeServer, range_server

SIZE = 3 * BLOCK + 12345


@pytest.fixture
def served(tmp_path: Path) -> Iterator[RangeServer]:
    folder = tmp_path / "served"
    folder.mkdir()
    (folder / "blob").write_bytes(random.Random(7).randbytes(SIZE))
    with range_server(folder) as server:
        yield server


def _blob(server: RangeServer) -> bytes:
    return (server.folder / "blob").read_bytes()


def test_reads_at_any_offset_equal_the_file_and_cost_only_their_blocks(
    served: RangeServer, tmp_path: Path
) -> None:
    data = _blob(served)
    with RangedFile(f"{served.url}/files/blob", tmp_path / "cache", size=SIZE) as remote:
        for offset, length in [(0, 10), (BLOCK - 5, 10), (SIZE - 7, 100), (3 * BLOCK + 3, 5)]:
            assert remote.pread(length, offset) == data[offset : offset + length]
        assert remote.pread(10, SIZE) == b""
        assert remote.transfer.fetched == SIZE - BLOCK  # block 2 (of 0..3) was never asked for
        assert not remote.transfer.whole


def test_a_second_reader_is_served_from_the_cache(served: RangeServer, tmp_path: Path) -> None:
    url = f"{served.url}/files/blob"
    with RangedFile(url, tmp_path / "cache", size=SIZE) as first:
        first.pread(1000, BLOCK + 10)
    before = served.requests["files"]
    with RangedFile(url, tmp_path / "cache", size=SIZE) as second:
        assert second.pread(1000, BLOCK + 10) == _blob(served)[BLOCK + 10 : BLOCK + 1010]
        assert second.transfer.requests == 0
    assert served.requests["files"] == before


def test_the_size_is_asked_of_the_server_when_the_index_does_not_say(
    served: RangeServer, tmp_path: Path
) -> None:
    with RangedFile(f"{served.url}/files/blob", tmp_path / "cache") as remote:
        assert remote.size == SIZE


def test_a_server_without_ranges_is_read_whole_once_with_progress(
    served: RangeServer, tmp_path: Path
) -> None:
    seen: list[tuple[int, int]] = []
    url = f"{served.url}/whole/blob"
    with RangedFile(
        url, tmp_path / "cache", size=SIZE, progress=lambda a, b: seen.append((a, b))
    ) as r:
        assert r.pread(100, 2 * BLOCK) == _blob(served)[2 * BLOCK : 2 * BLOCK + 100]
        assert r.pread(100, 0) == _blob(served)[:100]
        assert r.transfer.whole
        assert r.transfer.requests == 1
    assert seen[-1] == (SIZE, SIZE)


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("lie", "the server sent"),
        ("short", "short"),
        ("gone", "answered 404"),
        ("loop", "redirected in a loop"),
    ],
)
def test_a_misbehaving_server_is_one_line_and_nothing_is_marked(
    served: RangeServer, tmp_path: Path, mode: str, said: str
) -> None:
    with RangedFile(f"{served.url}/{mode}/blob", tmp_path / "cache", size=SIZE) as remote:
        with pytest.raises(RemoteFileError) as caught:
            remote.pread(10, BLOCK)
        assert said in str(caught.value)
        assert "\n" not in str(caught.value)
        assert remote.transfer.requests <= 1
    # the block map holds nothing: a later, sound reader fetches the block again
    assert not any((tmp_path / "cache").rglob("blocks")) or all(
        set(p.read_bytes()) <= {0} for p in (tmp_path / "cache").rglob("blocks")
    )
    assert served.requests["loop"] <= 7  # at most MAX_REDIRECTS + 1 answers to a redirect loop


def test_a_size_that_disagrees_with_the_index_is_refused(
    served: RangeServer, tmp_path: Path
) -> None:
    with (
        RangedFile(f"{served.url}/files/blob", tmp_path / "cache", size=SIZE + 1) as remote,
        pytest.raises(RemoteFileError, match=f"the server sent 0-{BLOCK - 1} of {SIZE}"),
    ):
        remote.pread(10, 0)


def test_a_trickling_server_is_given_up(
    served: RangeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(net, "RATE_WINDOW_S", 0.3)
    with (
        RangedFile(f"{served.url}/trickle/blob", tmp_path / "cache", size=SIZE) as remote,
        pytest.raises(RemoteFileError, match="too slow"),
    ):
        remote.pread(10, 0)


def test_a_block_fetched_but_not_marked_is_fetched_again(
    served: RangeServer, tmp_path: Path
) -> None:
    url = f"{served.url}/files/blob"
    with RangedFile(url, tmp_path / "cache", size=SIZE) as remote:
        remote.pread(10, 0)
        folder = remote.folder
    # a run killed after writing a block's bytes but before marking it; its bytes are garbage
    data_fd = os.open(folder / "data", os.O_WRONLY)
    os.pwrite(data_fd, b"\xff" * 10, 0)
    os.close(data_fd)
    map_fd = os.open(folder / "blocks", os.O_WRONLY)
    os.pwrite(map_fd, b"\x00", 0)
    os.close(map_fd)
    with RangedFile(url, tmp_path / "cache", size=SIZE) as again:
        assert again.pread(10, 0) == _blob(served)[:10]
        assert again.transfer.requests == 1


def test_not_http_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RemoteFileError, match="not an http"):
        RangedFile("ftp://example.invalid/x", tmp_path)


def test_a_wheel_on_a_server_reads_as_the_same_wheel_on_disk(tmp_path: Path) -> None:
    folder = tmp_path / "served"
    folder.mkdir()
    rng = random.Random(3)
    members = [(f"pkg/lib{i}.so", rng.randbytes(50_000) + bytes(200_000)) for i in range(5)]
    wheel = write_zip(folder / "demo-1.0-py3-none-any.whl", members)
    local = WheelReader(wheel)
    with range_server(folder) as server:
        url = f"{server.url}/files/{wheel.name}"
        with RangedFile(url, tmp_path / "cache", size=wheel.stat().st_size) as remote:
            reader = WheelReader(Path(wheel.name), source=remote)
            assert reader.members == local.members
            for member in reader.members:
                assert b"".join(reader.chunks(member)) == b"".join(local.chunks(member))


def test_a_member_prefix_reads_only_a_prefix_of_a_big_member(tmp_path: Path) -> None:
    folder = tmp_path / "served"
    folder.mkdir()
    big = random.Random(5).randbytes(8 * BLOCK)  # incompressible: 2 MiB of deflate data
    wheel = write_zip(folder / "demo-1.0-py3-none-any.whl", [("pkg/big.so", big)])
    with range_server(folder) as server:
        url = f"{server.url}/files/{wheel.name}"
        with RangedFile(url, tmp_path / "cache", size=wheel.stat().st_size) as remote:
            reader = WheelReader(Path(wheel.name), source=remote)
            first = next(iter(reader.chunks(reader.members[0])))
            assert big.startswith(first)
            assert remote.transfer.fetched <= 3 * BLOCK  # the directory's block and one or two


def test_a_wheel_server_that_fails_is_an_input_error_naming_it(tmp_path: Path) -> None:
    folder = tmp_path / "served"
    folder.mkdir()
    wheel = write_zip(folder / "demo-1.0-py3-none-any.whl", [("a.so", b"x" * 1000)])
    with range_server(folder) as server:
        url = f"{server.url}/lie/{wheel.name}"
        with (
            RangedFile(url, tmp_path / "cache", size=wheel.stat().st_size) as remote,
            pytest.raises(InputError, match=r"demo-1\.0-py3-none-any\.whl: .*sent"),
        ):
            WheelReader(Path(wheel.name), source=remote)


def test_a_local_file_reads_the_same_way(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    path.write_bytes(b"0123456789")
    with LocalFile(path) as local:
        assert local.pread(3, 4) == b"456"
        assert local.reader().read() == b"0123456789"
        assert local.transfer.served == 13


def test_a_member_read_in_order_costs_few_requests_on_one_connection(tmp_path: Path) -> None:
    """A reader inflating a member reads it 64 KiB at a time from its start: the file fetches
    ahead as far as the reader has come whenever it needs the network, so the requests grow
    with the log of what was read, and they all go over one kept-alive connection."""
    folder = tmp_path / "served"
    folder.mkdir()
    size = 64 * BLOCK + 1000
    data = random.Random(3).randbytes(size)
    (folder / "big").write_bytes(data)
    with range_server(folder) as server:
        with RangedFile(f"{server.url}/files/big", tmp_path / "cache", size=size) as remote:
            at = 0
            while at < size:
                assert remote.pread(64 << 10, at) == data[at : at + (64 << 10)]
                at += 64 << 10
            assert remote.transfer.fetched == size
            assert remote.transfer.requests <= 2 * (size // (64 << 10)).bit_length()
        assert server.connections == 1


# -- what the index states is data: checked, never a path ----------------------------------------


@pytest.mark.parametrize("stated", ["../../../victim", "/abs/victim", "A" * 63, "g" * 64, ""])
def test_a_stated_sha256_that_is_not_one_is_refused_and_names_nothing(
    served: RangeServer, tmp_path: Path, stated: str
) -> None:
    with pytest.raises(RemoteFileError, match="which is not one; not read"):
        RangedFile(f"{served.url}/files/blob", tmp_path / "c" / "ranges", digest=stated)
    assert not (tmp_path / "c").exists()  # nothing made, inside the cache or out
    assert not list(tmp_path.rglob("victim*"))
    assert served.requests["files"] == 0


def test_the_cache_folder_is_named_by_archwheel_not_by_the_index(
    served: RangeServer, tmp_path: Path
) -> None:
    digest = hashlib.sha256(_blob(served)).hexdigest()
    with RangedFile(f"{served.url}/files/blob", tmp_path / "c", size=SIZE, digest=digest) as r:
        assert r.folder.parent == tmp_path / "c"
        assert r.folder.name != digest and re.fullmatch(r"[0-9a-f]{64}", r.folder.name)


def test_verify_reads_what_was_left_out_and_checks_the_whole_file(
    served: RangeServer, tmp_path: Path
) -> None:
    digest = hashlib.sha256(_blob(served)).hexdigest()
    with RangedFile(f"{served.url}/files/blob", tmp_path / "c", size=SIZE, digest=digest) as r:
        r.pread(10, 0)
        assert r.verify() and r.verified
        assert r.transfer.fetched == SIZE


def test_ranges_of_another_file_than_the_stated_sha256_are_a_mismatch(
    served: RangeServer, tmp_path: Path
) -> None:
    other = hashlib.sha256(b"another release").hexdigest()
    with RangedFile(f"{served.url}/files/blob", tmp_path / "c", size=SIZE, digest=other) as r:
        r.pread(10, 0)
        with pytest.raises(HashMismatch, match=f"the index states {other}: not kept") as caught:
            r.verify()
        assert "\n" not in str(caught.value) and not r.verified
        r.discard()
    assert list((tmp_path / "c").iterdir()) == []


def test_a_whole_download_that_does_not_match_marks_nothing_and_keeps_no_bytes(
    served: RangeServer, tmp_path: Path
) -> None:
    other = hashlib.sha256(b"another release").hexdigest()
    with RangedFile(f"{served.url}/whole/blob", tmp_path / "c", size=SIZE, digest=other) as r:
        with pytest.raises(HashMismatch):
            r.pread(10, 0)
        folder = r.folder
        assert not r.transfer.whole
    assert set((folder / "blocks").read_bytes()) == {0}
    assert (folder / "data").stat().st_blocks == 0  # emptied: a sparse file of no bytes


def test_a_whole_download_that_matches_is_verified_as_it_arrives(
    served: RangeServer, tmp_path: Path
) -> None:
    digest = hashlib.sha256(_blob(served)).hexdigest()
    with RangedFile(f"{served.url}/whole/blob", tmp_path / "c", size=SIZE, digest=digest) as r:
        r.pread(10, 0)
        assert r.verified and r.verify()
        assert r.transfer.requests == 1  # verify read nothing more


def test_a_whole_download_cut_short_leaves_no_bytes(served: RangeServer, tmp_path: Path) -> None:
    with RangedFile(f"{served.url}/cut/blob", tmp_path / "c", size=SIZE) as r:
        with pytest.raises(RemoteFileError, match="before the announced length"):
            r.pread(10, 0)
        assert r.transfer.whole_failed
        folder = r.folder
    assert (folder / "data").stat().st_blocks == 0


def test_a_fifo_is_refused_at_once_never_opened_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "torch.whl"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def open_it() -> None:
        try:
            LocalFile(fifo).close()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    reader = threading.Thread(target=open_it, daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive():  # blocked in open: a writer lets it go before the test fails
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(5)
        pytest.fail("LocalFile blocked on a FIFO")
    assert isinstance(outcome[0], OSError) and "not a regular file" in str(outcome[0])
