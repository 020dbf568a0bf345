"""The farm route's allowlist (``FarmRoute``: exact paths and methods, servers learned from the
scheduler's ``alloc_job`` answers only) and its strict reading of request heads (``farm_head``),
as an attacker in the compile container would try them. The route over its socket against real
listeners is in tests/integration/farm/test_route_attacks.py; with a real farm in
tests/integration/farm/test_farm_route.py."""

from __future__ import annotations

import struct

import pytest

from archwheel.effects.farm_head import BadRequest, answer_body, parse_request_head
from archwheel.effects.farm_route import (
    ALLOC_JOB,
    CERTIFICATE_PREFIX,
    MAX_DIGEST,
    MAX_JOB_AUTH,
    MAX_SERVERS,
    STATUS,
    BadTarget,
    Endpoint,
    FarmRoute,
    check_path,
    parse_absolute,
    parse_alloc_job,
)
from tests.support.sccache_wire import alloc_job_body, alloc_job_fail

SCHED = Endpoint("10.0.0.1", 10600)
BASE = "http://10.0.0.1:10600"


def _learned(route: FarmRoute, server: str) -> FarmRoute:
    assert route.learn_allocation(200, alloc_job_body(server)) is not None
    return route


def test_absolute_targets() -> None:
    assert parse_absolute(f"{BASE}/api/v1/x?y=1") == (SCHED, "/api/v1/x?y=1")
    assert parse_absolute("http://farm") == (Endpoint("farm", 80), "/")
    for bad in ("https://10.0.0.1:10600/", "/api/v1/", "http://u:p@10.0.0.1:10600/",
                "http://10.0.0.1:0/", "http://10.0.0.1%3a10600/"):  # fmt: skip
        with pytest.raises(BadTarget):
            parse_absolute(bad)


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/scheduler/../../admin",
        "/api/v1/scheduler/./status",
        "/api/v1/scheduler/%2e%2e/x",
        "/api/v1/scheduler/%2E%2E/x",
        "/api/v1/scheduler/.%2e/x",
        "/api/v1/scheduler%2fstatus",
        "/api/v1/scheduler/%2Fstatus",
        "/api/v1/scheduler/status%00",
        "/api/v1/scheduler/status?x=1",
        "/api/v1/scheduler/status#x",
        "/api/v1/scheduler//status",
        "/api/v1/scheduler/status/",
        "/api/v1/scheduler\\status",
        "//api/v1/scheduler/status",
        "api/v1/scheduler/status",
        "/api/v1/scheduler/stat us",
        "/api/v1/scheduler/..",
    ],
)
def test_paths_are_checked_before_matching(path: str) -> None:
    with pytest.raises(BadTarget):
        check_path(path)
    decision = FarmRoute(SCHED).request("GET", BASE + path)
    assert not decision.allowed and "\n" not in decision.why


def test_only_sccaches_three_requests_are_let_through() -> None:
    route = _learned(FarmRoute(SCHED), "10.0.0.7:10501")
    allowed = [
        ("GET", f"{BASE}{STATUS}", "status"),
        ("POST", f"{BASE}{ALLOC_JOB}", "alloc_job"),
        ("GET", f"{BASE}{CERTIFICATE_PREFIX}10.0.0.7:10501", "certificate"),
        ("CONNECT", "10.0.0.7:10501", "connect"),
    ]
    for method, target, kind in allowed:
        decision = route.request(method, target)
        assert decision.allowed and decision.kind == kind, target
    refused = [
        ("POST", f"{BASE}{STATUS}"),  # the right path, another method
        ("GET", f"{BASE}{ALLOC_JOB}"),
        ("HEAD", f"{BASE}{STATUS}"),
        ("PUT", f"{BASE}{ALLOC_JOB}"),
        ("POST", f"{BASE}/api/v1/scheduler/heartbeat_server"),  # server-only
        ("POST", f"{BASE}/api/v1/scheduler/job_state/1"),
        ("GET", f"{BASE}/api/v1/scheduler/"),
        ("GET", f"{BASE}/api/v1/scheduler/status2"),
        ("GET", f"{BASE}/"),
        ("GET", f"{BASE}/api/v1/distserver/run_job/1"),
        ("GET", "http://10.0.0.1:10601/api/v1/scheduler/status"),  # another port
        ("GET", "http://10.0.0.2:10600/api/v1/scheduler/status"),  # another host
        ("GET", "http://other.example:10600/api/v1/scheduler/status"),  # another virtual host
        ("GET", "/api/v1/scheduler/status"),  # origin form: not a proxy request
        ("GET", f"{BASE}{CERTIFICATE_PREFIX}10.0.0.8:10501"),  # not allocated
        ("GET", f"{BASE}{CERTIFICATE_PREFIX}10.0.0.7:10502"),
        ("GET", f"{BASE}{CERTIFICATE_PREFIX}10.0.0.007:10501"),  # not canonical
        ("GET", f"{BASE}{CERTIFICATE_PREFIX}10.0.0.7:10501/x"),
        ("POST", f"{BASE}{CERTIFICATE_PREFIX}10.0.0.7:10501"),
        ("CONNECT", "10.0.0.1:10600"),  # the scheduler itself: its API goes as requests
        ("CONNECT", "10.0.0.7:10502"),  # the address, not the host
        ("CONNECT", "10.0.0.2:443"),
        ("CONNECT", "not an authority"),
    ]
    for method, target in refused:
        decision = route.request(method, target)
        assert not decision.allowed and decision.why and "\n" not in decision.why, target


