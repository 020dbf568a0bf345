"""The scripts that put sccache in front of every compiler of a build (remote_cache.py says why).

- ``launcher_script``: written to ``LAUNCHER_DIR/sccache`` (and ``ccache``, a link to it, so
  that ``torch.utils.cpp_extension``, which takes ccache first, and a recipe's own
  ``ccache`` launcher reach it too), first on ``PATH``: keys, records, falls back, then runs
  the real sccache.
- ``start_command``: the compile phase's first step: the forwarder to the relay (with
  ``--cache-url``), the forwarder to the farm route (``farm_route_script``, with a farm) and
  the daemon; the local cache alone where the shared one cannot be used,
  and no cache at all (``CACHE_OFF``) where no daemon starts.
- ``toolkit_id_command``: the toolkit's identity, read by the launcher for every key.
"""

from __future__ import annotations

from archwheel.wheelbuild.compile.nvcc_record import TIME_FLAG
from archwheel.wheelbuild.compile.remote_cache import (
    CACHE_OFF,
    COMPILER_NAMES,
    FALLBACK_LOG,
    FORWARDER,
    KEYED_VARIABLES,
    SCCACHE_BIN,
    SERVER_LOG,
    TOOLKIT_ID,
    WHOLE_CALL_LOG,
    WHOLE_CALL_REMOTE,
    WHOLE_CALL_SCRIPT,
)

