"""The probe before a build reads a scheduler's answers as untrusted input: a real HTTP server
on 127.0.0.1 answers the status request and the token check as no sccache-dist scheduler does
(a redirect, 403, 500, a 200 for the token, a status nested deep, ``num_servers: true``, a
negative or a huge count, an unknown field, text that is no JSON), and each is one line saying
what was answered, the scheduler unreachable (a warning and a local build; exit 4 with
``--dist-required``), never "token accepted", never a traceback. The answers a real scheduler
gives are in tests/integration/farm/test_farm_probe.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from archwheel.errors import UsageError
from archwheel.exit_codes import ExitCode, exit_code_for
from archwheel.wheelbuild.compile.dist_farm import (
    DistFarm,
    FarmUnavailable,
    SchedulerStatus,
    check_farm,
    probe_scheduler,
)

TOKEN = "probe-SECRET-token"
GOOD_STATUS = b'{"num_servers":2,"num_cpus":16,"in_progress":0}'
GOOD_REFUSAL = b'{"description":"the request didn\'t have a binary content type","cause":null}'


@dataclass
class Answer:
    """What the server answers: a status code, a body and its headers."""

    code: int
    body: bytes = b""
    location: str | None = None


@dataclass
class Script:
    status: Answer
    token: Answer


class _Handler(BaseHTTPRequestHandler):
    script: Script

    def _send(self, answer: Answer) -> None:
        self.send_response(answer.code)
        if answer.location is not None:
            self.send_header("Location", answer.location)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        self.wfile.write(answer.body)

    def do_GET(self) -> None:
        self._send(self.server.script.status)  # type: ignore[attr-defined]

    def do_POST(self) -> None:
        self._send(self.server.script.token)  # type: ignore[attr-defined]

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def scheduler() -> Iterator[tuple[str, Script]]:
    """A real HTTP server on 127.0.0.1 answering whatever its ``Script`` says (set per test)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    script = Script(Answer(200, GOOD_STATUS), Answer(400, GOOD_REFUSAL))
    server.script = script  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", script
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_the_scheduler_s_own_answers_are_taken(scheduler: tuple[str, Script]) -> None:
    url, script = scheduler
    assert probe_scheduler(DistFarm(url, TOKEN), 5) == SchedulerStatus(
        reached=True, servers=2, cpus=16, token_accepted=True
    )
    script.token = Answer(401, b"Fixed token mismatch")
    assert probe_scheduler(DistFarm(url, TOKEN), 5).token_accepted is False
    with pytest.raises(UsageError) as caught:
        check_farm(DistFarm(url, TOKEN), print)
    assert exit_code_for(caught.value) == ExitCode.USAGE


NESTED = b'{"num_servers":' + b"[" * 5000 + b"]" * 5000 + b"}"


@pytest.mark.parametrize(
    ("status", "why"),
    [
        (Answer(302, location="http://127.0.0.1:9/elsewhere"), "HTTP 302 (a redirect), not 200"),
        (Answer(307, location="/api/v1/scheduler/status"), "HTTP 307 (a redirect), not 200"),
        (Answer(403, b"forbidden"), "HTTP 403, not 200"),
        (Answer(500, b"oops"), "HTTP 500, not 200"),
        (Answer(200, NESTED), "nested deeper than the limit of 4"),
        (Answer(200, b"[" * 60000), "nested deeper"),
        (Answer(200, b" " * 70000), "an answer over 65536 bytes"),
        (Answer(200, b'{"num_servers":true,"num_cpus":1,"in_progress":0}'), "num_servers"),
        (Answer(200, b'{"num_servers":-1,"num_cpus":1,"in_progress":0}'), "at least 0"),
        (Answer(200, b'{"num_servers":1.5,"num_cpus":1,"in_progress":0}'), "num_servers"),
        (Answer(200, b'{"num_servers":"2","num_cpus":1,"in_progress":0}'), "num_servers"),
        (Answer(200, b'{"num_servers":' + b"9" * 5000 + b',"num_cpus":1,"in_progress":0}'),
         "not JSON"),
        (Answer(200, b'{"num_servers":2,"num_cpus":true,"in_progress":0}'), "num_cpus"),
        (Answer(200, b'{"num_servers":2,"num_cpus":1}'), "in_progress"),
        (Answer(200, b'{"num_servers":2,"num_cpus":1,"in_progress":0,"x":1}'), "unknown key"),
        (Answer(200, b'{"num_servers":2,"num_servers":3,"num_cpus":1,"in_progress":0}'),
         "given twice"),
        (Answer(200, b"[2, 16, 0]"), "not a JSON object"),
        (Answer(200, b"\x00\x00\x00\x00\x00\x00\x00\x02"), "not JSON"),
        (Answer(200, b"\xff\xfe{}"), "not UTF-8"),
    ],
)  # fmt: skip
def test_a_status_no_scheduler_gives_is_one_line_and_unreached(
    scheduler: tuple[str, Script], status: Answer, why: str
) -> None:
    url, script = scheduler
    script.status = status
    found = probe_scheduler(DistFarm(url, TOKEN), 5)
    assert not found.reached and found.token_accepted is None, found
    assert why in found.why and "\n" not in found.why and TOKEN not in found.why
    lines: list[str] = []
    check_farm(DistFarm(url, TOKEN), lines.append)
    assert len(lines) == 1 and lines[0].endswith("compiling locally") and why in lines[0]
    with pytest.raises(FarmUnavailable) as caught:
        check_farm(DistFarm(url, TOKEN, required=True), print)
    assert exit_code_for(caught.value) == ExitCode.TOOL and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (Answer(302, location="http://127.0.0.1:9/"), "HTTP 302 (a redirect), not 400 or 401"),
        (Answer(303, location="/"), "HTTP 303 (a redirect), not 400 or 401"),
        (Answer(200, b"{}"), "HTTP 200, not 400 or 401"),
        (Answer(403, b"forbidden"), "HTTP 403, not 400 or 401"),
        (Answer(500, b"oops"), "HTTP 500, not 400 or 401"),
        (Answer(404, b""), "HTTP 404, not 400 or 401"),
        (Answer(400, b"<html>bad request</html>"), "not JSON"),
        (Answer(400, b'{"error":"nope"}'), "unknown key"),
        (Answer(400, b'{"description":' + b"[" * 3000 + b"]" * 3000 + b"}"), "nested deeper"),
    ],
)
def test_a_token_check_no_scheduler_gives_is_never_token_accepted(
    scheduler: tuple[str, Script], token: Answer, why: str
) -> None:
    url, script = scheduler
    script.token = token
    found = probe_scheduler(DistFarm(url, TOKEN), 5)
    assert not found.reached and found.token_accepted is None, found
    assert why in found.why and "\n" not in found.why and TOKEN not in found.why
    with pytest.raises(FarmUnavailable, match="cannot be reached"):
        check_farm(DistFarm(url, TOKEN, required=True), print)


def test_the_status_is_never_followed_to_where_a_redirect_points(
    scheduler: tuple[str, Script],
) -> None:
    """A redirect to a server that would answer a good status is not asked."""
    url, script = scheduler
    body = json.dumps({"num_servers": 1, "num_cpus": 1, "in_progress": 0}).encode()
    script.status = Answer(301, body, location=f"{url}/elsewhere")
    assert not probe_scheduler(DistFarm(url, TOKEN), 5).reached
