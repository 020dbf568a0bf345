"""Just enough of Redis's wire protocol (RESP 2, and RESP 3's scalar types) for archwheel's
relay to pass requests and replies whole, with a deadline, and to answer in the server's place.

A value is read whole (``read_value``) and returned as its raw bytes, so the relay forwards
exactly what it was sent. What one value may hold is bounded by a ``Hold``: its own bytes
(``limit``, checked on each length line before its body is read) and, through a ``Budget``
shared by every connection, the bytes all values being read or held take together.
``command_name`` is the first element of a request array.
``empty_cache_reply`` is what the relay answers when the server failed: the answers of a
working, empty Redis to the commands sccache sends (PING, GET, SET, SETEX), so a compile goes
on at once as a miss and its write is dropped.
"""

from __future__ import annotations

import re
import socket
import threading
import time

MAX_LINE = 64 * 1024
MAX_BULK = 1 << 30
MAX_ELEMENTS = 1 << 20
MAX_DEPTH = 8
# A length as Redis reads one (string2ll): ASCII digits, no sign but the -1 of a null, no
# leading zero, no space or underscore; int() would take all of those, and read another request.
LENGTH = re.compile(rb"-1|0|[1-9][0-9]{0,18}")
_LINE_TYPES = frozenset(b"+-:_,#(")
_BULK_TYPES = frozenset(b"$=!")
_AGGREGATE_TYPES = frozenset(b"*~>%|")


class ProtocolError(OSError):
    """Bytes that are no RESP value (or one past archwheel's limits)."""


class TooLarge(ProtocolError):
    """A value past its ``Hold``'s limit (its length line said so; the body was not read)."""


class Busy(ProtocolError):
    """A value the shared ``Budget`` has no room for now."""


class Budget:
    """Bytes that every connection's values may hold together (``total``)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.held = 0
        self._lock = threading.Lock()

    def take(self, size: int) -> bool:
        """Room for ``size`` more bytes, taken; False when there is none."""
        with self._lock:
            if self.held + size > self.total:
                return False
            self.held += size
            return True

    def give(self, size: int) -> None:
        """``size`` bytes taken before, given back."""
        with self._lock:
            self.held -= size


class Hold:
    """The bytes one value being read holds: at most ``limit``, each taken from ``budget``
    (when given) before it is read; ``release`` gives them back once the value is sent on."""

    def __init__(self, limit: int, budget: Budget | None = None) -> None:
        self.limit = limit
        self.budget = budget
        self.size = 0

    def charge(self, size: int) -> None:
        """Room for ``size`` more bytes of the value; ``TooLarge`` or ``Busy`` where none."""
        if self.size + size > self.limit:
            raise TooLarge(f"a value over {self.limit} bytes")
        if self.budget is not None and not self.budget.take(size):
            raise Busy("the relay holds as many bytes as it may")
        self.size += size

    def release(self) -> None:
        """Give every byte held back to the budget (the value was sent on or dropped)."""
        if self.budget is not None:
            self.budget.give(self.size)
        self.size = 0


class Reader:
    """A buffered reader over a socket; each read may carry a deadline (``time.monotonic()``
    value) for the whole value, not for each ``recv``."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()

    def _fill(self, deadline: float | None) -> None:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the server did not answer in time")
            self.sock.settimeout(left)
        else:
            self.sock.settimeout(None)
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("closed")
        self.buffer += chunk

    def line(self, deadline: float | None) -> bytes:
        """The next RESP line, its CRLF included, read by ``deadline`` (monotonic; None: no
        limit); a line past ``MAX_LINE`` is a ``ProtocolError``."""
        while True:
            end = self.buffer.find(b"\r\n")
            if end >= 0:
                out = bytes(self.buffer[: end + 2])
                del self.buffer[: end + 2]
                return out
            if len(self.buffer) > MAX_LINE:
                raise ProtocolError("a RESP line past its limit")
            self._fill(deadline)

    def exact(self, size: int, deadline: float | None) -> bytes:
        """The next ``size`` bytes, read by ``deadline`` (monotonic; None: no limit)."""
        while len(self.buffer) < size:
            self._fill(deadline)
        out = bytes(self.buffer[:size])
        del self.buffer[:size]
        return out


def _length(line: bytes, limit: int) -> int:
    if not LENGTH.fullmatch(line[1:-2]):
        raise ProtocolError("a RESP length that is no number")
    value = int(line[1:-2])
    if value < -1 or value > limit:
        raise ProtocolError("a RESP length past its limit")
    return value


def read_value(
    reader: Reader, deadline: float | None = None, depth: int = 0, hold: Hold | None = None
) -> bytes:
    """One whole RESP value's raw bytes; ``ProtocolError`` for bytes that are none. With
    ``hold``, every line and body is charged to it before it is kept (``TooLarge``, ``Busy``);
    the caller releases it."""
    if depth > MAX_DEPTH:
        raise ProtocolError("RESP nested too deep")
    line = reader.line(deadline)
    if hold is not None:
        hold.charge(len(line))
    kind = line[0]
    if kind in _LINE_TYPES:
        return line
    if kind in _BULK_TYPES:
        size = _length(line, MAX_BULK)
        if size < 0:
            return line
        if hold is not None:
            hold.charge(size + 2)
        body = reader.exact(size + 2, deadline)
        if not body.endswith(b"\r\n"):
            raise ProtocolError("a RESP bulk string without its end")
        return line + body
    if kind in _AGGREGATE_TYPES:
        count = _length(line, MAX_ELEMENTS)
        parts = [line]
        for _ in range(max(count, 0) * (2 if kind in b"%|" else 1)):
            parts.append(read_value(reader, deadline, depth + 1, hold))
        return b"".join(parts)
    raise ProtocolError("bytes that are no RESP value")


def command_name(request: bytes) -> str:
    """The command of a request array (``*N\\r\\n$L\\r\\nNAME...``), upper case; "" if none."""
    lines = request.split(b"\r\n", 3)
    if len(lines) < 3 or not request.startswith(b"*") or not lines[1].startswith(b"$"):
        return ""
    return lines[2][:32].decode("ascii", "replace").upper()


def empty_cache_reply(request: bytes) -> bytes:
    """What an empty, working Redis answers to the commands sccache sends."""
    name = command_name(request)
    if name == "PING":
        return b"+PONG\r\n"
    if name in ("GET", "GETRANGE", "GETDEL", "GETEX"):
        return b"$-1\r\n"
    if name in ("EXISTS", "DEL", "UNLINK", "STRLEN", "TTL", "EXPIRE"):
        return b":0\r\n"
    if name in ("SET", "SETEX", "PSETEX", "SELECT", "AUTH", "CLIENT", "HELLO", "RESET"):
        return b"+OK\r\n"
    return b"-ERR archwheel's relay: the cache server is unavailable\r\n"