# POSIX sh with GNU coreutils' env -0 / sort -z / sha256sum / mktemp.
LAUNCHER = r"""#!/bin/sh
# archwheel's sccache launcher: the toolkit's identity and the environment-carried compiler
# flags become SCCACHE_C_CUSTOM_CACHE_BUSTER (hashed into every key), then the real sccache
# runs; where it cannot, the compiler runs without it.
self_dir=$(cd "$(dirname "$0")" && pwd)
real=__SCCACHE__
names=__NAMES__
case "${1-}" in ''|-*) exec "$real" "$@" ;; esac  # sccache's own options (--show-stats ...)
rest=$(printf '%s' "$PATH" | tr ':' '\n' | grep -vxF -e "$self_dir" -e "$names" | paste -sd: -)
compiler=$1
shift
case "$compiler" in
"$names"/* | "$self_dir"/*) compiler=$(basename "$compiler") ;;  # one of archwheel's own names
esac
case "$compiler" in
*/*) ;;
*) compiler=$(PATH=$rest command -v "$compiler") \
    || { echo "archwheel: no $1 on PATH" >&2; exit 127; } ;;
esac
# A compile whose own command line gives nvcc --threads (or -t) keeps it: archwheel's trailing
# one is dropped (nvcc would warn that it is given twice and take the last).
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
# gcc records its switches in a -g object's debug info (DW_AT_producer), and a compile farm's
# server runs the compile with -fdirectives-only added: a C/C++ compile with debug info records
# none, so its object is the same wherever it ran (the link's build-id covers debug info even
# where the repair step strips it later).
case "$(basename "$compiler")" in
*nvcc*) ;;
*gcc* | *g++* | cc | c++ | *-cc | *-c++ | clang*)
    compiles=
    debug=
    for arg do
        case "$arg" in -c) compiles=1 ;; -g*) debug=1 ;; esac
    done
    [ -n "$compiles" ] && [ -n "$debug" ] && set -- "$@" -gno-record-gcc-switches ;;
esac
plain() {
    printf '%s\n' "$*" >> __FALLBACKS__ 2>/dev/null
    exec "$compiler" "$@"
}
[ -e __OFF__ ] || [ ! -x "$real" ] && exec "$compiler" "$@"  # no daemon, or no sccache
# nvcc --threads N (archwheel's, parallel.py) changes no output byte: not in the key.
UNTHREAD='s/^(NVCC_APPEND_FLAGS=(.*[^ ])?) *--threads [0-9]+$/\1/; /^NVCC_APPEND_FLAGS=$/d'
keyed() { env -0 | grep -zE '^(__VARIABLES__)=' | sed -zE "$UNTHREAD" | sort -z; }
if env -0 >/dev/null 2>&1 && [ -s __TOOLKIT_ID__ ] \
    && key=$( { cat __TOOLKIT_ID__ && keyed; } | sha256sum); then
    SCCACHE_C_CUSTOM_CACHE_BUSTER="archwheel-$(printf '%s' "$key" | cut -c1-32)"
    export SCCACHE_C_CUSTOM_CACHE_BUSTER
else
    echo "archwheel: no compiler-cache key (__TOOLKIT_ID__); compiling without the cache" >&2
    exec "$compiler" "$@"
fi
# sccache does not cache an nvcc call with --time: nvcc writes archwheel's record from a
# --dryrun (the same rows), and sccache runs the call without the flag.
case "$(basename "$compiler"):${NVCC_APPEND_FLAGS-}" in
nvcc:*'__TIME_FLAG__'*)
    "$compiler" "$@" --dryrun >/dev/null 2>&1
    NVCC_APPEND_FLAGS=$(printf '%s' "$NVCC_APPEND_FLAGS" | sed 's| *__TIME_FLAG__||')
    [ -n "$NVCC_APPEND_FLAGS" ] && export NVCC_APPEND_FLAGS || unset NVCC_APPEND_FLAGS ;;
esac
# The object the call must leave (-o FILE): sccache 0.16.0 reports success and writes none
# for nvcc -objtemp, so a missing one is sccache's failure, not the compiler's.
out=
prev=
for arg in "$@"; do
    case "$prev:$arg" in
    -o:* | --output-file:*) out=$arg ;;
    *:--output-file=*) out=${arg#--output-file=} ;;
    esac
    prev=$arg
done
case "$out" in - | /dev/*) out= ;; esac  # standard output, a device: no file to check
# nvcc -objtemp (intermediate files beside the object, for names without the pid) is what
# sccache's fixed names already give, and what it mishandles: sccache's call goes without it.
cached() {
    case "$(basename "$compiler")" in
    nvcc)
        for arg do
            shift
            case "$arg" in -objtemp | --objdir-as-tempdir) ;; *) set -- "$@" "$arg" ;; esac
        done ;;
    esac
    "$real" "$compiler" "$@"
}
# The whole-call cache (whole_call.py): one lookup of the outer nvcc (or C/C++) call before
# sccache's own, which preprocesses first; a miss goes on to sccache (and a farm) as before.
whole=
case "$(basename "$compiler")" in
nvcc | *gcc* | *g++* | cc | c++ | *-cc | *-c++ | clang*)
    [ -n "${ARCHWHEEL_WHOLE_CALL_DIR-}" ] && [ -z "${SCCACHE_NO_CACHE-}" ] && [ -n "$out" ] \
        && [ -x "${ARCHWHEEL_PYTHON-}" ] && [ -f __WHOLE__ ] && whole=1 ;;
esac
if [ -n "$whole" ] && "$ARCHWHEEL_PYTHON" -I -S __WHOLE__ lookup "$compiler" "$@"; then
    printf 'hit %s\n' "$out" >> __WHOLE_LOG__ 2>/dev/null
    exit 0
fi
err=$(mktemp "${TMPDIR:-/tmp}/archwheel-sccache.XXXXXX") || plain "$@"
[ -n "$out" ] && rm -f "$out"
cached "$@" 2>"$err"
status=$?
if [ "$status" -ne 0 ] && grep -q '^sccache: error' "$err"; then
    why=$(grep -m1 '^sccache: error' "$err" | sed 's/^sccache: error: //' | cut -c1-300)
    grep -v '^sccache: \(error\|caused by\)' "$err" >&2
    rm -f "$err"
    echo "archwheel: the compiler cache failed ($why); compiling without it" >&2
    printf '%s\n' "$why" >> __FALLBACKS__ 2>/dev/null
    exec "$compiler" "$@"
fi
cat "$err" >&2
if [ "$status" -eq 0 ] && [ -n "$out" ] && [ ! -e "$out" ]; then
    rm -f "$err"
    why="sccache left no $out"
    echo "archwheel: the compiler cache failed ($why); compiling without it" >&2
    printf '%s\n' "$why" >> __FALLBACKS__ 2>/dev/null
    exec "$compiler" "$@"
fi
# Only a call that succeeded is stored (a failed compile is never answered from the cache).
if [ -n "$whole" ] && [ "$status" -eq 0 ] && ARCHWHEEL_WHOLE_CALL_ERR=$err \
    "$ARCHWHEEL_PYTHON" -I -S __WHOLE__ store "$compiler" "$@" >/dev/null 2>&1; then
    printf 'store %s\n' "$out" >> __WHOLE_LOG__ 2>/dev/null
fi
rm -f "$err"
exit "$status"
"""


def launcher_script(
    toolkit_id: str = TOOLKIT_ID,
    *,
    sccache: str = SCCACHE_BIN,
    names: str = COMPILER_NAMES,
    fallbacks: str = FALLBACK_LOG,
    off: str = CACHE_OFF,
    whole_call: str = WHOLE_CALL_SCRIPT,
    whole_call_log: str = WHOLE_CALL_LOG,
    time_flag: str = TIME_FLAG,
) -> str:
    """The launcher's text; the paths are the container's unless a test gives its own."""
    return (
        LAUNCHER.replace("__TOOLKIT_ID__", toolkit_id)
        .replace("__VARIABLES__", "|".join(KEYED_VARIABLES))
        .replace("__SCCACHE__", sccache)
        .replace("__NAMES__", names)
        .replace("__FALLBACKS__", fallbacks)
        .replace("__OFF__", off)
        .replace("__TIME_FLAG__", time_flag)
        .replace("__WHOLE_LOG__", whole_call_log)
        .replace("__WHOLE__", whole_call)
    )


