"""sccache 0.16.0's scheduler answers as its client reads them (bincode 1: little-endian,
``u32`` enum variants, ``u64`` lengths), written by hand for tests of the farm route: an
``alloc_job`` answer naming a build server, and a refusal."""

from __future__ import annotations

import ipaddress
import struct


def _vector(data: bytes) -> bytes:
    return struct.pack("<Q", len(data)) + data


def alloc_job_body(
    server: str, *, auth: bytes = b"eyJ.job-token.x", job_id: int = 7, digest: bytes = b"d" * 32
) -> bytes:
    """``AllocJobHttpResponse::Success`` allocating job ``job_id`` to ``server``
    (``IP:PORT`` or ``[V6]:PORT``)."""
    host, _, port = server.rpartition(":")
    ip = ipaddress.ip_address(host.strip("[]"))
    family = struct.pack("<I", 0 if ip.version == 4 else 1)
    return (
        struct.pack("<I", 0)
        + _vector(auth)
        + struct.pack("<Q", job_id)
        + family
        + ip.packed
        + struct.pack("<H", int(port))
        + b"\x01"
        + _vector(digest)
    )


def alloc_job_fail(message: bytes = b"no servers") -> bytes:
    """``AllocJobHttpResponse::Fail { msg }``."""
    return struct.pack("<I", 1) + _vector(message)


def http_answer(body: bytes, status: int = 200) -> bytes:
    """An HTTP/1.1 answer with ``body`` (an octet stream, as the scheduler answers)."""
    return (
        f"HTTP/1.1 {status} X\r\nContent-Type: application/octet-stream\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
