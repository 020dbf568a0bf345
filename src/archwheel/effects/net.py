"""Reading an HTTP(S) answer so that a server cannot stall a build by trickling bytes.

A socket timeout only fires when nothing arrives for that long: a server sending one byte every
59 s keeps a 60 s timeout from ever firing, and ``response.read(n)`` waits until ``n`` bytes are
in (a megabyte at that pace is 700 days). ``paced_blocks`` reads what has arrived
(``read1``) and asks for a least rate over each window instead (docs/limits.md).
"""

from __future__ import annotations

import http.client
import re
import time
from collections.abc import Callable, Iterator
from typing import Protocol

# In every window of this many seconds at least this many bytes must arrive: a slow link
# (a few KB/s) passes, a trickle fails within two windows.
RATE_WINDOW_S: float = 60
MIN_BYTES_PER_WINDOW = 16 << 10
BLOCK = 1 << 20


_SHA256 = re.compile(r"[0-9a-f]{64}\Z")


def is_sha256(text: str) -> bool:
    """Whether ``text`` is a sha256 as archwheel keeps one (64 lower-case hex digits): the only
    form of a stated hash that may ever name something on disk."""
    return _SHA256.match(text) is not None


class TransferError(OSError):
    """An answer that did not arrive whole; the message is one line."""


class TooSlow(TransferError):
    """The server sent less than the least rate over a window."""


class TooLarge(TransferError):
    """The answer went past the size its reader accepts."""


class _Readable(Protocol):
    def read1(self, size: int = ..., /) -> bytes: ...


def paced_blocks(
    response: _Readable, *, limit: int, clock: Callable[[], float] = time.monotonic
) -> Iterator[bytes]:
    """The body of ``response`` in blocks as they arrive: ``TooLarge`` past ``limit`` bytes,
    ``TooSlow`` when fewer than ``MIN_BYTES_PER_WINDOW`` bytes came in a window of
    ``RATE_WINDOW_S`` seconds, ``TransferError`` when the connection ends before the length the
    server announced (which ``read1``, unlike ``read``, does not say)."""
    started = clock()
    arrived = 0
    total = 0
    while block := _read1(response):
        total += len(block)
        if total > limit:
            raise TooLarge(f"larger than {limit} bytes")
        arrived += len(block)
        now = clock()
        if now - started >= RATE_WINDOW_S:
            if arrived < MIN_BYTES_PER_WINDOW:
                raise TooSlow(
                    f"the server sent {arrived} bytes in {now - started:.0f} s, fewer than "
                    f"{MIN_BYTES_PER_WINDOW} per {RATE_WINDOW_S:.0f} s: too slow, given up"
                )
            started, arrived = now, 0
        yield block
    missing = getattr(response, "length", None)  # http.client: what the announced length lacks
    if isinstance(missing, int) and missing > 0:
        raise TransferError(f"the connection ended {missing} bytes before the announced length")


def _read1(response: _Readable) -> bytes:
    try:
        return response.read1(BLOCK)
    except http.client.HTTPException as exc:  # a chunked answer cut short, a bad chunk size
        raise TransferError(f"the answer was cut short or malformed ({exc!r})") from None