def test_a_scheduler_named_by_dns_is_not_reached_by_its_address() -> None:
    import ipaddress

    route = FarmRoute(Endpoint("farm.example", 10600),
                      frozenset({ipaddress.ip_address("10.0.0.1")}))  # fmt: skip
    assert route.learn_allocation(200, alloc_job_body("10.0.0.1:10600")) is None
    assert not route.request("CONNECT", "10.0.0.1:10600").allowed
    assert not route.request("CONNECT", "farm.example:10600").allowed
    assert route.learn_allocation(200, alloc_job_body("10.0.0.1:10501")) is not None


def test_the_alloc_job_answer_is_read_as_sccache_writes_it() -> None:
    assert parse_alloc_job(alloc_job_body("10.0.0.7:10501")) == Endpoint("10.0.0.7", 10501)
    assert parse_alloc_job(alloc_job_body("[2001:db8::7]:10501")) == Endpoint("2001:db8::7", 10501)
    body = alloc_job_body("10.0.0.7:10501")
    for bad in [
        alloc_job_fail(),
        b"",
        body[:-1],  # short
        body + b"\x00",  # a byte after
        alloc_job_body("10.0.0.7:0"),
        alloc_job_body("10.0.0.7:1", auth=b"a" * (MAX_JOB_AUTH + 1)),
        alloc_job_body("10.0.0.7:1", digest=b"d" * (MAX_DIGEST + 1)),
        struct.pack("<I", 2) + body[4:],  # no such variant
        body[:-41] + b"\x02" + body[-40:],  # need_toolchain not a bool
        b"127.0.0.1:10501",
        b"HTTP/1.1 200 OK\r\n\r\n",
    ]:
        assert parse_alloc_job(bad) is None, bad[:40]
    huge = struct.pack("<I", 0) + struct.pack("<Q", 1 << 62)
    assert parse_alloc_job(huge) is None


@pytest.mark.parametrize(
    "server",
    ["127.0.0.1:10501", "127.9.9.9:1", "[::1]:1", "[::ffff:127.0.0.1]:1", "0.0.0.0:1", "[::]:1",
     "169.254.169.254:80", "[fe80::1]:1", "224.0.0.1:1", "255.255.255.255:1",
     "10.0.0.1:10600"],
)  # fmt: skip
def test_a_remote_scheduler_cannot_open_this_machine_or_itself(server: str) -> None:
    route = FarmRoute(SCHED)
    assert route.learn_allocation(200, alloc_job_body(server)) is None
    assert route.servers == frozenset()
    target = server
    assert not route.request("CONNECT", target).allowed
    assert not route.request("GET", f"{BASE}{CERTIFICATE_PREFIX}{server}").allowed


def test_a_scheduler_on_loopback_may_name_loopback_servers_but_not_itself() -> None:
    route = FarmRoute(Endpoint("127.0.0.1", 10600))
    assert route.learn_allocation(200, alloc_job_body("127.0.0.1:10501")) is not None
    for server in ("127.0.0.1:10600", "0.0.0.0:1", "169.254.0.1:1"):
        assert route.learn_allocation(200, alloc_job_body(server)) is None
    assert route.servers == {Endpoint("127.0.0.1", 10501)}
    assert FarmRoute(Endpoint("localhost", 1)).learn_allocation(
        200, alloc_job_body("127.0.0.1:2")
    ) == Endpoint("127.0.0.1", 2)


