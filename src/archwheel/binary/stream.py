"""Serve many small parsers from one forward pass over a byte stream.

A wheel member is a deflate stream: reading it twice costs twice the inflate time, and holding
it costs its size in memory. So parsers here are generators that *ask* for byte ranges
(``yield Need(offset, length)``) and receive them when the stream passes that point. Many
parsers run at once (the ELF layout parser, one parser per fatbin container candidate); the
stream is read once, and only the bytes asked for are kept.

A parser that asks for bytes the stream has already passed is served from a small window of
recent chunks when possible; otherwise its request is kept for a replay pass
(``missed``), which the caller runs by streaming the input again.

Hand-written for a measured reason: no ELF or fatbin library parses from a forward stream; each
(pyelftools, LIEF) wants the whole file seekable, which for a wheel member means inflating it to
memory or disk first (a torch wheel holds members of over 1 GB).
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

# The most bytes one request may ask for: a guard against lying headers.
MAX_NEED = 64 << 20


class Need(NamedTuple):
    """A request for ``length`` bytes at absolute ``offset``. Fewer come back at end of input.

    With ``more`` the answer may be longer: when the request lies inside a chunk at hand, the
    rest of that chunk comes back as a ``memoryview`` (no copy), so that a parser walking many
    small headers (a fatbin container of thousands of entries) takes them in one answer.
    """

    offset: int
    length: int
    more: bool = False


Parser = Generator[Need, bytes, Any]


@dataclass
class _Request:
    parser: Parser
    token: object
    need: Need
    cursor: int  # next absolute offset still wanted
    parts: list[bytes] = field(default_factory=list)

    @property
    def end(self) -> int:
        return self.need.offset + self.need.length


@dataclass
class ParserOutcome:
    """What a parser returned, or the exception it raised."""

    token: object
    value: Any = None
    error: BaseException | None = None


class StreamMux:
    """Feed chunks in order; parsers get the ranges they ask for; outcomes collect."""

    def __init__(
        self,
        on_done: Callable[[ParserOutcome], None],
        *,
        window_bytes: int = 2 << 20,
    ) -> None:
        self._on_done = on_done
        self._heap: list[tuple[int, int, _Request]] = []
        self._seq = itertools.count()
        self._pos = 0
        self._recent: deque[tuple[int, bytes]] = deque()
        self._recent_bytes = 0
        self._window = window_bytes
        # The chunk at hand (being fed, or announced by ``ahead``): requests that lie inside it
        # are answered at once, without a queue entry (most requests of most parsers).
        self._cur_start = 0
        self._cur: bytes = b""
        self.missed: list[_Request] = []
        self.finished = False

    @property
    def position(self) -> int:
        """The offset of the stream's next byte: the bytes fed so far."""
        return self._pos

    # -- parsers ------------------------------------------------------------------------------
    def add(self, parser: Parser, token: object) -> None:
        """Start a parser; it runs until its first request that cannot be answered yet."""
        try:
            need = next(parser)
        except StopIteration as stop:
            self._on_done(ParserOutcome(token, value=stop.value))
            return
        except Exception as exc:
            self._on_done(ParserOutcome(token, error=exc))
            return
        self._place_and_run(_Request(parser, token, need, need.offset))

    def resume(self, request: _Request) -> None:
        """Re-schedule a request kept in ``missed`` (for a replay pass)."""
        self._place_and_run(request)

    def _place_and_run(self, req: _Request) -> None:
        answer = self._place(req)
        if answer is not None:
            self._run(req, *answer)

    def ahead(self, chunk: bytes) -> None:
        """Announce the next chunk (the one ``feed`` gets next): parsers added before it is fed
        are answered from it at once when they ask inside it."""
        self._cur_start = self._pos
        self._cur = chunk

    def _at_hand(self, need: Need) -> bytes | memoryview | None:
        """The answer to ``need`` from the chunk at hand, or None when it is not all there."""
        lo = need.offset - self._cur_start
        hi = lo + need.length
        if lo < 0 or hi > len(self._cur) or need.length <= 0 or need.length > MAX_NEED:
            return None
        if need.more:
            return memoryview(self._cur)[lo:]
        return self._cur[lo:hi]

    def _place(self, req: _Request) -> tuple[bytes | memoryview | None, Exception | None] | None:
        """Queue a request; return its answer instead when it can be answered right now."""
        need = req.need
        if need.length < 0 or need.offset < 0 or need.length > MAX_NEED:
            return None, ValueError(f"invalid request {need}")
        if need.length == 0:
            return b"", None
        if not req.parts:
            at_hand = self._at_hand(need)
            if at_hand is not None:
                return at_hand, None
        if req.cursor < self._pos:
            if not self._serve_from_window(req):
                self.missed.append(req)
                return None
            if req.cursor >= req.end:
                return b"".join(req.parts), None
        if self.finished:
            return b"".join(req.parts), None
        heapq.heappush(self._heap, (req.cursor, next(self._seq), req))
        return None

    def _serve_from_window(self, req: _Request) -> bool:
        """Copy the already-passed part of a request from recent chunks, if they hold it."""
        if not self._recent or self._recent[0][0] > req.cursor:
            return False
        for start, chunk in self._recent:
            stop = start + len(chunk)
            if stop <= req.cursor or start >= req.end:
                continue
            lo = req.cursor - start
            hi = min(len(chunk), req.end - start)
            req.parts.append(chunk[lo:hi])
            req.cursor = start + hi
            if req.cursor >= req.end:
                break
        return True

    def _run(self, req: _Request, data: bytes | memoryview | None, error: Exception | None) -> None:
        """Answer a request and keep answering its parser while answers are at hand.

        Iterative on purpose: a container of thousands of entries inside one chunk must not
        recurse once per entry.
        """
        parser = req.parser
        at_hand = self._at_hand
        while True:
            try:
                if error is not None:
                    need = parser.throw(error)
                else:
                    assert data is not None
                    # A memoryview only answers a ``Need(..., more=True)``: its parser takes it.
                    need = parser.send(cast("bytes", data))
                    # Answered from the chunk at hand without a queue entry while it holds them.
                    while (data := at_hand(need)) is not None:
                        need = parser.send(cast("bytes", data))
            except StopIteration as stop:
                self._on_done(ParserOutcome(req.token, value=stop.value))
                return
            except Exception as exc:
                self._on_done(ParserOutcome(req.token, error=exc))
                return
            req = _Request(parser, req.token, need, need.offset)
            answer = self._place(req)
            if answer is None:
                return
            data, error = answer

    # -- the stream ---------------------------------------------------------------------------
    def feed(self, chunk: bytes) -> None:
        """Pass the next chunk of the stream (chunks must arrive in order, without gaps).

        Parsers added before this call with requests inside the chunk are answered from it,
        as are the further requests they make inside it.
        """
        start = self._pos
        end = start + len(chunk)
        if not (self._cur_start <= start and end <= self._cur_start + len(self._cur)):
            self._cur_start = start
            self._cur = chunk
        heap = self._heap
        while heap and heap[0][0] < end:
            _, _, req = heapq.heappop(heap)
            lo = req.cursor - start
            hi = min(len(chunk), req.end - start)
            if req.parts or req.end > end:
                req.parts.append(chunk[lo:hi])
                req.cursor = start + hi
                if req.cursor < req.end:
                    heapq.heappush(heap, (req.cursor, next(self._seq), req))
                    continue
                self._run(req, b"".join(req.parts), None)
            else:
                self._run(req, memoryview(chunk)[lo:] if req.need.more else chunk[lo:hi], None)
        self._pos = end
        self._remember(start, chunk)

    def _remember(self, start: int, chunk: bytes) -> None:
        self._recent.append((start, chunk))
        self._recent_bytes += len(chunk)
        while len(self._recent) > 1 and self._recent_bytes - len(self._recent[0][1]) >= (
            self._window
        ):
            _, old = self._recent.popleft()
            self._recent_bytes -= len(old)

    def finish(self) -> None:
        """End of stream: every open request is answered with the bytes that exist."""
        self.finished = True
        self._recent.clear()
        self._cur = b""
        while self._heap:
            _, _, req = heapq.heappop(self._heap)
            self._run(req, b"".join(req.parts), None)

    def wants_more(self) -> bool:
        """Whether any parser still waits for bytes ahead of the current position."""
        return bool(self._heap)


