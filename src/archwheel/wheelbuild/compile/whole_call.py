"""The whole-call cache: a warm nvcc call answered in one lookup, in front of sccache's steps.

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

Calls that write other files than the one object (``-M*``, ``--keep``, ``-save-temps``,
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
# Options whose call writes more than the object, or reads arguments from a file.
REFUSED = (
    "-M",
    "--generate-dependencies",
    "--generate-nonsystem-dependencies",
    "--dependency-output",
    "--dependency-target-name",
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
DROPPED_FOR_DEPS = ("-c", "--compile", "-objtemp", "--objdir-as-tempdir")


def output_of(args: list[str]) -> str | None:
    """The object the call writes (``-o FILE``), or None when the call is not one to take:
    no ``-c``, no ``-o``, an option that writes other files or reads arguments elsewhere."""
    out = None
    compiles = False
    for i, arg in enumerate(args):
        if arg.startswith("@") or any(arg == r or arg.startswith(r + "=") for r in REFUSED):
            return None
        if arg.startswith("-M") or arg.startswith("--generate-dependencies"):
            return None
        if arg in ("-c", "--compile"):
            compiles = True
        if arg in ("-o", "--output-file") and i + 1 < len(args):
            out = args[i + 1]
        elif arg.startswith("--output-file="):
            out = arg.split("=", 1)[1]
    if not compiles or not out or out == "-" or out.startswith("/dev/"):
        return None
    return out


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
    seen: set[str] = set()
    return [n for n in names if not (n in seen or seen.add(n))]


def deps_args(args: list[str]) -> list[str]:
    """The call's arguments for ``nvcc -M``: without ``-c``, ``-o FILE`` and ``-objtemp``."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in ("-o", "--output-file"):
            skip = True
            continue
        if arg.startswith("--output-file=") or arg in DROPPED_FOR_DEPS:
            continue
        kept.append(arg)
    return [*kept, "-M"]


def _paths(root: str, key: str) -> tuple[str, str]:
    return (
        os.path.join(root, "m", key[:2], key + ".json"),
        os.path.join(root, "r", key[:2]),
    )


def _write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _manifest(path: str) -> list[dict[str, object]]:
    try:
        with open(path, "rb") as f:
            entries = json.loads(f.read()).get("entries", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def lookup(root: str, compiler: str, args: list[str], env: dict[str, str], cwd: str) -> bool:
    """Write the stored object (and replay stderr) when one entry's files all match."""
    out = output_of(args)
    if out is None:
        return False
    key = call_key(compiler, args, env, cwd)
    manifest, results = _paths(root, key)
    digests: dict[str, str | None] = {}
    for entry in reversed(_manifest(manifest)):
        deps = entry.get("deps")
        if not isinstance(deps, list):
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
        if not ok:
            continue
        rk = result_key(key, deps)
        try:
            with open(os.path.join(results, rk + ".o"), "rb") as f:
                obj = f.read()
            with open(os.path.join(results, rk + ".err"), "rb") as f:
                err = f.read()
        except OSError:
            continue
        _write(os.path.join(cwd, out), obj)
        sys.stderr.buffer.write(err)
        return True
    return False


def store(
    root: str, compiler: str, args: list[str], env: dict[str, str], cwd: str, err: bytes
) -> bool:
    """After a call that succeeded: list its files (``nvcc -M``), store the object under the
    result's key and add the entry to the call's manifest."""
    import subprocess  # only on a miss

    out = output_of(args)
    if out is None:
        return False
    try:
        with open(os.path.join(cwd, out), "rb") as f:
            obj = f.read()
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
    manifest, results = _paths(root, key)
    rk = result_key(key, deps)
    _write(os.path.join(results, rk + ".o"), obj)
    _write(os.path.join(results, rk + ".err"), err)
    entries = [e for e in _manifest(manifest) if e.get("deps") != deps]
    entries.append({"deps": deps})
    _write(manifest, json.dumps({"entries": entries[-MAX_ENTRIES:]}).encode())
    return True


def main(argv: list[str]) -> int:
    """``lookup COMPILER ARGS...`` or ``store COMPILER ARGS...`` (stderr of the compile in the
    file ``ARCHWHEEL_WHOLE_CALL_ERR``); the store is in ``ARCHWHEEL_WHOLE_CALL_DIR``."""
    root = os.environ.get("ARCHWHEEL_WHOLE_CALL_DIR", "")
    if len(argv) < 3 or not root:
        return MISS
    mode, compiler, args = argv[1], argv[2], argv[3:]
    env = dict(os.environ)
    cwd = os.getcwd()
    try:
        if mode == "lookup":
            return 0 if lookup(root, compiler, args, env, cwd) else MISS
        if mode == "store":
            err = b""
            err_file = env.get("ARCHWHEEL_WHOLE_CALL_ERR")
            if err_file:
                with open(err_file, "rb") as f:
                    err = f.read()
            return 0 if store(root, compiler, args, env, cwd, err) else MISS
    except (OSError, ValueError):
        return MISS  # the cache never fails a build
    return MISS


if __name__ == "__main__":
    sys.exit(main(sys.argv))
