"""Compile farms: sending a build's compile jobs to an sccache-dist scheduler and its servers.

sccache splits each nvcc call into its jobs (cudafe++, cicc's PTX and ptxas' CUBIN per arch,
the host compile) and, given a scheduler in its client configuration, asks the scheduler for a
build server per job and sends the job there; a job the farm cannot run is compiled locally.
archwheel's part (``archwheel build --dist-scheduler URL --dist-token-file FILE``):

- the token is a secret: it is read from a file (``read_token_file``: one line, bounded, a clear
  usage error for a missing, empty or unreadable file), never taken on the command line, and
  written only into the sccache client configuration of the one build (``write_client_config``:
  mode 0600, in the work folder, which is removed after the build). ``DistFarm``'s ``repr``
  leaves it out, so no log or provenance record can carry it.
- before a build, ``check_farm`` asks the scheduler (``probe_scheduler``, over
  ``effects.http``'s client, each request under a deadline of its own): its status (how many
  build servers it has) and whether the token is accepted. The status is open; the token is
  checked by asking for a job without one (``alloc_job`` with no body): the scheduler checks the
  bearer token first (401 for a wrong one) and refuses the empty request after (400), so no job
  is made. A scheduler that cannot be reached, or has no server, is one warning line and a local
  build; ``--dist-required`` refuses the build instead (``FarmUnavailable``, exit 4). A wrong
  token is a setting written wrong: one line, exit 2, whatever ``--dist-required`` says (a farm
  that will not take the build's jobs is never what the user meant).
- the answers are untrusted input: the status is read by the bounded document reader
  (``facts.documents``) and decoded into ``SchedulerStatusDocument`` (sccache-dist 0.16.0's
  ``SchedulerStatusResult``: ``num_servers``, ``num_cpus``, ``in_progress``, each a whole number
  0 or more, a boolean none; nothing else), and only the answers sccache-dist's scheduler gives
  count: the status is 200, the token check 401 (refused) or 400 with the scheduler's own error
  body (accepted). A redirect, a 403, a 500, a status nested a thousand deep or
  ``num_servers: true`` is no scheduler's answer: one line saying what was answered, and the
  scheduler counts as unreachable.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import msgspec

from archwheel.effects import farm_url
from archwheel.effects.deadline import NetBudget, NetLimits, TimedOut
from archwheel.effects.farm_proxy import PLACEHOLDER_TOKEN, container_scheduler_url
from archwheel.effects.farm_proxy import SOCKET_NAME as FARM_SOCKET_NAME
from archwheel.effects.files import FileTooLarge, NotRegularFile, read_regular
from archwheel.effects.http import Client, NotHTTP
from archwheel.effects.net import TransferError
from archwheel.errors import ToolError, UsageError
from archwheel.facts.documents import DocumentUnreadable, Table, parse_document
from archwheel.facts.typed import Document, decode

TOKEN_LIMIT = 4096  # bytes in a token file: a token is a line, not a document
PROBE_TIMEOUT_S = 10.0  # the whole probe of the scheduler (connect, ask, read), per request
REPLY_LIMIT = 64 << 10  # bytes of a scheduler's reply to the probe
REPLY_NESTING = 4  # lists and objects inside each other in a scheduler's reply (it sends 1)
CLIENT_CONFIG_NAME = "sccache-dist.toml"
FARM_MOUNT = "/run/archwheel-farm"  # the farm route's socket folder, in the compile container
# The container's client configuration (placeholder token) and sccache's toolchain packages,
# in archwheel's own folder of the work folder (remote_cache.STATE)
CLIENT_CONFIG = f"/build/.archwheel/{CLIENT_CONFIG_NAME}"
TOOLCHAINS_DIR = "/build/.archwheel/sccache-toolchains"
_TOKEN_HINT = "write the scheduler's client token (client_auth) on the file's one line"  # noqa: S105


class FarmUnavailable(ToolError):
    """``--dist-required`` and the farm cannot take the build's jobs (exit 4)."""


@dataclass(frozen=True)
class DistFarm:
    """A compile farm to send the build's compile jobs to: the scheduler's URL and the client
    token (left out of ``repr``: it is a secret), and whether a build without it is refused."""

    scheduler_url: str
    token: str = field(repr=False)
    required: bool = False


@dataclass(frozen=True)
class SchedulerStatus:
    """What the probe learned: reached or not (``why`` says why not), its build servers, and
    whether it accepted the token (``None``: not asked, the scheduler was not reached)."""

    reached: bool
    servers: int = 0
    cpus: int = 0
    token_accepted: bool | None = None
    why: str = ""


