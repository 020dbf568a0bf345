"""One reading of a compile farm's scheduler URL (effects/farm_url.py) for the plan, the probe
and the route: what it takes, in canonical form, and what it refuses, one line each."""

from __future__ import annotations

import pytest

from archwheel.effects.farm_route import FarmRoute, scheduler_endpoint
from archwheel.effects.farm_url import (
    BadTarget,
    Endpoint,
    parse_authority,
    parse_scheduler_url,
)
from archwheel.errors import UsageError
from archwheel.wheelbuild.compile.dist_farm import dist_farm_option
from archwheel.wheelbuild.compile.dist_farm import parse_scheduler_url as plan_url


@pytest.mark.parametrize(
    ("text", "canonical", "endpoint"),
    [
        ("http://127.0.0.1:10600", "http://127.0.0.1:10600", Endpoint("127.0.0.1", 10600)),
        ("HTTPS://Farm.Example./", "https://farm.example", Endpoint("farm.example", 443)),
        ("http://[0:0::1]:1", "http://[::1]:1", Endpoint("::1", 1)),
        ("http://sccache_scheduler:65535", "http://sccache_scheduler:65535",
         Endpoint("sccache_scheduler", 65535)),
        ("http://a-b.c9.example", "http://a-b.c9.example", Endpoint("a-b.c9.example", 80)),
    ],
)  # fmt: skip
def test_scheduler_urls_are_read_canonically(text: str, canonical: str, endpoint: Endpoint) -> None:
    parsed = parse_scheduler_url(text)
    assert str(parsed) == canonical and parsed.endpoint == endpoint
    assert str(parse_scheduler_url(canonical)) == canonical  # a fixed point
    assert plan_url(text) == canonical
    FarmRoute(scheduler_endpoint(plan_url(text))[0])  # what the plan takes, the route takes


BAD_URLS = [
    "http://ex!ample:1",  # not a DNS name
    "http://ex%61mple:1",  # percent-encoding
    "http://%31%32%37.0.0.1:1",
    "http://host:0",  # port 0
    "http://host:65536",
    "http://host:+80",
    "http://host:８０",  # a non-ASCII digit
    "http://host:",
    "http://ｈｏｓｔ:1",  # a non-ASCII host
    "http://user@host:1",  # credentials
    "http://user:pw@host:1",
    "ftp://host",
    "host:10600",
    "http://",
    "http://:80",
    "http://host/api",  # a path
    "http://host/?x",
    "http://host#f",
    "http://-host:1",
    "http://host-.example",
    "http://a..b",
    "http://" + "a" * 64 + ".example",
    "http://1.2.3",  # numeric last label: not a name, not an address
    "http://010.0.0.1",  # leading zeros
    "http://256.1.1.1",
    "http://[::1",
    "http://[::1]x:1",
    "http://[fe80::1%25eth0]:1",  # a zone
    "http://::1:80",  # IPv6 without brackets
    "http://host name:1",
    "http://host\t:1",
    "http://host\n:1",
]


@pytest.mark.parametrize("text", BAD_URLS)
def test_bad_scheduler_urls_are_refused_by_the_plan_and_the_route(text: str) -> None:
    with pytest.raises(BadTarget) as caught:
        parse_scheduler_url(text)
    assert "\n" not in str(caught.value) and "pw" not in str(caught.value)
    with pytest.raises(UsageError) as usage:
        plan_url(text)
    assert "\n" not in str(usage.value) and "pw" not in str(usage.value)
    with pytest.raises(BadTarget):
        scheduler_endpoint(text)


def test_the_plans_option_refuses_what_the_route_would(tmp_path: object) -> None:
    from pathlib import Path

    token = Path(str(tmp_path)) / "token"
    token.write_text("t0ken\n")
    with pytest.raises(UsageError):
        dist_farm_option("http://ex!ample:1", token, required=False)
    farm = dist_farm_option("http://Farm.Example:8443/", token, required=False)
    assert farm is not None and farm.scheduler_url == "http://farm.example:8443"


@pytest.mark.parametrize(
    ("text", "endpoint"),
    [
        ("127.0.0.1:80", Endpoint("127.0.0.1", 80)),
        ("[::1]:10501", Endpoint("::1", 10501)),
        ("[0:0::1]:10501", Endpoint("::1", 10501)),
        ("Farm.Example.:443", Endpoint("farm.example", 443)),
    ],
)
def test_authorities_are_normalised(text: str, endpoint: Endpoint) -> None:
    assert parse_authority(text) == endpoint


@pytest.mark.parametrize(
    "text",
    ["127.0.0.1", "::1:80", "host:0", "host:65536", "host:x", ":80", "a b:80", "h/x:1", "h%41:1",
     "[::1]", "[::1]:", "h:1:2", "h!:1", "h:١"],
)  # fmt: skip
def test_bad_authorities_are_refused(text: str) -> None:
    with pytest.raises(BadTarget):
        parse_authority(text)
