"""``--cache-url`` parsing, the plan with a remote cache, and the hit counts (no engine)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from archwheel.effects.pipconfig import PipSettings
from archwheel.errors import UsageError
from archwheel.exit_codes import EXIT_USAGE, exit_code_for
from archwheel.facts.catalog import load_facts
from archwheel.wheelbuild.jobs import GIB, HostResources, choose_jobs
from archwheel.wheelbuild.plan import (
    BuildOptions,
    BuildPlan,
    check_arch_list,
    make_plan,
    without_remote_cache,
)
from archwheel.wheelbuild.recipe import load_recipe
from archwheel.wheelbuild.remote_cache import (
    KEYED_VARIABLES,
    LAUNCHER_DIR,
    REMOTE_MOUNT,
    CacheCounts,
    launcher_script,
    parse_cache_url,
    parse_stats_log,
)
from archwheel.wheelbuild.source import ResolvedSource
from tests.support.cli import CliRun
from tests.support.components import require
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
    assert "s3cret" not in url.container_url()
    assert url.container_url().startswith(f"redis+unix:{REMOTE_MOUNT}/")


def test_unix_url() -> None:
    url = parse_cache_url("redis+unix:/run/redis/redis.sock?db=3")
    assert url.address.socket_path == Path("/run/redis/redis.sock") and url.db == 3
    assert url.container_url() == f"redis+unix:{REMOTE_MOUNT}/redis.sock?db=3"


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
    env = compile_phase.steps[-1].env
    assert env["CCACHE_REMOTE_STORAGE"] == f"redis+unix:{REMOTE_MOUNT}/redis.sock"
    assert env["PATH"].startswith(f"{LAUNCHER_DIR}:")
    assert "pw" not in " ".join(plan.build_env.values())
    rows = dict(plan.summary_rows())
    assert "redis://:***@10.0.0.5:6379" in rows["compiler cache"]
    local = without_remote_cache(plan)
    assert local.remote_cache is None
    assert all("CCACHE_REMOTE_STORAGE" not in s.env for p in local.phases for s in p.steps)
    assert "CCACHE_REMOTE_STORAGE" not in local.build_env


def test_no_remote_cache_without_the_cache_or_when_checking_reproducibility() -> None:
    url = parse_cache_url("redis://h:1")
    for plan in (
        _plan(cache_url=url, ccache_volume=None),
        _plan(cache_url=url, check_reproducible=True),
    ):
        assert plan.remote_cache is None
        env = plan.phases[-1].steps[-1].env
        assert "CCACHE_REMOTE_STORAGE" not in env and env["CCACHE_DISABLE"] == "1"
        assert not env["PATH"].startswith(LAUNCHER_DIR)
        assert "cache-key" not in [s.name for s in plan.phases[-1].steps]


def test_launcher_keys_the_environment_flags() -> None:
    script = launcher_script("/k")
    for name in ("NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS"):
        assert name in KEYED_VARIABLES and name in script
    assert "CCACHE_NAMESPACE" in script and "CCACHE_DISABLE=1" in script


def test_counts_split_local_and_remote_hits() -> None:
    counts = CacheCounts.from_stats(
        {"direct_cache_hit": 8, "preprocessed_cache_hit": 1, "cache_miss": 1,
         "remote_storage_hit": 6, "remote_storage_error": 1, "remote_storage_timeout": 1}
    )  # fmt: skip
    assert (counts.local_hits, counts.remote_hits, counts.misses) == (3, 6, 1)
    assert counts.remote_errors == 2 and counts.compiles == 10
    assert counts.rates() == {"local": 0.3, "remote": 0.6, "miss": 0.1}
    assert CacheCounts.from_stats({}).rates() == {"local": 0.0, "remote": 0.0, "miss": 0.0}


# -- the per-file record: ccache's stats log, written by the real ccache ------------------------


def _ccache(tmp: Path, cache: str, remote: str | None, *args: str) -> None:
    env = {
        "PATH": os.environ["PATH"], "HOME": str(tmp), "CCACHE_DIR": str(tmp / cache),
        "CCACHE_STATSLOG": str(tmp / "stats.log"),
        **({"CCACHE_REMOTE_STORAGE": remote} if remote else {}),
    }  # fmt: skip
    subprocess.run(["ccache", "gcc", *args], cwd=tmp, env=env, check=True, capture_output=True)


def test_the_stats_log_of_a_real_ccache_says_where_each_object_came_from(tmp_path: Path) -> None:
    """Debian's ccache 4.7 against Debian's redis-server: a miss, a local hit, a remote hit from
    another machine's empty cache, and a link call ccache does not cache, each by file."""
    require(shutil.which("ccache") is not None, "ccache not installed (apt install ccache)")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "kernel.c").write_text("int kernel(int x) { return 2 * x; }\n")
    (tmp_path / "src" / "main.c").write_text(
        "int kernel(int); int main(void) { return kernel(0); }\n"
    )
    with redis_server() as server:
        src = tmp_path / "src"  # absolute paths, as CMake passes them
        compile_kernel = ("-c", str(src / "kernel.c"), "-o", "kernel.o")
        _ccache(tmp_path, "one", server.url, *compile_kernel)  # miss, written to the server
        _ccache(tmp_path, "one", server.url, *compile_kernel)  # this machine's own entry
        _ccache(tmp_path, "two", server.url, *compile_kernel)  # another machine: the server's
        _ccache(tmp_path, "two", server.url, "-c", str(src / "main.c"), "-o", "main.o")
        _ccache(tmp_path, "two", server.url, "kernel.o", "main.o", "-o", "prog")
    records = parse_stats_log((tmp_path / "stats.log").read_text(), base=str(tmp_path / "src"))
    assert [(r.file, r.result) for r in records] == [
        ("kernel.c", "miss"),
        ("kernel.c", "local"),
        ("kernel.c", "remote"),
        ("main.c", "miss"),
        (records[-1].file, "called_for_link"),
    ]
    assert records[0].to_json_dict() == {"file": "kernel.c", "result": "miss"}