def parse_scheduler_url(text: str) -> str:
    """``--dist-scheduler``: ``http(s)://HOST[:PORT]`` as ``effects.farm_url`` reads it, the
    one reading the probe and the compile container's route use too, so a URL taken here is
    one the build can use (a path or credentials are refused: sccache adds its own path, and a
    secret belongs in the token file). The URL in canonical form; usage error (exit 2) else."""
    hint = "give the scheduler as http://HOST:PORT or https://HOST[:PORT]"
    shown = text if len(text) <= 100 else text[:100] + "..."
    try:
        return str(farm_url.parse_scheduler_url(text.strip()))
    except farm_url.BadTarget as exc:
        if "credentials" in str(exc):  # never repeat them
            raise UsageError(f"--dist-scheduler: {exc}", hint=hint) from None
        raise UsageError(f"--dist-scheduler {shown!r}: {exc}", hint=hint) from None


def read_token_file(path: Path) -> str:
    """The client token in ``path``: one line of printable ASCII without spaces, at most
    ``TOKEN_LIMIT`` bytes. A missing, unreadable, empty, large or many-lined file is a usage
    error (exit 2) naming the file, never echoing what it holds."""
    try:
        data = read_regular(path, TOKEN_LIMIT)
    except FileNotFoundError:
        raise UsageError(f"--dist-token-file {path}: no such file", hint=_TOKEN_HINT) from None
    except NotRegularFile:
        raise UsageError(
            f"--dist-token-file {path}: not a regular file", hint=_TOKEN_HINT
        ) from None
    except FileTooLarge:
        raise UsageError(
            f"--dist-token-file {path}: larger than {TOKEN_LIMIT} bytes; not a token",
            hint=_TOKEN_HINT,
        ) from None
    except OSError as exc:
        raise UsageError(
            f"--dist-token-file {path}: cannot read: {exc.strerror or exc}", hint=_TOKEN_HINT
        ) from None
    lines = [line for line in data.decode("ascii", errors="replace").splitlines() if line.strip()]
    if not lines:
        raise UsageError(f"--dist-token-file {path}: empty", hint=_TOKEN_HINT)
    if len(lines) > 1:
        raise UsageError(f"--dist-token-file {path}: more than one line", hint=_TOKEN_HINT)
    token = lines[0].strip()
    if not all(33 <= ord(c) < 127 for c in token):
        raise UsageError(
            f"--dist-token-file {path}: not a token (one line of printable ASCII, no spaces)",
            hint=_TOKEN_HINT,
        )
    return token


def dist_farm_option(
    url: str | None, token_file: Path | None, *, required: bool
) -> DistFarm | None:
    """The farm named by a scheduler URL and a token file (the build's coming
    ``--dist-scheduler``/``--dist-token-file``/``--dist-required``), or ``None``; one without
    the other is a usage error (exit 2)."""
    if url is None and token_file is None:
        if required:
            raise UsageError(
                "--dist-required needs a farm", hint="give --dist-scheduler and --dist-token-file"
            )
        return None
    if url is None:
        raise UsageError("--dist-token-file without --dist-scheduler", hint="give both")
    if token_file is None:
        raise UsageError(
            "--dist-scheduler without --dist-token-file",
            hint="the scheduler's client token is read from a file, never from the command line",
        )
    return DistFarm(parse_scheduler_url(url), read_token_file(token_file), required)


