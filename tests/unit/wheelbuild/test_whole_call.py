"""The whole-call cache's key: what changes it, what does not, and which calls it takes."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from archwheel.wheelbuild.compile.remote_cache import KEYED_VARIABLES
from archwheel.wheelbuild.compile.sccache_launcher import launcher_script
from archwheel.wheelbuild.compile.whole_call import (
    call_key,
    deps_args,
    lookup,
    output_of,
    outputs_of,
    parse_deps,
    result_key,
    store,
)

ARGS = ["-c", "k.cu", "-o", "k.o", "-O3", "-gencode=arch=compute_90,code=sm_90"]
ENV = {"SCCACHE_C_CUSTOM_CACHE_BUSTER": "archwheel-0123", "SOURCE_DATE_EPOCH": "1"}


def key(**change: object) -> str:
    args = change.get("args", ARGS)
    env = change.get("env", ENV)
    assert isinstance(args, list) and isinstance(env, dict)
    return call_key(str(change.get("compiler", "/cuda/bin/nvcc")), args, env,
                    str(change.get("cwd", "/build/src")))  # fmt: skip


def test_the_key_covers_the_per_step_key_and_the_call() -> None:
    base = key()
    assert key() == base  # stable
    # the toolkit's identity and the environment-carried flags reach it through the buster
    assert key(env={**ENV, "SCCACHE_C_CUSTOM_CACHE_BUSTER": "archwheel-other"}) != base
    assert key(env={**ENV, "SOURCE_DATE_EPOCH": "2"}) != base
    assert key(args=[*ARGS, "-DX=1"]) != base
    assert key(args=[*ARGS[:-1], "-gencode=arch=compute_80,code=sm_80"]) != base
    assert key(args=["-c", "k.cu", "-o", "other.o", *ARGS[4:]]) != base
    assert key(cwd="/elsewhere") != base
    assert key(compiler="/other/nvcc") != base


def test_the_key_ignores_what_the_buster_already_holds_or_no_compile_reads() -> None:
    """NVCC_APPEND_FLAGS and the other keyed variables enter through the launcher's buster
    (computed from them); other variables change nothing."""
    base = key()
    noise = {"HOME": "/x", "TERM": "dumb", "ARCHWHEEL_WHOLE_CALL_DIR": "/y"}
    assert key(env={**ENV, **noise}) == base
    assert key(env={**ENV, **dict.fromkeys(KEYED_VARIABLES, "-DX")}) == base


def test_the_launcher_digest_covers_every_keyed_variable() -> None:
    text = launcher_script()
    assert "|".join(KEYED_VARIABLES) in text
    # without the cache (--no-cache: SCCACHE_NO_CACHE) the whole-call cache is not used
    assert '[ -z "${SCCACHE_NO_CACHE-}" ]' in text


def test_the_result_key_covers_each_file_read() -> None:
    deps = [["k.cu", "a" * 64], ["dev.h", "b" * 64]]
    assert result_key("k", deps) == result_key("k", [list(d) for d in deps])
    assert result_key("k", deps) != result_key("k", [deps[0], ["dev.h", "c" * 64]])
    assert result_key("k", deps) != result_key("k", deps[:1])
    assert result_key("k", deps) != result_key("other", deps)


@pytest.mark.parametrize(
    "args",
    [
        ["k.cu", "-o", "k.o"],  # no -c: a link
        ["-c", "k.cu"],  # no -o
        ["-c", "k.cu", "-o", "-"],
        ["-c", "k.cu", "-o", "k.o", "-M"],
        ["-c", "k.cu", "-o", "k.o", "-MM"],
        ["-c", "k.cu", "-o", "k.o", "--generate-dependencies"],
        ["-c", "k.cu", "-o", "k.o", "-MD"],  # a dependency file without its name
        ["-c", "k.cu", "-o", "k.o", "--generate-dependencies-with-compile"],
        ["-c", "k.cu", "-o", "k.o", "--dependency-output", "k.d"],  # a name, no file
        ["-c", "k.cu", "-o", "k.o", "-MX"],
        ["-c", "k.cu", "-o", "k.o", "-Xcompiler=-MD,-MF,x.d"],
        ["-c", "k.cu", "-o", "k.o", "-Xcompiler", "-MD"],
        ["-c", "k.cu", "-o", "k.o", "-Xcompiler=-gsplit-dwarf"],
        ["-c", "k.cu", "-o", "k.o", "-Wp,-MD,x.d"],
        ["-c", "k.cu", "-o", "k.o", "-fstack-usage"],
        ["-c", "k.cu", "-o", "k.o", "--coverage"],
        ["-c", "k.cu", "-o", "k.o", "--keep"],
        ["-c", "k.cu", "-o", "k.o", "-save-temps"],
        ["-c", "k.cu", "-o", "k.o", "@flags.rsp"],
        ["-c", "k.cu", "-o", "k.o", "--options-file", "f"],
        ["-c", "k.cu", "-o", "k.o", "--time", "t.csv"],
        ["-c", "k.cu", "-o", "k.o", "-odir", "x"],
    ],
)
def test_calls_writing_other_files_are_left_to_sccache(args: list[str]) -> None:
    assert output_of(args) is None


def test_the_object_of_a_compile() -> None:
    assert outputs_of(ARGS) == ("k.o", None)
    # CMake's and torch's dependency files: a second output
    assert outputs_of([*ARGS, "-MD", "-MT", "k.o", "-MF", "k.o.d"]) == ("k.o", "k.o.d")
    torch = ["--generate-dependencies-with-compile", "--dependency-output", "k.o.d"]
    assert outputs_of([*ARGS, *torch]) == ("k.o", "k.o.d")
    assert outputs_of([*ARGS, "-MMD", "-MF=x.d", "-MP"]) == ("k.o", "x.d")
    assert output_of(ARGS) == "k.o"
    assert output_of(["-c", "k.cu", "--output-file=x/k.o"]) == "x/k.o"
    assert output_of(["--compile", "k.cu", "--output-file", "k.o", "-objtemp"]) == "k.o"


def test_dependency_rules_and_arguments() -> None:
    rule = "k.o : k.cu \\\n    /usr/include/a.h \\\n    my\\ dir/b.h \\\n    k.cu\n"
    assert parse_deps(rule) == ["k.cu", "/usr/include/a.h", "my dir/b.h"]
    assert parse_deps("no rule here") == []
    assert deps_args(["-c", "k.cu", "-o", "k.o", "-objtemp", "-O3"]) == ["k.cu", "-O3", "-M"]
    assert deps_args(["--compile", "k.cu", "--output-file=k.o"]) == ["k.cu", "-M"]
    cmake = ["-c", "k.cu", "-o", "k.o", "-MD", "-MT", "k.o", "-MF", "k.o.d", "-MP", "-O3"]
    assert deps_args(cmake) == ["k.cu", "-O3", "-M"]
    torch = ["-c", "k.cu", "-o", "k.o", "--generate-dependencies-with-compile",
             "--dependency-output", "k.o.d"]  # fmt: skip
    assert deps_args(torch) == ["k.cu", "-M"]


def fake_compiler(folder: Path) -> Path:
    """A stand-in that answers ``-M`` with the files k.cu reads (the real nvcc is in
    tests/integration/nvcc/test_whole_call.py)."""
    path = folder / "nvcc"
    path.write_text('#!/bin/sh\necho "k.o : k.cu \\\\"\necho "  inc.h"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_store_then_lookup_and_a_changed_header_misses(tmp_path: Path) -> None:
    src, root = tmp_path / "src", tmp_path / "cache"
    src.mkdir()
    (src / "k.cu").write_text("kernel")
    (src / "inc.h").write_text("one")
    (src / "k.o").write_bytes(b"object one")
    compiler = str(fake_compiler(tmp_path))
    assert store(str(root), compiler, ARGS, ENV, str(src), err=b"warning: w\n")
    (src / "k.o").unlink()
    assert lookup(str(root), compiler, ARGS, ENV, str(src))
    assert (src / "k.o").read_bytes() == b"object one"
    assert (src / "k.o").stat().st_mode & 0o044 == 0o044  # readable as a compiler leaves it
    # another header content: a miss, and the object is left alone
    (src / "inc.h").write_text("two")
    (src / "k.o").unlink()
    assert not lookup(str(root), compiler, ARGS, ENV, str(src))
    assert not (src / "k.o").exists()
    # another key (another buster): a miss
    (src / "inc.h").write_text("one")
    other = {**ENV, "SCCACHE_C_CUSTOM_CACHE_BUSTER": "archwheel-other"}
    assert not lookup(str(root), compiler, ARGS, other, str(src))
    assert lookup(str(root), compiler, ARGS, ENV, str(src))


def test_a_damaged_store_is_a_miss(tmp_path: Path) -> None:
    src, root = tmp_path / "src", tmp_path / "cache"
    src.mkdir()
    (src / "k.cu").write_text("kernel")
    (src / "inc.h").write_text("one")
    (src / "k.o").write_bytes(b"object")
    compiler = str(fake_compiler(tmp_path))
    assert store(str(root), compiler, ARGS, ENV, str(src))
    for manifest in (root / "manifest").rglob("*"):
        if manifest.is_file():
            manifest.write_text("{not json")
    assert not lookup(str(root), compiler, ARGS, ENV, str(src))
    assert store(str(root), compiler, ARGS, ENV, str(src))
    for result in (root / "result").rglob("*"):
        if result.is_file():
            result.write_bytes(b"not a result")
    assert not lookup(str(root), compiler, ARGS, ENV, str(src))


def test_shared_cache_keys_pass_the_relay_and_the_socket_file_is_beside_the_script() -> None:
    from archwheel.effects.redis_commands import allowed
    from archwheel.wheelbuild.compile.remote_cache import WHOLE_CALL_REMOTE, WHOLE_CALL_SCRIPT
    from archwheel.wheelbuild.compile.whole_call import REMOTE_FILE, pack, remote_key, unpack

    for kind in ("manifest", "result"):
        name = remote_key(kind, "ab" * 32).encode()
        assert allowed([b"GET", name]).forward
        assert allowed([b"SET", name, b"value"]).forward
    assert remote_key("manifest", "k") != remote_key("result", "k")
    assert Path(WHOLE_CALL_REMOTE).parent == Path(WHOLE_CALL_SCRIPT).parent
    assert Path(WHOLE_CALL_REMOTE).name == REMOTE_FILE
    assert unpack(pack(b"obj", b"err")) == (b"obj", b"err", None)
    assert unpack(pack(b"obj", b"", b"k.o: k.cu")) == (b"obj", b"", b"k.o: k.cu")
    assert unpack(b"garbage") is None
    assert unpack(pack(b"", b"long err")[:-3]) is None


def test_a_dependency_file_is_stored_and_written_back(tmp_path: Path) -> None:
    src, root = tmp_path / "src", tmp_path / "cache"
    src.mkdir()
    (src / "k.cu").write_text("kernel")
    (src / "inc.h").write_text("one")
    (src / "k.o").write_bytes(b"object")
    (src / "k.o.d").write_text("k.o: k.cu inc.h\n")
    args = [*ARGS, "-MD", "-MF", "k.o.d"]
    compiler = str(fake_compiler(tmp_path))
    assert store(str(root), compiler, args, ENV, str(src))
    (src / "k.o").unlink()
    (src / "k.o.d").unlink()
    assert lookup(str(root), compiler, args, ENV, str(src))
    assert (src / "k.o.d").read_text() == "k.o: k.cu inc.h\n"
    assert (src / "k.o").read_bytes() == b"object"
    # the same call without the dependency file is another key
    assert not lookup(str(root), compiler, ARGS, ENV, str(src))
