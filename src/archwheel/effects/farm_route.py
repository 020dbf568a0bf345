"""Where a compile container may go on its way to a compile farm: the allowlist of the route.

sccache's farm client (``sccache`` 0.16.0, reqwest 0.12 underneath) speaks plain HTTP to the
scheduler (``http://HOST:PORT/api/v1/scheduler/...``) and HTTPS to each build server
(``https://IP:PORT/api/v1/distserver/...``, a self-signed certificate the client fetches from
the scheduler), and honours ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``NO_PROXY`` from its
environment. Through an HTTP proxy the first are absolute-form requests the proxy reads, the
second ``CONNECT IP:PORT`` tunnels it cannot read. ``FarmRoute`` decides each of them:

- a request is let through only to the scheduler's own ``HOST:PORT`` and only under
  ``/api/v1/scheduler/`` (the paths sccache's client asks);
- a ``CONNECT`` only to the scheduler's ``HOST:PORT`` or to a build server the scheduler has
  vouched for.

How the build servers become known: the scheduler's status (``/api/v1/scheduler/status``)
gives only counts in 0.16.0, no addresses, and its ``alloc_job`` answer (which names the server
of each job) is bincode, a format of sccache's Rust types that changes with them. But before it
first connects to a server, the client asks the scheduler for that server's certificate,
``GET /api/v1/scheduler/server_certificate/IP:PORT`` (it needs it to trust the server's TLS),
and the scheduler answers 200 only for a server it has registered. So a server becomes
reachable when that request passes through the route and the scheduler answers it 200
(``learn``): the client names the address, the scheduler vouches for it, and a container that
asks for the certificate of an address the scheduler does not know learns nothing. This holds
while the route lives at least as long as the client's daemon (it keeps certificates in memory
only), which is the case when both live for one build.
"""

from __future__ import annotations

import ipaddress
import threading
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

SCHEDULER_PREFIX = "/api/v1/scheduler/"
CERTIFICATE_PREFIX = SCHEDULER_PREFIX + "server_certificate/"
MAX_SERVERS = 4096  # build servers one route learns at most: a farm, not the internet


class BadTarget(ValueError):
    """A request target or an address that is not ``HOST:PORT`` (one line)."""


@dataclass(frozen=True)
class Endpoint:
    """A host (lower case; an IP address in its canonical form, without brackets) and port."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def _host(text: str) -> str:
    host = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if not host:
        raise BadTarget("no host")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if not all(c.isalnum() or c in "-._" for c in host):
        raise BadTarget(f"not a host name: {host[:60]!r}")
    return host.lower().rstrip(".")


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise BadTarget(f"not a port: {text[:10]!r}")
    return int(text)


def parse_authority(text: str) -> Endpoint:
    """``HOST:PORT`` (``[V6]:PORT`` for IPv6), as a ``CONNECT`` names it; ``BadTarget`` else."""
    host, sep, port = text.rpartition(":")
    if not sep or (":" in host and not host.startswith("[")):
        raise BadTarget(f"not HOST:PORT: {text[:80]!r}")
    return Endpoint(_host(host), _port(port))


def scheduler_endpoint(url: str) -> tuple[Endpoint, bool]:
    """The scheduler's ``HOST:PORT`` in ``http(s)://HOST[:PORT]`` and whether it is HTTPS."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadTarget(f"not an http(s) URL: {url[:80]!r}")
    tls = parts.scheme == "https"
    try:
        port = parts.port or (443 if tls else 80)
    except ValueError:
        raise BadTarget(f"not a port in {url[:80]!r}") from None
    return Endpoint(_host(parts.hostname), port), tls


def parse_absolute(target: str) -> tuple[Endpoint, str]:
    """An absolute-form request target ``http://HOST[:PORT]/PATH``: the endpoint and the path
    (with its query). Only ``http``: an ``https`` target comes as a ``CONNECT``."""
    parts = urlsplit(target)
    if parts.scheme != "http" or not parts.netloc:
        raise BadTarget(f"not an absolute http target: {target[:80]!r}")
    if "@" in parts.netloc:
        raise BadTarget("credentials in the target")
    try:
        port = parts.port or 80
    except ValueError:
        raise BadTarget(f"not a port in {target[:80]!r}") from None
    endpoint = Endpoint(_host(parts.hostname or ""), port)
    path = parts.path or "/"
    return endpoint, path + (f"?{parts.query}" if parts.query else "")


@dataclass(frozen=True)
class Decision:
    """Whether the route lets a request through, and if not why (one line, no secret)."""

    allowed: bool
    why: str = ""


class FarmRoute:
    """The allowlist: the scheduler's endpoint, and the build servers it vouched for.

    Thread-safe: the proxy decides and learns from many connections at once."""

    def __init__(self, scheduler: Endpoint) -> None:
        self.scheduler = scheduler
        self._servers: set[Endpoint] = set()
        self._lock = threading.Lock()

    @property
    def servers(self) -> frozenset[Endpoint]:
        """The build servers learned so far."""
        with self._lock:
            return frozenset(self._servers)

    def request(self, method: str, target: str) -> Decision:
        """Decide a proxied request line (``METHOD TARGET``)."""
        if method == "CONNECT":
            try:
                endpoint = parse_authority(target)
            except BadTarget as exc:
                return Decision(False, f"CONNECT {target[:80]!r}: {exc}")
            if endpoint == self.scheduler:
                return Decision(True)
            with self._lock:
                known = endpoint in self._servers
            if known:
                return Decision(True)
            return Decision(False, f"CONNECT {endpoint}: not the scheduler nor a build server")
        try:
            endpoint, path = parse_absolute(target)
        except BadTarget as exc:
            return Decision(False, f"{method[:10]} {target[:80]!r}: {exc}")
        if endpoint != self.scheduler:
            return Decision(False, f"{method[:10]} {endpoint}: not the scheduler")
        if not path.startswith(SCHEDULER_PREFIX):
            return Decision(False, f"{method[:10]} {path[:80]!r}: not a scheduler request")
        return Decision(True)

    def learn(self, path: str, status: int) -> Endpoint | None:
        """After the scheduler answered ``status`` to a request for ``path``: a certificate
        request it answered 200 makes that build server reachable (returned); else None."""
        if status != 200 or not path.startswith(CERTIFICATE_PREFIX):
            return None
        try:
            endpoint = parse_authority(unquote(path[len(CERTIFICATE_PREFIX) :].partition("?")[0]))
        except BadTarget:
            return None
        with self._lock:
            if endpoint not in self._servers and len(self._servers) >= MAX_SERVERS:
                return None
            self._servers.add(endpoint)
        return endpoint
