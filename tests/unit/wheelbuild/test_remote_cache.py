"""``--cache-url`` parsing, the plan with a remote cache, and the hit counts (no engine)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from archwheel.effects.pipconfig import PipSettings
from archwheel.errors import UsageError
from archwheel.exit_codes import EXIT_USAGE, exit_code_for
from archwheel.facts.catalog import load_facts
from archwheel.wheelbuild.compile.jobs import GIB, HostResources, choose_jobs
from archwheel.wheelbuild.compile.remote_cache import (
    KEYED_VARIABLES,
    LAUNCHER_DIR,
    REMOTE_MOUNT,
    parse_cache_url,
)
from archwheel.wheelbuild.compile.sccache_launcher import launcher_script
from archwheel.wheelbuild.compile.sccache_stats import (
    CacheCounts,
    parse_server_log,
    parse_stats_json,
)
from archwheel.wheelbuild.planning.plan import (
    BuildOptions,
    BuildPlan,
    check_arch_list,
    make_plan,
)
from archwheel.wheelbuild.planning.plan_variants import without_remote_cache
from archwheel.wheelbuild.recipes.recipe import load_recipe
from archwheel.wheelbuild.sources.source import ResolvedSource
from tests.support.cli import CliRun
from tests.support.components import sccache
from tests.support.paths import ROOT
from tests.support.redis_server import redis_server

FACTS = load_facts()


@pytest.mark.parametrize(
    ("text", "host", "port", "password", "db", "shown"),
    [
        ("redis://127.0.0.1:6380", "127.0.0.1", 6380, None, None, "redis://127.0.0.1:6380"),
        ("redis://cache.example", "cache.example", 6379, None, None, "redis://cache.example:6379"),
        ("redis://:s3cret@h:7000/2", "h", 7000, "s3cret", 2, "redis://:***@h:7000/2"),
        ("redis://ci:s3cret@h:7000", "h", 7000, "s3cret", None, "redis://ci:***@h:7000"),
        ("redis://[::1]:6379", "::1", 6379, None, None, "redis://::1:6379"),
    ],
)
def test_tcp_urls(
    text: str, host: str, port: int, password: str | None, db: int | None, shown: str
) -> None:
    url = parse_cache_url(text)
    assert (url.address.host, url.address.port, url.address.password, url.db) == (
        host, port, password, db,
    )  # fmt: skip
    assert url.redacted() == shown
    assert "s3cret" not in str(url.container_env())
    assert url.container_env()["ARCHWHEEL_CACHE_SOCKET"].startswith(f"{REMOTE_MOUNT}/")


def test_unix_url() -> None:
    url = parse_cache_url("redis+unix:/run/redis/redis.sock?db=3")
    assert url.address.socket_path == Path("/run/redis/redis.sock") and url.db == 3
    assert url.container_env() == {
        "ARCHWHEEL_CACHE_SOCKET": f"{REMOTE_MOUNT}/redis.sock",
    }


@pytest.mark.parametrize(
    "text",
    [
        "", "redis://", "http://cache.example", "redis://h:99999", "redis://h:port",
        "redis://:@h:1", "redis://h:1|connect-timeout=5", "s3://bucket", "redis+unix:relative",
        "redis://h:1/db",
    ],
)  # fmt: skip
def test_bad_urls_are_one_line_usage_errors(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_cache_url(text)
    assert "\n" not in caught.value.one_line()
    assert exit_code_for(caught.value) == EXIT_USAGE


def test_a_bad_url_never_echoes_its_password() -> None:
    with pytest.raises(UsageError) as caught:
        parse_cache_url("redis://:hunter2@h:1|x=1")
    assert "hunter2" not in caught.value.one_line()


def test_cli_bad_cache_url_exits_2_with_one_line(cli_run: CliRun) -> None:
    code, _, err = cli_run("build", "--recipe", "example", "--cache-url", "memcached://h", "--plan")
    assert code == EXIT_USAGE
    assert err.strip().count("\n") == 0 and "--cache-url" in err
    code, _, err = cli_run(
        "build", "--recipe", "example", "--cache-url", "redis://h", "--no-cache", "--plan"
    )
    assert code == EXIT_USAGE and "--no-cache" in err
    code, _, err = cli_run(
        "matrix", "--index", "idx", "--recipe", "example", "--cache-url", "x", "--plan"
    )
    assert code == EXIT_USAGE and "--cache-url" in err


def _plan(**options: object) -> BuildPlan:
    recipe = load_recipe(ROOT / "recipes" / "example.toml", facts=FACTS)
    source = ResolvedSource(
        spec=recipe.source, root=Path("/checkout/src"), commit="c" * 40, dirty=False,
        content_sha256="d" * 64, files=("a.cu",), source_date_epoch=1, epoch_origin="test",
    )  # fmt: skip
    return make_plan(
        recipe,
        check_arch_list(recipe, "8.0;9.0", facts=FACTS),
        replace(BuildOptions(out=Path("/out")), **options),  # type: ignore[arg-type]
        source,
        jobs=choose_jobs(HostResources(cpus=2, memory_bytes=4 * GIB), 1.0),
        pip=PipSettings(),
        user=(1000, 1000),
    )


def test_plan_with_a_remote_cache() -> None:
    plan = _plan(cache_url=parse_cache_url("redis://:pw@10.0.0.5:6379"))
    assert plan.remote_cache is not None
    compile_phase = plan.phases[-1]
    assert compile_phase.network == "none"  # the relay socket, not the network
    steps = {step.name: step for step in compile_phase.steps}
    assert list(steps)[-3:] == ["cache-key", "cache-start", "compile"]
    start = steps["cache-start"].env
    assert start["ARCHWHEEL_CACHE_SOCKET"] == f"{REMOTE_MOUNT}/redis.sock"
    env = steps["compile"].env
    assert env["PATH"].startswith(f"{LAUNCHER_DIR}:")
    assert env["SCCACHE_IDLE_TIMEOUT"] == "0" and env["SCCACHE_DIR"] == "/sccache"
    assert env["CMAKE_CUDA_COMPILER_LAUNCHER"] == "sccache"
    assert "pw" not in " ".join(plan.build_env.values()) + " ".join(start.values())
    rows = dict(plan.summary_rows())
    assert "redis://:***@10.0.0.5:6379" in rows["compiler cache"]
    local = without_remote_cache(plan)
    assert local.remote_cache is None
    assert all("ARCHWHEEL_CACHE_SOCKET" not in s.env for p in local.phases for s in p.steps)


def test_no_remote_cache_without_the_cache_or_when_checking_reproducibility() -> None:
    url = parse_cache_url("redis://h:1")
    for plan in (
        _plan(cache_url=url, ccache_volume=None),
        _plan(cache_url=url, check_reproducible=True),
    ):
        assert plan.remote_cache is None
        steps = {s.name: s for s in plan.phases[-1].steps}
        env = steps["compile"].env
        assert env["SCCACHE_NO_CACHE"] == "1" and env["CCACHE_DISABLE"] == "1"
        assert "ARCHWHEEL_CACHE_SOCKET" not in steps["cache-start"].env
        assert env["PATH"].startswith(LAUNCHER_DIR)  # sccache runs the compilers, caching nothing


def test_launcher_keys_the_environment_flags() -> None:
    script = launcher_script("/k")
    for name in ("NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS"):
        assert name in KEYED_VARIABLES and name in script
    assert "SCCACHE_C_CUSTOM_CACHE_BUSTER" in script


STATS = {
    "stats": {
        "cache_hits": {"counts": {"PTX": 4, "CUBIN": 4, "CUDA (Device code)": 2, "CUDA": 2,
                                  "C/C++": 1}, "adv_counts": {}},
        "cache_misses": {"counts": {"C/C++": 3}, "adv_counts": {}},
        "cache_errors": {"counts": {"CUDA": 1}}, "cache_read_errors": 1,
        "multi_level": [
            {"name": "L0 (disk)", "hits": 3, "write_failures": 0},
            {"name": "L1 (redis)", "hits": 10, "write_failures": 2},
        ],
    }
}  # fmt: skip


def test_counts_take_every_sub_phase_and_split_local_and_remote_hits() -> None:
    counts = CacheCounts.from_stats(STATS, fallbacks=1)
    # a summary of C/C++ and CUDA alone would say 3 hits of 6; there are 13 of 16
    assert (counts.local_hits, counts.remote_hits, counts.misses) == (3, 10, 3)
    assert counts.compiles == 16 and counts.remote_errors == 2 and counts.errors == 2
    assert counts.by_phase()["PTX"] == {"hits": 4, "misses": 0}
    assert counts.by_phase()["C/C++"] == {"hits": 1, "misses": 3}
    assert counts.rates() == {"local": 0.1875, "remote": 0.625, "miss": 0.1875}
    assert "CUBIN 4/4" in counts.describe() and counts.fallbacks == 1
    assert CacheCounts.from_stats({}).rates() == {"local": 0.0, "remote": 0.0, "miss": 0.0}
    assert parse_stats_json("not json") == {} and parse_stats_json("[1]") == {}
    # junk where numbers belong counts nothing
    assert CacheCounts.from_stats({"stats": {"cache_hits": {"counts": {"PTX": "x"}}}}).compiles == 0


def test_a_server_log_gives_each_step_its_sub_phase() -> None:
    text = "\n".join([
        "[2026-01-01T00:00:00Z DEBUG sccache::server] [k.module_id]: compile result: cache hit",
        "[2026-01-01T00:00:00Z DEBUG sccache::server] [k.compute_80.ptx]: compile result: cache miss",
        "[2026-01-01T00:00:00Z DEBUG sccache::server] [k.compute_80.cubin]: compile result: cache miss",
        "[2026-01-01T00:00:00Z DEBUG sccache::server] [k.o]: compile result: cache hit",
        "[2026-01-01T00:00:00Z DEBUG sccache::server] [k.o]: compile result: not cacheable",
        "[2026-01-01T00:00:00Z DEBUG sccache::server] [m.o]: compile result: cache miss",
        "[2026-01-01T00:00:00Z DEBUG sccache::server] stats after compile result: ServerStats {}",
        "junk",
    ])  # fmt: skip
    records = parse_server_log(text)
    assert [(r.file, r.phase, r.result) for r in records] == [
        ("k.module_id", "CUDA (Device code)", "hit"),
        ("k.compute_80.ptx", "PTX", "miss"),
        ("k.compute_80.cubin", "CUBIN", "miss"),
        ("k.o", "CUDA", "hit"),
        ("m.o", "C/C++", "miss"),
    ]
    assert len(parse_server_log(text, limit=2)) == 2 and parse_server_log("") == ()
    assert records[0].to_json_dict() == {
        "file": "k.module_id", "phase": "CUDA (Device code)", "result": "hit"
    }  # fmt: skip


# -- the per-file record and the key, from the real sccache -------------------------------------


def test_the_log_of_a_real_sccache_says_what_each_step_got(tmp_path: Path) -> None:
    """The pinned sccache against real gcc and Debian's redis-server: a miss, a hit from
    another machine's empty local cache through the shared one, each by file."""
    binary = sccache()
    (tmp_path / "kernel.c").write_text("int kernel(int x) { return 2 * x; }\n")
    with redis_server() as server:
        for machine in ("one", "two"):
            env = {
                "PATH": os.environ["PATH"], "HOME": str(tmp_path),
                "SCCACHE_DIR": str(tmp_path / machine), "SCCACHE_IDLE_TIMEOUT": "0",
                "SCCACHE_SERVER_UDS": str(tmp_path / f"{machine}.sock"),
                "SCCACHE_MULTILEVEL_CHAIN": "disk,redis",
                "SCCACHE_REDIS_ENDPOINT": f"redis://127.0.0.1:{server.port}",
                "SCCACHE_ERROR_LOG": str(tmp_path / f"{machine}.log"),
                "SCCACHE_LOG": "sccache::server=debug",
            }  # fmt: skip
            subprocess.run([binary, "--start-server"], env=env, check=True, capture_output=True)
            try:
                subprocess.run(
                    [binary, "gcc", "-c", "kernel.c", "-o", "kernel.o"],
                    cwd=tmp_path, env={k: v for k, v in env.items() if k != "SCCACHE_LOG"},
                    check=True, capture_output=True, timeout=120,
                )  # fmt: skip
                stats = subprocess.run(
                    [binary, "--show-stats", "--stats-format", "json"], env=env, check=True,
                    capture_output=True, text=True,
                ).stdout  # fmt: skip
            finally:
                subprocess.run([binary, "--stop-server"], env=env, capture_output=True, check=False)
            records = parse_server_log((tmp_path / f"{machine}.log").read_text())
            counts = CacheCounts.from_stats(parse_stats_json(stats))
            if machine == "one":
                assert [(r.file, r.phase, r.result) for r in records] == [
                    ("kernel.o", "C/C++", "miss")
                ]
                assert (counts.misses, counts.remote_hits) == (1, 0)
            else:
                assert [(r.file, r.result) for r in records] == [("kernel.o", "hit")]
                assert (counts.misses, counts.remote_hits, counts.local_hits) == (0, 1, 0)


