"""RESP requests as sccache's Redis client writes them, for the relay's tests."""

from __future__ import annotations

KEY = "a/b/c/abc" + "0" * 61  # sccache's shape: three hex characters, then the digest


def command(*parts: str | bytes) -> bytes:
    raw = [p.encode() if isinstance(p, str) else p for p in parts]
    return b"*%d\r\n" % len(raw) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in raw)


SET = command("SET", KEY, "value")
GET = command("GET", KEY)