# The forwarder: a loopback TCP port in the compile container to the relay's Unix socket
# (sccache speaks TCP to Redis only). Writes its port to argv[2] once it listens.
FORWARDER_SCRIPT = r"""import os, socket, sys, threading
target, port_file = sys.argv[1], sys.argv[2]
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(64)
tmp = port_file + ".tmp"
with open(tmp, "w") as f:
    f.write(str(listener.getsockname()[1]))
os.rename(tmp, port_file)
def pump(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    for s, how in ((b, socket.SHUT_WR), (a, socket.SHUT_RD)):
        try:
            s.shutdown(how)
        except OSError:
            pass
def serve(client):
    upstream = socket.socket(socket.AF_UNIX)
    try:
        upstream.connect(target)
    except OSError:
        client.close()
        return
    t = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    t.start()
    pump(client, upstream)
    t.join()
    client.close()
    upstream.close()
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


def farm_route_script(python: str, forwarder: str = FORWARDER) -> str:
    """The shell lines that, when ``ARCHWHEEL_FARM_SOCKET`` names the farm route's socket
    (effects/farm_proxy.py, mounted into the container), start a second forwarder
    (``FORWARDER_SCRIPT``) to it and export ``HTTP_PROXY``/``HTTPS_PROXY`` (both cases, with
    ``NO_PROXY`` and ``ALL_PROXY`` emptied) naming its loopback port, for the sccache daemon
    started after them: sccache's farm client (reqwest) reads them. Without the socket, or
    when the forwarder does not start, nothing is exported and a farm is unreachable from the
    container (``--network none``): sccache compiles locally. The forwarder's pid is written
    beside its port file. Tested on the host and in a real build's compile container, where a
    step that reaches the forwarder's port gets only what the route allows."""
    return f"""
if [ -n "${{ARCHWHEEL_FARM_SOCKET-}}" ]; then
    farm_port={forwarder}.farm-port
    rm -f "$farm_port"
    setsid {python} {forwarder} "$ARCHWHEEL_FARM_SOCKET" "$farm_port" </dev/null >/dev/null 2>&1 &
    echo $! > "$farm_port.pid"
    i=0
    while [ ! -s "$farm_port" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    if [ -s "$farm_port" ]; then
        via="http://127.0.0.1:$(cat "$farm_port")"
        export HTTP_PROXY="$via" HTTPS_PROXY="$via" http_proxy="$via" https_proxy="$via"
        export NO_PROXY= no_proxy= ALL_PROXY= all_proxy=
        echo "compile farm: through archwheel's route"
    else
        echo "compile farm: the route did not start; compiling locally"
    fi
fi
"""


def start_command(python: str, *, sccache: str = SCCACHE_BIN) -> tuple[str, ...]:
    """The step that starts the forwarder (when ``ARCHWHEEL_CACHE_SOCKET`` is set) and the
    daemon; one line says what cache the compiles get. Always succeeds: a cache that cannot
    start costs the cache, not the build."""
    script = f"""
set -u
rm -f {CACHE_OFF} {WHOLE_CALL_REMOTE}
{farm_route_script(python)}
start() {{ SCCACHE_ERROR_LOG={SERVER_LOG} SCCACHE_LOG=sccache::server=debug \\
    {sccache} --start-server >/dev/null 2>{SERVER_LOG}.start; }}
why() {{ grep -m1 'error' {SERVER_LOG}.start | sed 's/^sccache: error: //' | cut -c1-200; }}
if [ -n "${{ARCHWHEEL_CACHE_SOCKET-}}" ]; then
    port_file={FORWARDER}.port
    setsid {python} {FORWARDER} "$ARCHWHEEL_CACHE_SOCKET" "$port_file" \\
        </dev/null >/dev/null 2>&1 &
    i=0
    while [ ! -s "$port_file" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    if [ -s "$port_file" ] && (
        export SCCACHE_MULTILEVEL_CHAIN=disk,redis SCCACHE_MULTILEVEL_WRITE_ERROR_POLICY=ignore \\
            SCCACHE_REDIS_ENDPOINT="redis://127.0.0.1:$(cat "$port_file")"
        start
    ); then
        echo "compiler cache: $({sccache} --version), local volume and the shared cache"
        printf '%s' "$ARCHWHEEL_CACHE_SOCKET" > {WHOLE_CALL_REMOTE}  # whole_call.py reads it
        exit 0
    fi
    echo "compiler cache: the shared cache could not be used ($(why)); the local cache only"
    {sccache} --stop-server >/dev/null 2>&1
    rm -f "${{SCCACHE_SERVER_UDS-}}"
fi
if start; then
    if [ -n "${{SCCACHE_NO_CACHE-}}" ]; then
        echo "compiler cache: off; $({sccache} --version) runs the compilers, caching nothing"
    else
        echo "compiler cache: $({sccache} --version), local volume"
    fi
else
    echo "compiler cache: sccache did not start ($(why)); compiling without the cache"
    : > {CACHE_OFF}
fi
"""
    return ("sh", "-c", script.strip())


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
