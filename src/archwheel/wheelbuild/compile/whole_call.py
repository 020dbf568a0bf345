"""The whole-call cache: a warm nvcc call answered in one lookup, in front of sccache's steps.

(A C or C++ call through the launcher takes the same path: sccache preprocesses it before its
lookup too, seconds for a file with torch's headers; ``-M`` lists its files as nvcc's does.)

sccache takes every nvcc call apart (remote_cache.py) and looks each step up after
preprocessing it again: an unchanged ``.cu`` file with CUB headers still costs seconds warm.
This cache keys the outer call the way ccache's direct mode does, without any preprocessing
on a hit, and leaves sccache (and a compile farm behind it) every call it does not answer:

- the call's key (``call_key``): a version tag, ``SCCACHE_C_CUSTOM_CACHE_BUSTER`` (the
  toolkit's identity and the environment-carried flags, ``remote_cache.KEYED_VARIABLES``,
  the launcher's digest), ``SOURCE_DATE_EPOCH``, the working folder, the compiler's path and
  the full argument list as the launcher runs it;
- a manifest under that key lists, per stored result, every file the call read (``nvcc -M``:
  nvcc preprocesses for the host and for each device arch and merges the lists, so a header
  included only under ``__CUDA_ARCH__``, or only for one arch, is in it) with its sha256; the
  result's key (``result_key``) is the call's key and those digests;
- a lookup hashes the listed files: where all match one entry, the stored object (and the
  compiler's stderr) is written back, and nvcc's ``--time`` rows were already written by the
  launcher's ``--dryrun`` before the lookup, as for a call sccache answers;
- a miss runs sccache as before; only a call that succeeded and left its object is stored
  (then ``nvcc -M`` runs once to list its files): a failed compile is never stored, so never
  rescued.

A dependency file the call writes beside its object (``-MD -MF FILE``, CMake's; torch's
ninja rules' ``--generate-dependencies-with-compile --dependency-output FILE``) is stored and
written back with it. Calls that write other files (``-M``, ``--keep``, ``-save-temps``,
``-E``, ``-ptx`` ...) or read arguments from a file (``@FILE``, ``--options-file``) are not
taken: sccache gets them as before. What the key cannot see, as ccache's direct mode cannot:
a header newly added to a folder searched before the one its listed copy came from. In a
build the source tree is copied fresh and nothing adds headers during the compile.

This module is the script itself: standard library only, copied into the work folder
(``SCRIPT``) and run by the launcher with the build's Python (``python3 whole_call.py lookup|
store COMPILER ARGS...``); exit 0 is a hit (or stored), 3 a miss (or not taken).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile

TAG = "archwheel-whole-call-1"
MISS = 3
MAX_ENTRIES = 8  # results kept per call key (one per distinct set of header contents)
MAX_DEPS = 100_000
MAX_LINE = 4096
MAX_VALUE = 256 << 20  # the relay's own limit (effects/redis_relay.py MAX_VALUE_BYTES)
MAGIC = b"archwheel-whole-call-1\n"
REMOTE_FILE = "whole-call-remote"  # beside the script: the relay's socket, when usable
# Options whose call writes more than the object, or reads arguments from a file.
REFUSED = (
    "-M",
    "-MM",
    "--generate-dependencies",
    "--generate-nonsystem-dependencies",
    "-E",
    "--preprocess",
    "-keep",
    "--keep",
    "-save-temps",
    "--save-temps",
    "-dryrun",
    "--dryrun",
    "-ptx",
    "--ptx",
    "-cubin",
    "--cubin",
    "-fatbin",
    "--fatbin",
    "-optix-ir",
    "-lib",
    "--lib",
    "-link",
    "--link",
    "-dlink",
    "--device-link",
    "-run",
    "--run",
    "-odir",
    "--output-directory",
    "--options-file",
    "-optf",
    "--time",
    "-time",
    "--list-gpu",
    "--version",
    "-V",
)
# Host-compiler options (given directly or through nvcc's -Xcompiler) that write a file beside
# the object, or send the preprocessor its own dependency options: such a call is not taken.
SIDE_FILES = (
    "-gsplit-dwarf",
    "-fstack-usage",
    "-fdump-",
    "-fcallgraph-info",
    "-ftest-coverage",
    "--coverage",
    "-aux-info",
    "-fopt-info-",
    "-fdiagnostics-format=sarif-file",
    "-Wp,",
    "-include-pch",
    ".gch",
    ".pch",
)
DROPPED_FOR_DEPS = ("-c", "--compile", "-objtemp", "--objdir-as-tempdir")
# A dependency file written beside the object (torch's ninja rules: --generate-dependencies-
# with-compile --dependency-output FILE; CMake: -MD -MT OBJ -MF FILE): a second output, stored
# and written back with the object. Its name must be given (-MF / --dependency-output).
DEPFILE_ON = (
    "-MD",
    "-MMD",
    "--generate-dependencies-with-compile",
    "--generate-nonsystem-dependencies-with-compile",
)
DEPFILE_NAME = ("-MF", "--dependency-output")
DEPFILE_OTHER = ("-MT", "--dependency-target-name")  # a value: the rule's target (keyed)
DEPFILE_FLAGS = ("-MP", "--generate-dependency-targets")


def outputs_of(args: list[str]) -> tuple[str, str | None] | None:
    """The object the call writes (``-o FILE``) and its dependency file (``-MF FILE`` with
    ``-MD`` and the like; None without), or None when the call is not one to take: no ``-c``,
    no ``-o``, an option that writes other files or reads arguments elsewhere."""
    out = depfile = None
    compiles = depfile_on = False
    for i, arg in enumerate(args):
        following = args[i + 1] if i + 1 < len(args) else None
        if arg.startswith("@") or any(arg == r or arg.startswith(r + "=") for r in REFUSED):
            return None
        if any(side in arg for side in SIDE_FILES) or (
            (",-M" in arg or "=-M" in arg) and not any(arg.startswith(n) for n in DEPFILE_NAME)
        ):
            return None  # a host compiler's own side file or dependency options
        if i > 0 and args[i - 1] in ("-Xcompiler", "--compiler-options") and "-M" in arg:
            return None
        if arg in DEPFILE_ON:
            depfile_on = True
        elif arg in DEPFILE_NAME:
            depfile = following
        elif any(arg.startswith(n + "=") for n in DEPFILE_NAME):
            depfile = arg.split("=", 1)[1]
        elif arg.startswith(("-M", "--generate-dependencies", "--dependency-")) and not (
            arg in DEPFILE_OTHER
            or arg in DEPFILE_FLAGS
            or any(arg.startswith(n + "=") for n in DEPFILE_OTHER)
            or (i > 0 and args[i - 1] in (*DEPFILE_NAME, *DEPFILE_OTHER))
        ):
            return None
        if arg in ("-c", "--compile"):
            compiles = True
        if arg in ("-o", "--output-file") and following is not None:
            out = following
        elif arg.startswith("--output-file="):
            out = arg.split("=", 1)[1]
    if not compiles or not out or out == "-" or out.startswith("/dev/"):
        return None
    if depfile_on != (depfile is not None) or depfile in ("-", ""):
        return None  # a dependency file without its name, or a name without the file
    return out, depfile


def output_of(args: list[str]) -> str | None:
    """The object of a call the cache takes (``outputs_of``), else None."""
    found = outputs_of(args)
    return found[0] if found is not None else None


def call_key(compiler: str, args: list[str], env: dict[str, str], cwd: str) -> str:
    """The call's key: everything but the files it reads (those are in its manifest)."""
    parts = [
        TAG,
        env.get("SCCACHE_C_CUSTOM_CACHE_BUSTER", ""),
        env.get("SOURCE_DATE_EPOCH", ""),
        cwd,
        compiler,
        *args,
    ]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def result_key(key: str, deps: list[list[str]]) -> str:
    """The result's key: the call's key and each file it read with its sha256."""
    return hashlib.sha256(json.dumps([key, deps]).encode()).hexdigest()


