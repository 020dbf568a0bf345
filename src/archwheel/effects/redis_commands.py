"""The Redis commands archwheel's relay lets a compile container send: sccache's, and no other.

The relay (``redis_relay.UnixRelay``) adds the host's password to what it forwards, so what it
forwards is what the container may do with the server. sccache 0.16.0 reaches Redis through
OpenDAL's ``redis`` service on the ``redis`` crate (redis-rs 0.32.7); a build's traffic through
the relay, recorded against a real redis-server (a compile written to the cache, then the same
compile from another machine's empty local cache), is exactly:

- at connect: ``CLIENT SETINFO LIB-NAME redis-rs`` and ``CLIENT SETINFO LIB-VER 0.32.7``
  (redis-rs; ``AUTH`` and ``SELECT`` only when its URL has a password or a database, which the
  container's never has: the relay sends both itself), then ``PING`` before every request
  (OpenDAL's pool checks the connection);
- ``GET .sccache_check`` and ``SET .sccache_check "Hello, World!"`` (sccache's start-up check
  that the cache is writable), ``GET KEY`` for a lookup, ``SET KEY VALUE`` for a new entry;
  ``SETEX KEY SECONDS VALUE`` instead of ``SET`` when sccache is given an expiration (OpenDAL's
  ``set`` with ``default_ttl``). ``KEY`` is sccache's ``A/B/C/HASH``: the first three
  characters of the entry's hex digest, then the digest.

So ``allowed`` forwards ``PING`` (bare), ``GET KEY``, ``SET KEY VALUE`` (no options) and
``SETEX KEY SECONDS VALUE`` with ``KEY`` of sccache's shape; answers ``CLIENT SETINFO`` itself
(``+OK``: nothing to tell the server); and answers everything else ``-ERR`` without reaching the
server: every other command (``FLUSHALL``, ``CONFIG``, ``SHUTDOWN``, ``KEYS``, ``DEL``,
``EVAL``, ...), the container's own ``AUTH``, ``SELECT`` and ``HELLO``, another ``CLIENT``
subcommand, ``SET`` with options, and a key of another shape (other data on a shared server
stays out of reach).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from archwheel.effects.resp import LENGTH

MAX_ARGS = 8  # sccache sends at most 4 (SETEX KEY SECONDS VALUE)
CHECK_KEY = b".sccache_check"
_KEY = re.compile(rb"[0-9a-f]/[0-9a-f]/[0-9a-f]/[0-9a-f]{32,128}")
_SECONDS = re.compile(rb"[1-9][0-9]{0,9}")
_CLIENT_INFO = (b"LIB-NAME", b"LIB-VER")
MAX_CLIENT_INFO = 128


@dataclass(frozen=True)
class Verdict:
    """``forward``: send the request on; else ``answer`` it on the host."""

    forward: bool
    answer: bytes = b""


FORWARD = Verdict(True)
OK = Verdict(False, b"+OK\r\n")


def _refused(why: str) -> Verdict:
    return Verdict(False, f"-ERR archwheel's relay: {why}\r\n".encode())


def request_args(request: bytes) -> list[bytes] | None:
    """The arguments of a request read whole (``resp.read_value``): an array of 1 to
    ``MAX_ARGS`` bulk strings; None for anything else (an inline command, nesting, other types)."""
    if not request.startswith(b"*"):
        return None
    head, _, rest = request.partition(b"\r\n")
    if not LENGTH.fullmatch(head[1:]):
        return None
    count = int(head[1:])
    if not 1 <= count <= MAX_ARGS:
        return None
    args = []
    at = 0
    view = memoryview(rest)
    for _ in range(count):
        end = rest.find(b"\r\n", at)
        if end < 0 or rest[at : at + 1] != b"$":
            return None
        if not LENGTH.fullmatch(rest[at + 1 : end]):
            return None
        size = int(rest[at + 1 : end])
        start = end + 2
        if size < 0 or rest[start + size : start + size + 2] != b"\r\n":
            return None
        args.append(bytes(view[start : start + size]))
        at = start + size + 2
    return args if at == len(rest) else None


def _key_ok(key: bytes) -> bool:
    return key == CHECK_KEY or _KEY.fullmatch(key) is not None


def allowed(args: list[bytes] | None) -> Verdict:
    """What the relay does with a request (see the module)."""
    if not args:
        return _refused("not a request array of bulk strings")
    name = args[0].upper()
    shown = name[:32].decode("ascii", "replace")
    if name == b"PING":
        return FORWARD if len(args) == 1 else _refused("PING takes no argument here")
    if name == b"CLIENT":
        if (
            len(args) == 4
            and args[1].upper() == b"SETINFO"
            and args[2].upper() in _CLIENT_INFO
            and len(args[3]) <= MAX_CLIENT_INFO
        ):
            return OK
        return _refused("of CLIENT only SETINFO LIB-NAME/LIB-VER is taken")
    if name not in (b"GET", b"SET", b"SETEX"):
        return _refused(f"{shown} is not allowed (the cache takes PING, GET, SET, SETEX)")
    shape = {b"GET": 2, b"SET": 3, b"SETEX": 4}[name]
    if len(args) != shape:
        return _refused(f"{shown} with {len(args) - 1} arguments is not allowed")
    if not _key_ok(args[1]):
        return _refused(f"{shown}: a key that is no compiler cache entry's")
    if name == b"SETEX" and _SECONDS.fullmatch(args[2]) is None:
        return _refused("SETEX: seconds must be a positive whole number")
    return FORWARD