def _quoted(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's for these)."""
    return json.dumps(text, ensure_ascii=True)


def client_config_text(farm: DistFarm, toolchains_dir: str) -> str:
    """The sccache client configuration sending jobs to ``farm`` (what ``write_client_config``
    writes): sccache packages the compilers it finds itself (``toolchains = []``) into
    ``toolchains_dir``.

    ``rewrite_includes_only``: sccache sends a build server the C/C++ source with its includes
    pasted in (gcc ``-fdirectives-only``) and the server expands the macros, as a local compile
    does. Without it the server compiles fully preprocessed source, where macro-expanded code
    sits on other lines: gcc -O0 then emits a ``nop`` for a closing brace on a line of its own
    (seen in nvcc's generated ``____nv_dummy_param_ref``), so a farm-built object is not the
    local one. With it, farm and local objects are byte-identical
    (tests/integration/farm/test_farm_compile.py)."""
    return (
        "[dist]\n"
        "rewrite_includes_only = true\n"
        f"scheduler_url = {_quoted(farm.scheduler_url)}\n"
        "toolchains = []\n"
        f"cache_dir = {_quoted(toolchains_dir)}\n"
        "\n[dist.auth]\n"
        'type = "token"\n'
        f"token = {_quoted(farm.token)}\n"
    )


def write_client_config(path: Path, farm: DistFarm, toolchains_dir: str) -> Path:
    """Write the client configuration (``client_config_text``) to ``path``, created with mode
    0600 (never readable by others, not even for a moment); an existing file is replaced."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(client_config_text(farm, toolchains_dir))
    return path


class _ProbeFailed(Exception):
    """The scheduler did not answer as one (one line)."""


Count = Annotated[int, msgspec.Meta(ge=0)]


class SchedulerStatusDocument(Document, frozen=True):
    """The scheduler's status as sccache-dist 0.16.0 answers ``GET /api/v1/scheduler/status``
    with ``Accept: application/json`` (its ``SchedulerStatusResult``, which refuses unknown
    fields itself): three counts, nothing else."""

    num_servers: Count
    num_cpus: Count
    in_progress: Count


class SchedulerError(Document, frozen=True):
    """The body of the scheduler's refusal of the probe's empty job request (400, a good
    token): ``{"description": "the request didn't have a binary content type", "cause": null}``
    (its web framework's error shape)."""

    description: str
    cause: str | None = None


_CONNECTION_NAMED = re.compile(r"\A\w+\(host=[^)]*\): ")  # urllib3's "Conn(host=.., port=..): "
_ANY_STATUS = range(100, 600)  # the probe reads every status as an answer (nothing followed)
_REFUSED = 401  # the token check: a wrong (or no) token
_ACCEPTED = 400  # the token check: a good token, the empty job request refused after it


def _ask(
    client: Client, url: str, method: str, token: str | None, timeout_s: float
) -> tuple[int, bytes]:
    """One request of the probe over ``client``: ``(status, body)``, the body at most
    ``REPLY_LIMIT`` bytes, all of it (connection, answer and body) within ``timeout_s``
    (an ``effects.deadline`` of its own: ``TimedOut`` past it). The token goes in the
    ``Authorization`` header only, which no error of the client names. A redirect is handed
    back as an answer, never followed."""
    limits = NetLimits(request_timeout_s=timeout_s, run_timeout_s=timeout_s)
    headers = {"Accept": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    with (
        NetBudget(limits).request(url),
        client.open(url, headers, method=method, accept=_ANY_STATUS) as response,
    ):
        return response.status, response.read_all(REPLY_LIMIT)


def _answered(request: str, code: int, wanted: str) -> _ProbeFailed:
    """``the status request answered HTTP 302 (a redirect), not 200``."""
    kind = " (a redirect)" if 300 <= code < 400 else ""
    return _ProbeFailed(f"the {request} answered HTTP {code}{kind}, not {wanted}")


def _decoded(body: bytes, kind: type[msgspec.Struct], what: str) -> msgspec.Struct:
    """``body`` read by the bounded document reader and decoded as ``kind``; anything else is
    ``_ProbeFailed`` in one line (``the status is not a scheduler's: num_servers must be ...``)."""
    try:
        document = parse_document(body, REPLY_NESTING)
    except DocumentUnreadable as exc:
        raise _ProbeFailed(f"the {what} is not a scheduler's: {exc}") from None
    if not isinstance(document, dict):
        raise _ProbeFailed(f"the {what} is not a scheduler's: not a JSON object")
    try:
        return decode(Table(document, what, _Refusal), kind)
    except _Refusal as exc:
        raise _ProbeFailed(f"the {what} is not a scheduler's: {exc}") from None


class _Refusal(Exception):
    """A decoded answer's refusal (``facts.typed.decode``'s error class here)."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(" ".join(message.split()))


def read_status(code: int, body: bytes) -> SchedulerStatusDocument:
    """The scheduler's answer to the status request: 200 and a ``SchedulerStatusDocument``;
    ``_ProbeFailed`` (one line) for any other answer."""
    if code != 200:
        raise _answered("status request", code, "200")
    status = _decoded(body, SchedulerStatusDocument, "status")
    assert isinstance(status, SchedulerStatusDocument)
    return status


def read_token_check(code: int, body: bytes) -> bool:
    """Whether the scheduler took the token, from its answer to the empty job request: 401
    refused, 400 with its own error body accepted; ``_ProbeFailed`` for any other answer (a
    redirect, 403, 500, a 200 that made a job: none is what the scheduler says of a token)."""
    if code == _REFUSED:
        return False
    if code != _ACCEPTED:
        raise _answered("token check", code, f"{_ACCEPTED} or {_REFUSED}")
    _decoded(body, SchedulerError, "token check's answer")
    return True


def probe_scheduler(farm: DistFarm, timeout_s: float = PROBE_TIMEOUT_S) -> SchedulerStatus:
    """Ask the scheduler for its status and whether it takes ``farm``'s token, each request
    within ``timeout_s``, over ``effects.http``'s client; never raises for a scheduler that
    fails or answers as no scheduler does (``reached=False``, ``why`` one line without the
    token)."""
    base = farm.scheduler_url
    try:
        with Client() as client:
            status = read_status(
                *_ask(client, f"{base}/api/v1/scheduler/status", "GET", None, timeout_s)
            )
            accepted = read_token_check(
                *_ask(client, f"{base}/api/v1/scheduler/alloc_job", "POST", farm.token, timeout_s)
            )
    except (_ProbeFailed, TransferError) as exc:
        return SchedulerStatus(reached=False, why=_reason(exc))
    return SchedulerStatus(
        reached=True, servers=status.num_servers, cpus=status.num_cpus, token_accepted=accepted
    )


def _reason(exc: Exception) -> str:
    """Why the probe did not reach a scheduler, in one line."""
    if isinstance(exc, TimedOut):
        return "no answer in time"
    if isinstance(exc, NotHTTP):
        return "not an HTTP answer"
    text = _CONNECTION_NAMED.sub("", str(exc))  # the warning names the scheduler already
    return " ".join(text.split())[:300]


def check_farm(
    farm: DistFarm,
    warn: Callable[[str], None],
    *,
    timeout_s: float = PROBE_TIMEOUT_S,
    probe: Callable[[DistFarm, float], SchedulerStatus] = probe_scheduler,
) -> SchedulerStatus:
    """Decide, before the build, whether it sends jobs to ``farm`` (``reached`` with servers
    and the token accepted). A wrong token: ``UsageError`` (exit 2). A scheduler that cannot be
    reached or has no server: ``FarmUnavailable`` (exit 4) with ``farm.required``, else one
    ``warn`` line and the status (the build compiles locally)."""
    status = probe(farm, timeout_s)
    where = f"compile farm {farm.scheduler_url}"
    if status.reached and status.token_accepted is False:
        raise UsageError(
            f"{where} refused the token of --dist-token-file",
            hint="the file must hold the scheduler's client token (client_auth)",
        )
    if status.reached and status.servers > 0:
        return status
    why = f"cannot be reached ({status.why})" if not status.reached else "has no build server"
    if farm.required:
        raise FarmUnavailable(
            f"{where} {why}; --dist-required refuses to build without it",
            hint="start the farm, or drop --dist-required to build locally",
        )
    warn(f"{where} {why}: compiling locally")
    return status


def container_farm(farm: DistFarm) -> DistFarm:
    """The farm as the compile container's client configuration names it: the scheduler as
    ``http://HOST:PORT`` (the route reads its requests, and speaks TLS onwards where the URL is
    https) and a placeholder for the token, which the route adds on the host
    (effects/farm_proxy.py): the token never enters the container, its files or its log."""
    return DistFarm(container_scheduler_url(farm.scheduler_url), PLACEHOLDER_TOKEN, farm.required)


def container_farm_env() -> dict[str, str]:
    """What the compile phase's start step needs to reach the farm: the route's socket, mounted
    at ``FARM_MOUNT`` (sccache_launcher.farm_route_script), and the client configuration
    (``SCCACHE_CONF``, written by ``write_client_config`` with ``container_farm``: a
    placeholder token) that the sccache daemon reads when it starts."""
    return {
        "ARCHWHEEL_FARM_SOCKET": f"{FARM_MOUNT}/{FARM_SOCKET_NAME}",
        "SCCACHE_CONF": CLIENT_CONFIG,
    }


def describe_farm(farm: DistFarm) -> str:
    """The plan's row for the farm: the scheduler (never the token) and what an unreachable
    one does."""
    return (
        f"sccache-dist scheduler {farm.scheduler_url} (token from --dist-token-file, added on "
        f"the host by archwheel's route at {FARM_MOUNT}); "
        + ("unreachable: the build is refused" if farm.required else "unreachable: local build")
    )