def test_a_stats_log_is_parsed_within_its_limit_and_tolerates_junk() -> None:
    text = (
        "junk before\n# a.cu\ncache_miss\n\n# b.cu\ndirect_cache_hit\nremote_storage_hit\n# c.cu\n"
    )
    records = parse_stats_log(text, limit=2)
    assert [(r.file, r.result) for r in records] == [("a.cu", "miss"), ("b.cu", "remote")]
    assert parse_stats_log("# c.cu\n")[0].result == "uncounted"
    assert parse_stats_log("") == ()


def namespace_of(tmp_path: Path, env: dict[str, str]) -> str:
    """Run the real launcher (sh, GNU coreutils) in front of a stand-in ``ccache`` that prints
    the namespace the launcher computed."""
    toolkit = tmp_path / "toolkit-id"
    toolkit.write_text("nvcc 13.0 sha256:abc\n")
    launcher_dir, real_dir = tmp_path / "launcher", tmp_path / "real"
    launcher_dir.mkdir(exist_ok=True)
    real_dir.mkdir(exist_ok=True)
    launcher = launcher_dir / "ccache"
    launcher.write_text(launcher_script(str(toolkit)))
    stand_in = real_dir / "ccache"
    stand_in.write_text('#!/bin/sh\nprintf "%s" "$CCACHE_NAMESPACE"\n')
    for script in (launcher, stand_in):
        script.chmod(0o755)
    path = f"{launcher_dir}:{real_dir}:/usr/bin:/bin"
    done = subprocess.run(
        [str(launcher), "nvcc"], env={"PATH": path, **env}, capture_output=True, text=True,
        check=True, timeout=30,
    )  # fmt: skip
    assert done.stdout.startswith("archwheel-") and done.stdout != "archwheel-none"
    return done.stdout


def test_the_launcher_drops_archwheels_threads_where_the_compile_has_its_own(
    tmp_path: Path,
) -> None:
    """The real launcher in front of a stand-in ``ccache`` that prints the NVCC_APPEND_FLAGS it
    was given (tests/integration/nvcc/test_nvcc_threads.py runs real nvcc behind it)."""
    toolkit = tmp_path / "toolkit-id"
    toolkit.write_text("nvcc 13.0 sha256:abc\n")
    launcher_dir, real_dir = tmp_path / "launcher", tmp_path / "real"
    launcher_dir.mkdir()
    real_dir.mkdir()
    launcher = launcher_dir / "ccache"
    launcher.write_text(launcher_script(str(toolkit)))
    stand_in = real_dir / "ccache"
    stand_in.write_text('#!/bin/sh\nprintf "%s|%s" "$NVCC_APPEND_FLAGS" "$CCACHE_NAMESPACE"\n')
    for script in (launcher, stand_in):
        script.chmod(0o755)

    def given(flags: str, *args: str) -> tuple[str, str]:
        done = subprocess.run(
            [str(launcher), "/usr/local/cuda/bin/nvcc", *args],
            env={"PATH": f"{launcher_dir}:{real_dir}:/usr/bin:/bin", "NVCC_APPEND_FLAGS": flags},
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
