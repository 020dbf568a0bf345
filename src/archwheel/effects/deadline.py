"""Bounds on the time of network reads: per request, headers included, and per run.

A socket timeout fires only when nothing arrives for that long, and ``effects.net.paced_blocks``
asks for a least rate of a body only: a server that sends its status line and then one header
byte every 5 s held a reader for ever. Here every request runs under a ``Deadline``:

- from the connection (TCP and TLS) to the end of the answer's headers, at most
  ``NetLimits.request_timeout_s`` (``ARCHWHEEL_NET_TIMEOUT``, 60 s by default);
- every request of a run together, bodies included, at most ``NetLimits.run_timeout_s``
  (``ARCHWHEEL_NET_RUN_TIMEOUT``, 3600 s by default): the ``NetBudget`` of the run.

A deadline that passes shuts the socket down from a timer thread (``shutdown`` on a duplicate
of its descriptor, which wakes a read blocked in another thread, TLS included), and the request
ends in ``TimedOut`` with one line saying which bound was reached. The connections of
``effects.http`` (the one HTTP client) are watched from the moment their socket exists, so a
TLS handshake that trickles is bounded too.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from archwheel.effects.net import TransferError

DEFAULT_REQUEST_TIMEOUT_S = 60
DEFAULT_RUN_TIMEOUT_S = 3600
REQUEST_VARIABLE = "the setting ARCHWHEEL_NET_TIMEOUT"
RUN_VARIABLE = "the setting ARCHWHEEL_NET_RUN_TIMEOUT"


class TimedOut(TransferError):
    """A request, or the run's network reads together, went past their time bound."""


@dataclass(frozen=True)
class NetLimits:
    """How long network reads may take: ``request_timeout_s`` from a request's connection to
    the end of its answer's headers, ``run_timeout_s`` for every read of a run together."""

    request_timeout_s: float = float(DEFAULT_REQUEST_TIMEOUT_S)
    run_timeout_s: float = float(DEFAULT_RUN_TIMEOUT_S)

    @classmethod
    def from_settings(cls, request: str, run: str) -> NetLimits:
        """The limits the two settings give, as written (empty: the default); ``ValueError``
        naming the setting for a value that is not a time limit (``parse_timeout``)."""
        from archwheel.effects.process import parse_timeout

        values: list[float] = []
        for text, default, name in (
            (request, DEFAULT_REQUEST_TIMEOUT_S, "ARCHWHEEL_NET_TIMEOUT"),
            (run, DEFAULT_RUN_TIMEOUT_S, "ARCHWHEEL_NET_RUN_TIMEOUT"),
        ):
            try:
                values.append(parse_timeout(text.strip()) if text.strip() else float(default))
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
        return cls(*values)


class NetBudget:
    """The network time of one run (a command): it starts when made and ends
    ``limits.run_timeout_s`` later; each request is made under ``request(...)``."""

    def __init__(
        self, limits: NetLimits | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits or NetLimits()
        self.clock = clock
        self.end = clock() + self.limits.run_timeout_s

    def left(self) -> float:
        """Seconds left to the run's network reads (0 or less: spent)."""
        return self.end - self.clock()

    @property
    def spent(self) -> bool:
        """Whether the run's network time is used up (a new request is then not made)."""
        return self.left() <= 0

    def over(self) -> str:
        """The one line said when the run's bound is reached."""
        return (
            f"the network time limit of the run was reached ({self.limits.run_timeout_s:g} s, "
            f"{RUN_VARIABLE})"
        )

    def request(self, what: str) -> Deadline:
        """The deadline of one request to ``what`` (a URL), for a ``with`` block."""
        return Deadline(self, what)


_local = threading.local()


def current() -> Deadline | None:
    """The deadline of the request this thread is making, if any."""
    found: Deadline | None = getattr(_local, "deadline", None)
    return found


class Deadline:
    """One request's time bound (see the module doc): the headers' bound until
    ``headers_done``, then the run's. Leaving the ``with`` block after it fired raises
    ``TimedOut``, whatever the reader met when its socket was shut down."""

    def __init__(self, budget: NetBudget, what: str) -> None:
        self._budget = budget
        self._what = what
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer: threading.Timer | None = None
        self._headers = True
        self._header_end = 0.0
        self._previous: Deadline | None = None
        self.fired = False
        self._fired_in_headers = False

    def __enter__(self) -> Deadline:
        if self._budget.spent:
            raise TimedOut(f"not asked: {self._budget.over()}")
        self._header_end = min(
            self._budget.clock() + self._budget.limits.request_timeout_s, self._budget.end
        )
        self._arm(self._header_end)
        self._previous, _local.deadline = current(), self
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            for sock in self._sockets:
                sock.close()
            self._sockets.clear()
        _local.deadline = self._previous
        if self.fired and (kind is None or issubclass(kind, Exception)):
            raise TimedOut(self.why()) from None

    def why(self) -> str:
        """The one line ``TimedOut`` says: the headers' bound or the run's, whichever fired."""
        if self._fired_in_headers and self._header_end < self._budget.end:
            limit = self._budget.limits.request_timeout_s
            return (
                f"no complete answer (status line and headers) within {limit:g} s "
                f"({REQUEST_VARIABLE}): given up"
            )
        return self._budget.over()

    def left(self) -> float:
        """Seconds left before this deadline fires."""
        return (self._header_end if self._headers else self._budget.end) - self._budget.clock()

    def headers_done(self) -> None:
        """The headers are in: from now on only the run's bound applies (and the body's
        least rate, ``effects.net.paced_blocks``). Headers cut short by the deadline (a
        socket shut down reads as their end) leave it fired."""
        with self._lock:
            if self.fired:
                return
            self._headers = False
        self._arm(self._budget.end)

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` down when the deadline passes (at once if it has)."""
        try:
            duplicate = socket.socket(fileno=os.dup(sock.fileno()))
        except OSError:
            return  # a socket already closed: nothing to wait on
        with self._lock:
            self._sockets.append(duplicate)
            fired = self.fired
        if fired:
            _shut(duplicate)

    def _arm(self, until: float) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(max(0.0, until - self._budget.clock()), self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            self._fired_in_headers = self._headers
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
