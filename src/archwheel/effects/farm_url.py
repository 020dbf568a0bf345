"""A compile farm's scheduler URL and the addresses on the way to it: one reading for all.

``--dist-scheduler`` (``wheelbuild.compile.dist_farm.parse_scheduler_url``, at plan time), the probe
before the build and the route the compile container reaches the farm through
(``farm_route``/``farm_proxy``) read the scheduler's URL with ``parse_scheduler_url`` here, so
a URL the plan accepts is one the route takes, and one the route would refuse is refused when
the plan is made (exit 2), never after the image work.

What it takes: ``http://HOST[:PORT]`` or ``https://HOST[:PORT]`` (a trailing ``/`` is
dropped), the scheme in any case. ``HOST`` is an IPv4 literal (four decimal parts, no leading
zeros), an IPv6 literal in brackets (no zone), or a DNS name: dot-separated labels of ASCII
letters, digits, ``-`` and ``_`` (1-63 each, no ``-`` at either end, 253 in all, one trailing
dot allowed and dropped), whose last label is not all digits (``1.2.3`` is no name and no
address). ``PORT`` is 1-65535 in ASCII digits. Refused, each with one line: another scheme, no
host, credentials (``user@``), a path, query or fragment, percent-encoding or any other
character in the host, port 0 or past 65535. The same host and port rules read the
``HOST:PORT`` of a ``CONNECT`` (``parse_authority``).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?", re.ASCII)
_PORT = re.compile(r"[0-9]{1,5}", re.ASCII)
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<authority>[^/?#]*)(?P<rest>.*)",
                  re.DOTALL)  # fmt: skip


class BadTarget(ValueError):
    """A URL, request target or address that is not one the farm's route takes (one line)."""


@dataclass(frozen=True)
class Endpoint:
    """A host (a DNS name in lower case without a trailing dot, or an IP address in its
    canonical form, without brackets) and a port."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def ip(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
        """The host as an IP address; None for a DNS name."""
        try:
            return ipaddress.ip_address(self.host)
        except ValueError:
            return None


def _shown(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:80] + "...")


def parse_host(text: str) -> str:
    """A host as a URL or ``CONNECT`` writes it (``[V6]`` for IPv6): canonical; ``BadTarget``
    for anything else (see the module)."""
    if text.startswith("[") and text.endswith("]"):
        if "%" in text:  # a zone: this machine's own interfaces
            raise BadTarget(f"an IPv6 zone: {_shown(text)}")
        try:
            return str(ipaddress.IPv6Address(text[1:-1]))
        except ValueError:
            raise BadTarget(f"not an IPv6 address: {_shown(text)}") from None
    if not text:
        raise BadTarget("no host")
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        pass
    name = text.lower()
    name = name[:-1] if name.endswith(".") else name
    labels = name.split(".")
    if (
        len(name) > 253
        or not all(_LABEL.fullmatch(label) for label in labels)
        or labels[-1].isdigit()
    ):
        raise BadTarget(f"not a host name or IP address: {_shown(text)}")
    return name


def parse_port(text: str) -> int:
    """A port: 1-65535 in ASCII digits; ``BadTarget`` else."""
    if not _PORT.fullmatch(text) or not 0 < int(text) < 65536:
        raise BadTarget(f"not a port (1-65535): {_shown(text)}")
    return int(text)


def _split_authority(text: str) -> tuple[str, str | None]:
    """``HOST[:PORT]`` into the host as written and the port text (None: no port)."""
    if text.startswith("["):
        close = text.find("]")
        if close < 0 or (text[close + 1 :] and not text[close + 1 :].startswith(":")):
            raise BadTarget(f"not HOST:PORT: {_shown(text)}")
        host, rest = text[: close + 1], text[close + 1 :]
        return host, (rest[1:] if rest else None)
    host, sep, port = text.partition(":")
    if ":" in port:
        raise BadTarget(f"an IPv6 address goes in brackets: {_shown(text)}")
    return host, (port if sep else None)


def parse_authority(text: str) -> Endpoint:
    """``HOST:PORT`` (``[V6]:PORT``), as a ``CONNECT`` names it: the port is required."""
    host, port = _split_authority(text)
    if port is None:
        raise BadTarget(f"not HOST:PORT: {_shown(text)}")
    return Endpoint(parse_host(host), parse_port(port))


@dataclass(frozen=True)
class SchedulerUrl:
    """A scheduler's URL as read: its scheme, endpoint (the scheme's port when none was
    given) and whether the URL named the port. ``str`` is the URL in canonical form."""

    scheme: str
    endpoint: Endpoint
    port_given: bool

    @property
    def tls(self) -> bool:
        """Whether the scheduler speaks HTTPS."""
        return self.scheme == "https"

    def __str__(self) -> str:
        host = self.endpoint.host
        shown = f"[{host}]" if ":" in host else host
        return f"{self.scheme}://{shown}" + (f":{self.endpoint.port}" if self.port_given else "")


def parse_scheduler_url(text: str) -> SchedulerUrl:
    """``http(s)://HOST[:PORT]`` (see the module); ``BadTarget`` with one line else, which never
    repeats credentials."""
    match = _URL.fullmatch(text)
    if match is None:
        raise BadTarget("not an http(s) URL")
    scheme = match["scheme"].lower()
    if scheme not in DEFAULT_PORTS:
        raise BadTarget(f"not an http(s) URL (the scheme is {_shown(scheme)})")
    authority = match["authority"]
    if "@" in authority:
        raise BadTarget("credentials in the URL: the token goes in the token file")
    if match["rest"] not in ("", "/"):
        raise BadTarget("a path, query or fragment is not supported")
    host, port = _split_authority(authority)
    number = DEFAULT_PORTS[scheme] if port is None else parse_port(port)
    return SchedulerUrl(scheme, Endpoint(parse_host(host), number), port is not None)


def parse_absolute(target: str) -> tuple[Endpoint, str]:
    """An absolute-form proxy request target ``http://HOST[:PORT]/PATH``: the endpoint and the
    path as written (its query too); ``https`` comes as a ``CONNECT``, never like this."""
    match = _URL.fullmatch(target)
    if match is None or match["scheme"].lower() != "http":
        raise BadTarget(f"not an absolute http target: {_shown(target)}")
    authority = match["authority"]
    if "@" in authority:
        raise BadTarget("credentials in the target")
    host, port = _split_authority(authority)
    endpoint = Endpoint(parse_host(host), 80 if port is None else parse_port(port))
    return endpoint, match["rest"] or "/"