def _launcher(tmp_path: Path, stand_in: str) -> tuple[Path, Path]:
    """The real launcher (sh, GNU coreutils) in front of a stand-in for sccache."""
    toolkit = tmp_path / "toolkit-id"
    toolkit.write_text("nvcc 13.0 sha256:abc\n")
    launcher_dir = tmp_path / "launcher"
    launcher_dir.mkdir(exist_ok=True)
    real = tmp_path / "real-sccache"
    real.write_text(stand_in)
    launcher = launcher_dir / "sccache"
    launcher.write_text(
        launcher_script(
            str(toolkit), sccache=str(real), names=str(tmp_path / "names"),
            fallbacks=str(tmp_path / "fallbacks.log"), off=str(tmp_path / "off"),
        )
    )  # fmt: skip
    for script in (launcher, real):
        script.chmod(0o755)
    return launcher, launcher_dir


def namespace_of(tmp_path: Path, env: dict[str, str]) -> str:
    """The key digest the launcher gives sccache (a stand-in prints it)."""
    launcher, launcher_dir = _launcher(
        tmp_path, '#!/bin/sh\nprintf "%s" "$SCCACHE_C_CUSTOM_CACHE_BUSTER"\n'
    )
    path = f"{launcher_dir}:/usr/bin:/bin"
    done = subprocess.run(
        [str(launcher), "/usr/local/cuda/bin/nvcc"], env={"PATH": path, **env},
        capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    assert done.stdout.startswith("archwheel-") and len(done.stdout) == 42
    return done.stdout


def test_the_launcher_drops_archwheels_threads_where_the_compile_has_its_own(
    tmp_path: Path,
) -> None:
    """The real launcher in front of a stand-in sccache that prints the NVCC_APPEND_FLAGS it
    was given (tests/integration/nvcc/test_nvcc_threads.py runs real nvcc behind it)."""
    launcher, launcher_dir = _launcher(
        tmp_path,
        '#!/bin/sh\nprintf "%s|%s" "$NVCC_APPEND_FLAGS" "$SCCACHE_C_CUSTOM_CACHE_BUSTER"\n',
    )

    def given(flags: str, *args: str) -> tuple[str, str]:
        done = subprocess.run(
            [str(launcher), "/usr/local/cuda/bin/nvcc", *args],
            env={"PATH": f"{launcher_dir}:/usr/bin:/bin", "NVCC_APPEND_FLAGS": flags},
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
        seen, _, namespace = done.stdout.partition("|")
        return seen, namespace

    ours = "--time /build/t.csv --threads 2"
    assert given(ours, "-c", "a.cu")[0] == ours
    for own in (["--threads", "4"], ["--threads=4"], ["-t", "4"], ["-t4"], ["-t=4"]):
        assert given(ours, "-c", "a.cu", *own)[0] == "--time /build/t.csv", own
    assert given("--threads 2", "-t4")[0] == ""
    # -time is not -t; a --threads of the recipe's own (not trailing) stays
    assert given(ours, "-time", "x.csv")[0] == ours
    assert given("--threads 3 -lineinfo", "-t4")[0] == "--threads 3 -lineinfo"
    # the cache key does not change with it
    assert given(ours, "-t4")[1] == given(ours)[1]


def test_nvcc_threads_do_not_enter_the_cache_key(tmp_path: Path) -> None:
    bare = namespace_of(tmp_path, {})
    assert namespace_of(tmp_path, {"NVCC_APPEND_FLAGS": "--threads 2"}) == bare
    assert namespace_of(tmp_path, {"NVCC_APPEND_FLAGS": " --threads 16"}) == bare
    own = namespace_of(tmp_path, {"NVCC_APPEND_FLAGS": "-lineinfo"})
    assert own != bare  # the recipe's own flags are keyed
    assert namespace_of(tmp_path, {"NVCC_APPEND_FLAGS": "-lineinfo --threads 4"}) == own
    # only a trailing --threads is archwheel's: one inside the recipe's flags stays keyed
    assert namespace_of(tmp_path, {"NVCC_APPEND_FLAGS": "--threads 4 -lineinfo"}) != own
    assert namespace_of(tmp_path, {"NVCC_PREPEND_FLAGS": "--threads 2"}) != bare


def test_a_failing_sccache_costs_the_cache_not_the_compile(tmp_path: Path) -> None:
    """sccache's own error ("sccache: error: ...") runs the compiler without it, says so and
    logs why; the compiler's own failure stands."""
    launcher, launcher_dir = _launcher(
        tmp_path, "#!/bin/sh\necho 'sccache: error: Server startup failed: x' >&2\nexit 2\n"
    )
    compiler = tmp_path / "cc"
    compiler.write_text('#!/bin/sh\necho "compiled $*"\nexit ${FAIL:-0}\n')
    compiler.chmod(0o755)
    env = {"PATH": f"{launcher_dir}:/usr/bin:/bin"}
    done = subprocess.run([str(launcher), str(compiler), "-c", "a.c"], env=env,
                          capture_output=True, text=True, check=False, timeout=30)  # fmt: skip
    assert done.returncode == 0 and done.stdout == "compiled -c a.c\n"
    assert "failed (Server startup failed: x); compiling without it" in done.stderr
    assert not any(line.startswith("sccache: error") for line in done.stderr.splitlines())
    assert "Server startup failed" in (tmp_path / "fallbacks.log").read_text()
    failed = subprocess.run([str(launcher), str(compiler), "-c", "a.c"], env={**env, "FAIL": "1"},
                            capture_output=True, text=True, check=False, timeout=30)  # fmt: skip
    assert failed.returncode == 1  # the compiler's own failure, run without the cache
    # a compiler error through a working sccache stands as it is
    ok_launcher, ok_dir = _launcher(tmp_path, '#!/bin/sh\nshift 0\n"$@"\n')
    failed = subprocess.run([str(ok_launcher), str(compiler), "-c"], env={**env, "FAIL": "3",
                            "PATH": f"{ok_dir}:/usr/bin:/bin"}, capture_output=True, text=True,
                            check=False, timeout=30)  # fmt: skip
    assert failed.returncode == 3
    # no key (no toolkit identity): no cache, the compiler runs
    (tmp_path / "toolkit-id").unlink()
    done = subprocess.run([str(ok_launcher), str(compiler), "x"], env={**env, "PATH": f"{ok_dir}:/usr/bin:/bin"},
                          capture_output=True, text=True, check=False, timeout=30)  # fmt: skip
    assert done.returncode == 0 and "no compiler-cache key" in done.stderr


def test_the_launcher_resolves_archwheels_own_compiler_names(tmp_path: Path) -> None:
    """A name in the compiler-names folder (or the launcher's own) is replaced by the real
    compiler further down PATH: sccache never wraps archwheel's wrapper."""
    launcher, launcher_dir = _launcher(tmp_path, '#!/bin/sh\nprintf "%s" "$1"\n')
    names, real_dir = tmp_path / "names", tmp_path / "bin"
    names.mkdir()
    real_dir.mkdir()
    for folder in (names, real_dir):
        (folder / "x86_64-linux-gnu-g++").write_text("#!/bin/sh\n")
        (folder / "x86_64-linux-gnu-g++").chmod(0o755)
    env = {"PATH": f"{launcher_dir}:{names}:{real_dir}:/usr/bin:/bin"}
    for given in ("x86_64-linux-gnu-g++", str(names / "x86_64-linux-gnu-g++")):
        done = subprocess.run([str(launcher), given, "-c", "a.cc"], env=env,
                              capture_output=True, text=True, check=True, timeout=30)  # fmt: skip
        assert done.stdout == str(real_dir / "x86_64-linux-gnu-g++")
    # sccache's own options pass through
    done = subprocess.run([str(launcher), "--show-stats"], env=env, capture_output=True,
                          text=True, check=True, timeout=30)  # fmt: skip
    assert done.stdout == "--show-stats"


def test_a_call_sccache_reports_done_but_leaves_no_object_is_compiled_without_it(
    tmp_path: Path,
) -> None:
    """sccache 0.16.0 with ``nvcc -objtemp`` exits 0 and writes no object (seen, real nvcc):
    the launcher runs the compiler itself, logs why, and gives sccache nvcc's call without
    ``-objtemp`` (which sccache's fixed temporary names make needless)."""
    launcher, launcher_dir = _launcher(
        tmp_path,
        '#!/bin/sh\nprintf "%s\\n" "$*" > "$SEEN"\nexit 0\n',  # leaves nothing
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    nvcc = bin_dir / "nvcc"
    nvcc.write_text('#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && : > "$2"; shift; done\n')
    nvcc.chmod(0o755)
    out = tmp_path / "k.o"
    env = {"PATH": f"{launcher_dir}:/usr/bin:/bin", "SEEN": str(tmp_path / "seen")}
    done = subprocess.run(
        [str(launcher), str(nvcc), "-c", "k.cu", "-o", str(out), "-objtemp"], env=env,
        capture_output=True, text=True, check=False, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0 and out.is_file()
    assert "-objtemp" not in (tmp_path / "seen").read_text()  # sccache's call went without it
    assert f"sccache left no {out}" in (tmp_path / "fallbacks.log").read_text()
    assert "compiling without it" in done.stderr
    # output to standard output (CMake's probes: -o -) or a device is no file to look for
    (tmp_path / "fallbacks.log").unlink()
    for target in ("-", "/dev/null"):
        done = subprocess.run(
            [str(launcher), str(nvcc), "-E", "k.cu", "-o", target], env=env, cwd=tmp_path,
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
        assert done.returncode == 0 and not (tmp_path / "fallbacks.log").exists(), target


def test_a_debug_compile_records_no_switches(tmp_path: Path) -> None:
    """A C/C++ compile with ``-g`` gets ``-gno-record-gcc-switches`` (a farm's server adds
    ``-fdirectives-only``, which gcc would record in the debug info); a compile without debug
    info, a link and nvcc are left as they are. The same holds with the cache off."""
    launcher, launcher_dir = _launcher(tmp_path, '#!/bin/sh\nshift\necho "$*"\n')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("x86_64-linux-gnu-g++", "gcc", "cc", "nvcc"):
        (bin_dir / name).write_text('#!/bin/sh\necho "plain $*"\n')
        (bin_dir / name).chmod(0o755)
    env = {"PATH": f"{launcher_dir}:{bin_dir}:/usr/bin:/bin"}

    def given(*args: str) -> str:
        done = subprocess.run([str(launcher), *args], env=env, capture_output=True, text=True,
                              check=True, timeout=30)  # fmt: skip
        return done.stdout.strip()

    flag = "-gno-record-gcc-switches"
    assert given("x86_64-linux-gnu-g++", "-g", "-O2", "-c", "a.cc") == f"-g -O2 -c a.cc {flag}"
    assert given("gcc", "-c", "a.c", "-ggdb") == f"-c a.c -ggdb {flag}"
    assert given("cc", "-O2", "-c", "a.c") == "-O2 -c a.c"  # no debug info
    assert given("gcc", "-g", "-shared", "a.o") == "-g -shared a.o"  # a link
    assert given("nvcc", "-g", "-c", "a.cu") == "-g -c a.cu"
    (tmp_path / "off").write_text("")  # no daemon: the compiler runs alone, with the flag too
    assert given("gcc", "-g", "-c", "a.c") == f"plain -g -c a.c {flag}"