def test_only_a_200_alloc_job_answer_teaches() -> None:
    route = FarmRoute(SCHED)
    assert route.learn_allocation(201, alloc_job_body("10.0.0.7:1")) is None
    assert route.learn_allocation(404, alloc_job_body("10.0.0.7:1")) is None
    assert route.learn_allocation(200, alloc_job_fail()) is None
    assert route.servers == frozenset()


def test_the_route_learns_a_bounded_number_of_servers() -> None:
    route = FarmRoute(SCHED)
    for n in range(MAX_SERVERS + 5):
        route.learn_allocation(
            200, alloc_job_body(f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}:1")
        )
    assert len(route.servers) == MAX_SERVERS


GOOD_HEAD = (
    b"POST http://h:1/api/v1/scheduler/alloc_job HTTP/1.1\r\nHost: h:1\r\n"
    b"Content-Type: application/octet-stream\r\nContent-Length: 3\r\nAccept: */*\r\n\r\n"
)


def test_a_plain_head_is_read() -> None:
    head = parse_request_head(GOOD_HEAD, 100)
    assert (head.method, head.content_length) == ("POST", 3)
    assert head.value("content-type") == "application/octet-stream"


@pytest.mark.parametrize(
    "head",
    [
        GOOD_HEAD.replace(b"Accept: */*\r\n", b"Accept: */*\nX-Smuggled: 1\r\n"),  # bare LF
        GOOD_HEAD.replace(b"Accept: */*\r\n", b"Accept: */*\rGET /x HTTP/1.1\r\n"),  # bare CR
        GOOD_HEAD.replace(b"Accept: */*", b"Accept: *\x00/*"),  # NUL
        GOOD_HEAD.replace(b"Accept: */*", b"Accept: *\x01/*"),
        GOOD_HEAD.replace(b"Accept: */*", b"Acc(ept: */*"),  # not a token
        GOOD_HEAD.replace(b"Accept: */*", b"Accept : */*"),  # space before the colon
        GOOD_HEAD.replace(b"Accept: */*", b" folded"),  # obs-fold
        GOOD_HEAD.replace(b"Accept: */*", b"NoColon"),
        GOOD_HEAD.replace(b"Accept: */*", b": empty"),
        GOOD_HEAD.replace(b"Accept: */*", b"Content-Length: 3"),  # twice
        GOOD_HEAD.replace(b"Accept: */*", b"Content-length: 4"),
        GOOD_HEAD.replace(b"Content-Length: 3", b"Content-Length: \xb3"),  # a non-ASCII digit
        GOOD_HEAD.replace(b"Content-Length: 3", "Content-Length: ３".encode()),
        GOOD_HEAD.replace(b"Content-Length: 3", b"Content-Length: +3"),
        GOOD_HEAD.replace(b"Content-Length: 3", b"Content-Length: 3, 3"),
        GOOD_HEAD.replace(b"Content-Length: 3", b"Content-Length: 101"),  # past the limit
        GOOD_HEAD.replace(b"Content-Length: 3", b"Transfer-Encoding: chunked"),
        GOOD_HEAD.replace(b"Accept: */*", b"Transfer-Encoding: identity"),
        GOOD_HEAD.replace(b"Accept: */*", b"X: caf\xc3\xa9"),  # not ASCII
        GOOD_HEAD.replace(b"POST ", b"POST  "),
        GOOD_HEAD.replace(b"POST ", b"PO(ST "),
        GOOD_HEAD.replace(b" HTTP/1.1\r\nHost", b" HTTP/2\r\nHost"),
        GOOD_HEAD.replace(b"alloc_job", b"alloc\x7fjob"),
        GOOD_HEAD.replace(b"POST http", b"POST\thttp"),
        GOOD_HEAD[:-2],
    ],
)
def test_heads_another_reader_could_read_otherwise_are_refused(head: bytes) -> None:
    with pytest.raises(BadRequest) as caught:
        parse_request_head(head, 100)
    assert "\n" not in str(caught.value)


def test_answer_bodies() -> None:
    assert answer_body(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcdef") == b"abc"
    assert answer_body(b"HTTP/1.1 200 OK\r\n\r\nabc") == b"abc"
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n1;x\r\nc\r\n0\r\n\r\n"
    )
    assert answer_body(chunked) == b"abc"
    for bad in [
        b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\nabc",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab\r\n",
        b"HTTP/1.1 200 OK",
    ]:
        assert answer_body(bad) is None, bad