def file_digest(path: str) -> str | None:
    """sha256 of a file's bytes; None when it cannot be read (a manifest entry then misses)."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def parse_deps(text: str) -> list[str]:
    """The files of ``nvcc -M`` output (a make rule: ``OBJ : SRC HDR ...``, lines joined with
    backslashes, spaces in names escaped), each once, in order."""
    joined = text.replace("\\\n", " ")
    _, sep, rest = joined.partition(": ")
    if not sep:
        return []
    names: list[str] = []
    word = ""
    i = 0
    while i < len(rest):
        c = rest[i]
        if c == "\\" and i + 1 < len(rest) and rest[i + 1] == " ":
            word += " "
            i += 2
            continue
        if c.isspace():
            if word:
                names.append(word)
            word = ""
        else:
            word += c
        i += 1
    if word:
        names.append(word)
    return list(dict.fromkeys(names))


def deps_args(args: list[str]) -> list[str]:
    """The call's arguments for ``nvcc -M``: without ``-c``, ``-o FILE`` and ``-objtemp``."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in ("-o", "--output-file", *DEPFILE_NAME, *DEPFILE_OTHER):
            skip = True
            continue
        if arg.startswith("--output-file=") or arg in (*DROPPED_FOR_DEPS, *DEPFILE_ON):
            continue
        if arg in DEPFILE_FLAGS or any(
            arg.startswith(n + "=") for n in (*DEPFILE_NAME, *DEPFILE_OTHER)
        ):
            continue
        kept.append(arg)
    return [*kept, "-M"]