class WholeInput:
    """``StreamMux``'s interface over an input that is all at hand (a wheel member that fits in
    its first chunk): each parser runs to its end as it is added, every request answered from
    the bytes at once, as ``StreamMux`` answers requests inside the chunk at hand and, past the
    end of the input, with the bytes that exist. Nothing is ever missed, so nothing replays."""

    def __init__(self, data: bytes, on_done: Callable[[ParserOutcome], None]) -> None:
        self._data = data
        self._on_done = on_done
        self._pos = 0
        self.missed: list[_Request] = []

    @property
    def position(self) -> int:
        """The bytes fed so far, as ``StreamMux.position``."""
        return self._pos

    def add(self, parser: Parser, token: object) -> None:
        """Run ``parser`` to its end over the input and report its outcome at once."""
        data = self._data
        size = len(data)
        try:
            need = next(parser)
            while True:
                offset, length, more = need
                if length < 0 or offset < 0 or length > MAX_NEED:
                    need = parser.throw(ValueError(f"invalid request {need}"))
                elif more and offset + length <= size and length > 0:
                    need = parser.send(cast("bytes", memoryview(data)[offset:]))
                else:
                    need = parser.send(data[offset : offset + length])
        except StopIteration as stop:
            self._on_done(ParserOutcome(token, value=stop.value))
        except Exception as exc:
            self._on_done(ParserOutcome(token, error=exc))

    def resume(self, request: _Request) -> None:  # pragma: no cover - nothing is ever missed
        """Never called: a whole input leaves no request in ``missed``."""
        raise AssertionError("a whole input misses nothing")

    def ahead(self, chunk: bytes) -> None:
        """Nothing to do: every parser was answered when it was added."""

    def feed(self, chunk: bytes) -> None:
        """Only advance ``position``: the parsers were answered when they were added."""
        self._pos += len(chunk)

    def finish(self) -> None:
        """Nothing to do: no request is left open."""

    def wants_more(self) -> bool:
        """Always False: no parser waits for bytes."""
        return False
