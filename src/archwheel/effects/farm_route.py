"""Where a compile container may go on its way to a compile farm: the allowlist of the route.

sccache's farm client (``sccache`` 0.16.0, reqwest underneath) speaks plain HTTP to the
scheduler and HTTPS to each build server (``https://IP:PORT/api/v1/distserver/...``, a
self-signed certificate the client fetches from the scheduler), and honours ``HTTP_PROXY`` /
``HTTPS_PROXY`` from its environment. Through an HTTP proxy the first are absolute-form
requests the proxy reads, the second ``CONNECT IP:PORT`` tunnels it cannot read. The client
asks the scheduler exactly three things (``src/dist/http.rs``, ``urls`` and ``client``):

- ``GET /api/v1/scheduler/status`` (``sccache --dist-status``);
- ``POST /api/v1/scheduler/alloc_job`` with its token: the scheduler answers (bincode) the
  job's id, its per-job token and the ``SocketAddr`` of the build server to send it to;
- ``GET /api/v1/scheduler/server_certificate/IP:PORT``, right after an ``alloc_job`` answer
  names a server whose certificate the client does not hold yet.

``FarmRoute`` decides each request by its method and its path, checked first
(``check_path``: no percent-encoding at all, no dot or empty segments, no backslash, query or
fragment; sccache writes none of them) and then matched whole against those three; the
certificate request only for a server an ``alloc_job`` answer of this route named. Every other
path (the server-only ``heartbeat_server`` and ``job_state``, the scheduler's other virtual
hosts, ``/``) is refused, and so is a ``CONNECT`` to the scheduler's own address (its API goes
as plain requests, which the route reads).

How a build server becomes reachable (``learn_allocation``): the scheduler's ``alloc_job``
answer, status 200, read as the client reads it (bincode 1, sccache's
``AllocJobHttpResponse::Success``: a per-job token of at most ``MAX_JOB_AUTH`` bytes, the job
id, the server's ``SocketAddr``, ``need_toolchain``, a certificate digest of at most
``MAX_DIGEST`` bytes, and nothing after); any other answer teaches nothing. A server is never
the scheduler's own address, nor an unspecified, link-local, multicast or reserved one, nor a
loopback one unless the scheduler itself is on loopback (a farm on this machine), and the route
learns at most ``MAX_SERVERS``. So a front that answers 200 to everything, or a scheduler that
names this machine's loopback, opens nothing. The route lives as long as the client's daemon
(one build), which keeps its certificates in memory only.
"""

from __future__ import annotations

import ipaddress
import re
import struct
import threading
from dataclasses import dataclass

from archwheel.effects.farm_url import (
    BadTarget,
    Endpoint,
    parse_absolute,
    parse_authority,
    parse_scheduler_url,
)

__all__ = [
    "ALLOC_JOB",
    "CERTIFICATE_PREFIX",
    "STATUS",
    "BadTarget",
    "Decision",
    "Endpoint",
    "FarmRoute",
    "check_path",
    "parse_absolute",
    "parse_alloc_job",
    "parse_authority",
    "scheduler_endpoint",
]

STATUS = "/api/v1/scheduler/status"
ALLOC_JOB = "/api/v1/scheduler/alloc_job"
CERTIFICATE_PREFIX = "/api/v1/scheduler/server_certificate/"
MAX_SERVERS = 4096  # build servers one route learns at most: a farm, not the internet
MAX_JOB_AUTH = 4096  # bytes of an alloc_job answer's per-job token (a JWT of about 200)
MAX_DIGEST = 64  # bytes of its certificate digest (SHA-256: 32)
_PATH_CHARS = re.compile(r"[A-Za-z0-9._~:\[\]/-]*", re.ASCII)


def scheduler_endpoint(url: str) -> tuple[Endpoint, bool]:
    """The scheduler's ``HOST:PORT`` in its URL and whether it is HTTPS (``farm_url``)."""
    parsed = parse_scheduler_url(url)
    return parsed.endpoint, parsed.tls


def check_path(path: str) -> str:
    """A request path as the route matches it: refused (``BadTarget``) unless plain, i.e.
    only letters, digits and ``._~:[]/-``, starting with ``/``, without empty, ``.`` or ``..``
    segments (so no percent-encoding, query, fragment or backslash either)."""
    if not path.startswith("/") or not _PATH_CHARS.fullmatch(path):
        raise BadTarget(f"not a plain path: {path[:80]!r}")
    segments = path[1:].split("/")
    if any(segment in ("", ".", "..") for segment in segments):
        raise BadTarget(f"empty or dot segments in the path: {path[:80]!r}")
    return path


class _Short(Exception):
    """The answer ended early, or a length in it is past its bound."""


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, size: int) -> bytes:
        if size < 0 or self.at + size > len(self.data):
            raise _Short
        self.at += size
        return self.data[self.at - size : self.at]

    def number(self, fmt: str) -> int:
        value: int = struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]
        return value

    def vector(self, limit: int) -> bytes:
        size = self.number("<Q")
        if size > limit:
            raise _Short
        return self.take(size)


