"""The farm route's reading of HTTP/1.1: strict, so that what it forwards is only what it read.

The route (``farm_proxy``) never copies a request line or header on: it reads the head here
and writes a new one from what it understood. A head is refused (``BadRequest``, one line, a
``400`` and nothing forwarded) for anything another reader could take differently:

- a byte that is not ASCII, a bare CR or LF, a NUL or another control character (HTAB in a
  value aside) anywhere in the head;
- a request line that is not ``METHOD TARGET HTTP/1.x`` with single spaces, a method that is
  not a token, a target with spaces or controls;
- a header name that is not an RFC 9110 token (so also whitespace before the colon, and a
  folded line, which starts with whitespace);
- a second ``Content-Length``, or one that is not ASCII digits, or past the body limit;
- any ``Transfer-Encoding`` (sccache's client sends every body with ``Content-Length``).

``answer_body`` reads the body of the scheduler's answer (``Content-Length``, chunked, or to
the end) for the route to learn from; an answer it cannot read whole teaches nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", re.ASCII)
_VALUE = re.compile(r"[\x20-\x7e\t]*", re.ASCII)
_TARGET = re.compile(r"[\x21-\x7e]+", re.ASCII)
_DIGITS = re.compile(r"[0-9]{1,19}", re.ASCII)
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")


class BadRequest(ValueError):
    """A request head the route refuses to read (one line, no header value in it)."""


@dataclass(frozen=True)
class RequestHead:
    """A request head as read: the method, the target, each header (its name in lower case,
    its value without surrounding whitespace) and the body's length (0 without one)."""

    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    content_length: int

    def value(self, name: str) -> str | None:
        """The value of header ``name`` (lower case); None without it."""
        return next((value for key, value in self.headers if key == name), None)


def parse_request_head(head: bytes, body_limit: int) -> RequestHead:
    """Read ``head`` (up to and with its closing blank line); ``BadRequest`` for anything the
    module refuses."""
    if not head.endswith(b"\r\n\r\n"):
        raise BadRequest("a request head without its blank line")
    try:
        text = head[:-4].decode("ascii")
    except UnicodeDecodeError:
        raise BadRequest("a byte that is not ASCII in the request head") from None
    lines = text.split("\r\n")
    if any(c in line for line in lines for c in "\r\n\0"):
        raise BadRequest("a bare CR, LF or a NUL in the request head")
    parts = lines[0].split(" ")
    if (
        len(parts) != 3
        or not TOKEN.fullmatch(parts[0])
        or not _TARGET.fullmatch(parts[1])
        or parts[2] not in ("HTTP/1.1", "HTTP/1.0")
    ):
        raise BadRequest(f"not an HTTP/1 request line: {lines[0][:80]!r}")
    headers: list[tuple[str, str]] = []
    length: int | None = None
    for line in lines[1:]:
        name, sep, raw = line.partition(":")
        if not sep or not TOKEN.fullmatch(name):
            raise BadRequest(f"a header name that is not a token: {name[:40]!r}")
        value = raw.strip(" \t")
        if not _VALUE.fullmatch(value):
            raise BadRequest(f"a control character in header {name[:40]!r}")
        key = name.lower()
        if key == "transfer-encoding":
            raise BadRequest("a Transfer-Encoding: the route takes bodies with Content-Length")
        if key == "content-length":
            if length is not None:
                raise BadRequest("more than one Content-Length")
            if not _DIGITS.fullmatch(value):
                raise BadRequest("a Content-Length that is not ASCII digits")
            length = int(value)
            if length > body_limit:
                raise BadRequest(f"a request body over {body_limit} bytes")
        headers.append((key, value))
    return RequestHead(parts[0], parts[1], tuple(headers), length or 0)


def _dechunk(data: bytes) -> bytes | None:
    body = bytearray()
    at = 0
    while True:
        end = data.find(b"\r\n", at)
        if end < 0:
            return None
        size_text = data[at:end].split(b";", 1)[0].strip()
        if not _HEX.fullmatch(size_text):
            return None
        size = int(size_text, 16)
        at = end + 2
        if size == 0:
            return bytes(body)
        if at + size + 2 > len(data) or data[at + size : at + size + 2] != b"\r\n":
            return None
        body += data[at : at + size]
        at += size + 2


def answer_body(answer: bytes) -> bytes | None:
    """The body of an HTTP/1 answer read whole: by its ``Content-Length``, chunked, or to the
    end; None when it is not plainly one (two lengths, a length and chunks, another transfer
    or content coding, fewer bytes than it says)."""
    end = answer.find(b"\r\n\r\n")
    if end < 0:
        return None
    length: int | None = None
    chunked = False
    for line in answer[:end].split(b"\r\n")[1:]:
        name, _, raw = line.partition(b":")
        key, value = name.strip().lower(), raw.strip().lower()
        if key == b"content-length":
            if length is not None or not value.isdigit() or len(value) > 19:
                return None
            length = int(value)
        elif key == b"transfer-encoding":
            if value != b"chunked" or chunked:
                return None
            chunked = True
        elif key == b"content-encoding" and value != b"identity":
            return None
    body = answer[end + 4 :]
    if chunked:
        return None if length is not None else _dechunk(body)
    if length is None:
        return body
    return body[:length] if len(body) >= length else None