class Local:
    """Entries as files in the compiler-cache volume: ``ROOT/KIND/HH/KEY``."""

    def __init__(self, root: str) -> None:
        self.root = root

    def _path(self, kind: str, key: str) -> str:
        return os.path.join(self.root, kind, key[:2], key)

    def get(self, kind: str, key: str) -> bytes | None:
        """The entry's bytes; None when there is none."""
        try:
            with open(self._path(kind, key), "rb") as f:
                return f.read()
        except OSError:
            return None

    def put(self, kind: str, key: str, value: bytes) -> None:
        """Write the entry whole (a temporary file renamed: a reader sees old or new)."""
        path = self._path(kind, key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(value)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise


class Remote:
    """Entries on the shared cache, through archwheel's relay (its Unix socket): ``GET`` and
    ``SET`` only, each key of sccache's ``A/B/C/HEX`` shape (``remote_key``), which the relay
    allows (effects/redis_commands.py); the relay answers as an empty cache when the server
    does not."""

    def __init__(self, path: str) -> None:
        import socket

        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(30)
        self.sock.connect(path)
        self.reader = self.sock.makefile("rb")

    def _call(self, *args: bytes) -> bytes | None:
        parts = [b"*%d\r\n" % len(args)]
        for arg in args:
            parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
        self.sock.sendall(b"".join(parts))
        line = self.reader.readline(MAX_LINE)
        if line.startswith(b"$"):
            size = int(line[1:])
            if size < 0:
                return None
            if size > MAX_VALUE:
                raise OSError("a shared-cache value past the limit")
            data = self.reader.read(size + 2)
            if len(data) != size + 2:
                raise OSError("the shared cache closed the connection")
            return data[:size]
        if line.startswith(b"+"):
            return b""
        raise OSError("the shared cache refused: " + line[:200].decode("ascii", "replace"))

    def get(self, kind: str, key: str) -> bytes | None:
        """``GET``: the entry's bytes; None when the server has none (or is down)."""
        return self._call(b"GET", remote_key(kind, key).encode())

    def put(self, kind: str, key: str, value: bytes) -> None:
        """``SET``: the entry, without expiry (the server's own eviction decides)."""
        self._call(b"SET", remote_key(kind, key).encode(), value)


def remote_key(kind: str, key: str) -> str:
    """An entry's name on the shared cache: sccache's shape, ``A/B/C/`` and a sha256 of this
    cache's tag, the entry's kind (manifest or result) and its key (no sccache entry's digest
    is one of these)."""
    digest = hashlib.sha256(f"{TAG}/{kind}/{key}".encode()).hexdigest()
    return f"{digest[0]}/{digest[1]}/{digest[2]}/{digest}"


def pack(obj: bytes, err: bytes, depfile: bytes | None = None) -> bytes:
    """A result: the object, the compiler's stderr and the dependency file (when written)."""
    parts = [err, obj] + ([] if depfile is None else [depfile])
    return MAGIC + b"".join(len(p).to_bytes(8, "big") + p for p in parts)


def unpack(value: bytes) -> tuple[bytes, bytes, bytes | None] | None:
    """A result's object, stderr and dependency file; None for bytes of another shape."""
    if not value.startswith(MAGIC):
        return None
    at = len(MAGIC)
    parts: list[bytes] = []
    while at < len(value):
        if at + 8 > len(value) or len(parts) == 3:
            return None
        size = int.from_bytes(value[at : at + 8], "big")
        if at + 8 + size > len(value):
            return None
        parts.append(value[at + 8 : at + 8 + size])
        at += 8 + size
    if len(parts) < 2:
        return None
    return parts[1], parts[0], parts[2] if len(parts) == 3 else None


def _entries(value: bytes | None) -> list[dict[str, object]]:
    if value is None:
        return []
    try:
        entries = json.loads(value).get("entries", [])
    except (ValueError, AttributeError):
        return []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def _matching(
    entries: list[dict[str, object]], cwd: str, digests: dict[str, str | None]
) -> list[list[list[str]]]:
    """The entries whose files all still have their recorded digests, newest first."""
    found = []
    for entry in reversed(entries):
        deps = entry.get("deps")
        if not isinstance(deps, list) or not deps:
            continue
        ok = True
        for dep in deps:
            if not (isinstance(dep, list) and len(dep) == 2):
                ok = False
                break
            name = os.path.join(cwd, str(dep[0]))
            if name not in digests:
                digests[name] = file_digest(name)
            if digests[name] != dep[1]:
                ok = False
                break
        if ok:
            found.append(deps)
    return found


def _add_entry(store: Local | Remote, key: str, deps: list[list[str]]) -> None:
    entries = [e for e in _entries(store.get("manifest", key)) if e.get("deps") != deps]
    entries.append({"deps": deps})
    store.put("manifest", key, json.dumps({"entries": entries[-MAX_ENTRIES:]}).encode())


def lookup(
    root: str,
    compiler: str,
    args: list[str],
    env: dict[str, str],
    cwd: str,
    *,
    remote: Remote | None = None,
) -> bool:
    """Write the stored object (and replay stderr) when one entry's files all match: the
    local volume first, then the shared cache (a hit there is kept locally too)."""
    found = outputs_of(args)
    if found is None:
        return False
    out, depfile = found
    key = call_key(compiler, args, env, cwd)
    local = Local(root)
    digests: dict[str, str | None] = {}
    stores: list[Local | Remote] = [local] if remote is None else [local, remote]
    for store_ in stores:
        for deps in _matching(_entries(store_.get("manifest", key)), cwd, digests):
            rk = result_key(key, deps)
            value = store_.get("result", rk)
            result = unpack(value) if value is not None else None
            if result is None or (result[2] is None) != (depfile is None):
                continue
            obj, err, dep_bytes = result
            if depfile is not None and dep_bytes is not None:
                _write_object(os.path.join(cwd, depfile), dep_bytes)
            _write_object(os.path.join(cwd, out), obj)
            sys.stderr.buffer.write(err)
            if store_ is not local and value is not None:
                local.put("result", rk, value)
                _add_entry(local, key, deps)
            return True
    return False


def _write_object(path: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".tmp-whole-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        mask = os.umask(0o022)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # as the compiler leaves it, not mkstemp's 0600
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def store(
    root: str,
    compiler: str,
    args: list[str],
    env: dict[str, str],
    cwd: str,
    *,
    err: bytes = b"",
    remote: Remote | None = None,
) -> bool:
    """After a call that succeeded: list its files (``nvcc -M``), store the result under its
    key and add the entry to the call's manifest, locally and on the shared cache."""
    import subprocess  # only on a miss

    found = outputs_of(args)
    if found is None:
        return False
    out, depfile = found
    dep_bytes = None
    try:
        with open(os.path.join(cwd, out), "rb") as f:
            obj = f.read()
        if depfile is not None:
            with open(os.path.join(cwd, depfile), "rb") as f:
                dep_bytes = f.read()
    except OSError:
        return False
    run = subprocess.run(
        [compiler, *deps_args(args)], capture_output=True, cwd=cwd, check=False
    )  # fmt: skip
    if run.returncode != 0:
        return False
    names = parse_deps(run.stdout.decode("utf-8", "surrogateescape"))
    if not names or len(names) > MAX_DEPS:
        return False
    deps: list[list[str]] = []
    for name in names:
        digest = file_digest(os.path.join(cwd, name))
        if digest is None:
            return False
        deps.append([name, digest])
    key = call_key(compiler, args, env, cwd)
    rk = result_key(key, deps)
    stores: list[Local | Remote] = [Local(root)] if remote is None else [Local(root), remote]
    for store_ in stores:
        store_.put("result", rk, pack(obj, err, dep_bytes))
        _add_entry(store_, key, deps)
    return True


def remote_from(state: str) -> Remote | None:
    """The shared cache, when the start step found it usable and wrote its relay's socket
    beside this script (``REMOTE_FILE``); None otherwise or when it cannot be reached."""
    try:
        with open(os.path.join(state, REMOTE_FILE), encoding="utf-8") as f:
            path = f.read().strip()
        return Remote(path) if path else None
    except OSError:
        return None


def main(argv: list[str]) -> int:
    """``lookup COMPILER ARGS...`` or ``store COMPILER ARGS...`` (stderr of the compile in the
    file ``ARCHWHEEL_WHOLE_CALL_ERR``); the store is in ``ARCHWHEEL_WHOLE_CALL_DIR``."""
    root = os.environ.get("ARCHWHEEL_WHOLE_CALL_DIR", "")
    if len(argv) < 3 or not root:
        return MISS
    mode, compiler, args = argv[1], argv[2], argv[3:]
    env = dict(os.environ)
    cwd = os.getcwd()
    remote = remote_from(os.path.dirname(os.path.abspath(__file__)))
    try:
        if mode == "lookup":
            return 0 if lookup(root, compiler, args, env, cwd, remote=remote) else MISS
        if mode == "store":
            err = b""
            err_file = env.get("ARCHWHEEL_WHOLE_CALL_ERR")
            if err_file:
                with open(err_file, "rb") as f:
                    err = f.read()
            return 0 if store(root, compiler, args, env, cwd, err=err, remote=remote) else MISS
    except (OSError, ValueError):
        return MISS  # the cache never fails a build
    return MISS


if __name__ == "__main__":
    sys.exit(main(sys.argv))