def parse_alloc_job(body: bytes) -> Endpoint | None:
    """The build server an ``alloc_job`` answer's body allocates a job to, read as sccache
    0.16.0's client reads it (bincode 1: little-endian, ``u32`` variant indexes, ``u64``
    lengths): ``Success { job_alloc: { auth, job_id, server_id }, need_toolchain,
    cert_digest }`` and not a byte more. None for ``Fail``, or anything else."""
    reader = _Reader(body)
    try:
        if reader.number("<I") != 0:  # 1: Fail { msg }
            return None
        reader.vector(MAX_JOB_AUTH)
        reader.take(8)  # the job id
        family = reader.number("<I")
        if family == 0:
            host: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.IPv4Address(
                reader.take(4)
            )
        elif family == 1:
            host = ipaddress.IPv6Address(reader.take(16))
        else:
            return None
        port = reader.number("<H")
        if reader.take(1) not in (b"\x00", b"\x01"):
            return None
        reader.vector(MAX_DIGEST)
    except _Short:
        return None
    if reader.at != len(body) or port == 0:
        return None
    return Endpoint(str(host), port)


@dataclass(frozen=True)
class Decision:
    """Whether the route lets a request through (and as which of the client's requests:
    ``status``, ``alloc_job``, ``certificate``, ``connect``), and if not why (one line)."""

    allowed: bool
    why: str = ""
    kind: str = ""
    path: str = ""


def _refused(why: str) -> Decision:
    return Decision(False, why)


class FarmRoute:
    """The allowlist: the scheduler's endpoint (and, for a scheduler named by DNS, the
    addresses its name had when the route started, ``scheduler_ips``), and the build servers
    its ``alloc_job`` answers named.

    Thread-safe: the proxy decides and learns from many connections at once."""

    def __init__(
        self,
        scheduler: Endpoint,
        scheduler_ips: frozenset[ipaddress.IPv4Address | ipaddress.IPv6Address] = frozenset(),
    ) -> None:
        self.scheduler = scheduler
        own = scheduler.ip
        self._scheduler_ips = scheduler_ips | ({own} if own is not None else set())
        self._local = scheduler.host == "localhost" or any(
            _plain(ip).is_loopback for ip in self._scheduler_ips
        )
        self._servers: set[Endpoint] = set()
        self._lock = threading.Lock()

    @property
    def servers(self) -> frozenset[Endpoint]:
        """The build servers learned so far."""
        with self._lock:
            return frozenset(self._servers)

    def _is_scheduler(self, endpoint: Endpoint) -> bool:
        if endpoint == self.scheduler:
            return True
        ip = endpoint.ip
        return (
            endpoint.port == self.scheduler.port
            and ip is not None
            and _plain(ip) in {_plain(own) for own in self._scheduler_ips}
        )

    def request(self, method: str, target: str) -> Decision:
        """Decide a proxied request line (``METHOD TARGET``)."""
        shown = method[:10]
        if method == "CONNECT":
            try:
                endpoint = parse_authority(target)
            except BadTarget as exc:
                return _refused(f"CONNECT {target[:80]!r}: {exc}")
            with self._lock:
                known = endpoint in self._servers
            if known:
                return Decision(True, kind="connect")
            if self._is_scheduler(endpoint):
                return _refused(f"CONNECT {endpoint}: the scheduler is reached by its API only")
            return _refused(f"CONNECT {endpoint}: not a build server the scheduler allocated")
        try:
            endpoint, raw = parse_absolute(target)
            path = check_path(raw)
        except BadTarget as exc:
            return _refused(f"{shown} {target[:80]!r}: {exc}")
        if endpoint != self.scheduler:
            return _refused(f"{shown} {endpoint}: not the scheduler")
        if (method, path) == ("GET", STATUS):
            return Decision(True, kind="status", path=path)
        if (method, path) == ("POST", ALLOC_JOB):
            return Decision(True, kind="alloc_job", path=path)
        if method == "GET" and path.startswith(CERTIFICATE_PREFIX):
            try:
                server = parse_authority(path[len(CERTIFICATE_PREFIX) :])
            except BadTarget as exc:
                return _refused(f"{shown} {path[:80]!r}: {exc}")
            with self._lock:
                known = server in self._servers
            if known and path == CERTIFICATE_PREFIX + str(server):
                return Decision(True, kind="certificate", path=path)
            return _refused(f"{shown} {path[:80]!r}: not a server the scheduler allocated")
        return _refused(f"{shown} {path[:80]!r}: not a request of sccache's client")

    def vouchable(self, server: Endpoint) -> str:
        """Why ``server`` may not become reachable ('' when it may)."""
        ip = server.ip
        if ip is None:
            return "not an IP address"
        plain = _plain(ip)
        if self._is_scheduler(server):
            return "the scheduler's own address"
        if plain.is_unspecified or plain.is_multicast or plain.is_reserved:
            return "an unspecified, multicast or reserved address"
        if plain.is_link_local:
            return "a link-local address"
        if plain.is_loopback and not self._local:
            return "a loopback address while the scheduler is not on loopback"
        return ""

    def learn_allocation(self, status: int, body: bytes) -> Endpoint | None:
        """After the scheduler answered an ``alloc_job`` request: the build server it
        allocated the job to becomes reachable (returned); None when the answer names none
        the route may open (see the module)."""
        if status != 200:
            return None
        server = parse_alloc_job(body)
        if server is None or self.vouchable(server):
            return None
        with self._lock:
            if server not in self._servers and len(self._servers) >= MAX_SERVERS:
                return None
            self._servers.add(server)
        return server


def _plain(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An IPv4-mapped IPv6 address as its IPv4 address; any other as it is."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip
