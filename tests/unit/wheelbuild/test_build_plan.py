"""The build plan, job count, pip passthrough and arch-list checks: pure, no container engine."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from archwheel.effects.pipconfig import CONTAINER_CA_PATH, PipSettings, local_folder
from archwheel.errors import ArchListError, RecipeError, UsageError
from archwheel.facts.catalog import load_facts
from archwheel.interfaces.render.build import plan_json
from archwheel.wheelbuild.compile.jobs import GIB, HostResources, choose_jobs, detect_host_resources
from archwheel.wheelbuild.planning.plan import (
    FALLBACK_BUILD_USER,
    build_user,
    check_arch_list,
)
from archwheel.wheelbuild.recipes.recipe import load_recipe
from archwheel.wheelbuild.recipes.recipe_model import Recipe
from tests.support.cli import CliRun
from tests.support.paths import ROOT
from tests.support.plans import FACTS, plan_for


@pytest.fixture(scope="module")
def example() -> Recipe:
    return load_recipe(ROOT / "recipes" / "example.toml", facts=FACTS)


@pytest.fixture(scope="module")
def pytorch() -> Recipe:
    return load_recipe(ROOT / "recipes" / "pytorch-2.14.1-cu130.toml", facts=FACTS)


# -- the plan ----------------------------------------------------------------------------------


def test_example_plan_compiles_offline_in_one_container(example: Recipe) -> None:
    plan = plan_for(example)
    assert len(plan.phases) == 1  # no requirements: nothing to fetch, no network at all
    (phase,) = plan.phases
    assert phase.network == "none"
    assert [s.name for s in phase.steps] == [
        "cache-owner",
        "copy-source",
        "cache-key",
        "cache-start",
        "compile",
    ]
    compile_step = phase.steps[-1]
    env = compile_step.env
    assert env["CUDA_GENCODE_FLAGS"] == (
        "-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90"
    )
    assert env["MAX_JOBS"] == "3"  # 8 cores, but 6 GiB at 2 GiB per job
    assert env["SOURCE_DATE_EPOCH"] == "1700000000"
    assert env["SCCACHE_DIR"] == "/sccache" and env["SCCACHE_IDLE_TIMEOUT"] == "0"
    assert env["HOME"] == "/build/home"
    assert env["NVCC_LAUNCHER"] == "sccache"
    assert "CCACHE_DISABLE" not in env
    assert compile_step.user == "1234:567"
    assert compile_step.workdir == "/build/src"
    assert compile_step.command[:3] == ("bash", "-eo", "pipefail")
    assert phase.steps[0].user == "0:0"  # only the cache volume's ownership fix runs as root
    mounts = {m.target: m for m in phase.mounts}
    assert mounts["/src"].read_only
    assert mounts["/src"].source == "/checkout/src"
    assert mounts["/sccache"].volume
    assert plan.network_during_compile is False


def test_requirements_are_fetched_with_network_then_compiled_without(pytorch: Recipe) -> None:
    plan = plan_for(pytorch, "9.0;12.0+PTX", python="3.12")
    prepare, compile_phase = plan.phases
    assert (prepare.network, compile_phase.network) == ("host", "none")
    install = prepare.steps[-1]
    assert install.name == "requirements"
    assert "ninja" in install.shell()
    assert install.env["PIP_CERT"] == CONTAINER_CA_PATH
    assert install.env["PIP_EXTRA_INDEX_URL"] == (
        "file:///opt/pypi/simple https://mirror.example/simple"
    )
    targets = {m.target: m for m in prepare.mounts}
    assert targets[CONTAINER_CA_PATH].read_only
    assert targets["/opt/pypi"].read_only  # the parent of simple/, so ../../files resolves
    assert targets["/opt/wheels"].read_only
    assert "/opt/pypi" not in {m.target for m in compile_phase.mounts}
    env = compile_phase.steps[-1].env
    assert env["TORCH_CUDA_ARCH_LIST"] == "9.0;12.0+PTX"
    # archwheel's sccache launcher first (the cache key), then the venv before the image
    assert env["PATH"].startswith("/build/.archwheel/bin:/build/venv/bin:")
    assert env["USE_CUDA"] == "1"
    assert plan.python == "3.12"


def test_reproducibility_check_disables_the_cache(example: Recipe) -> None:
    plan = plan_for(example, check_reproducible=True)
    env = plan.build_env
    assert env["CCACHE_DISABLE"] == "1"
    # sccache still runs the compilers (the same objects as a cached build), caching nothing
    assert env["SCCACHE_NO_CACHE"] == "1" and env["SCCACHE_DIR"].startswith("/build/")
    assert plan.ccache_volume is None
    assert all(not m.volume for phase in plan.phases for m in phase.mounts)
    assert [s.name for s in plan.phases[0].steps] == [
        "copy-source", "cache-key", "cache-start", "compile"
    ]  # fmt: skip


def test_no_cache_option(example: Recipe) -> None:
    plan = plan_for(example, ccache_volume=None)
    assert plan.build_env["CCACHE_DISABLE"] == "1" and plan.build_env["SCCACHE_NO_CACHE"] == "1"
    assert "SCCACHE_NO_CACHE" not in plan_for(example).build_env


def test_plan_summary_and_json(example: Recipe) -> None:
    plan = plan_for(example)
    rows = dict(plan.summary_rows())
    assert rows["arch list"].startswith("8.0;9.0 -> CUDA_GENCODE_FLAGS=")
    assert "network none" in rows["phase compile"]
    assert rows["SOURCE_DATE_EPOCH"].startswith("1700000000")
    document = plan_json(plan)
    assert document["schema_version"] == 1
    phases = document["phases"]
    assert isinstance(phases, list)
    assert phases[0]["network"] == "none"


def test_build_user_is_never_root() -> None:
    assert build_user(0, 0) == FALLBACK_BUILD_USER
    assert FALLBACK_BUILD_USER[0] != 0
    assert build_user(1001, 1002) == (1001, 1002)


# -- arch lists against the recipe ----------------------------------------------------------------


def test_arch_list_defaults_to_the_recipes(example: Recipe) -> None:
    assert str(check_arch_list(example, None, facts=FACTS)) == "8.0;9.0"


@pytest.mark.parametrize(
    ("arch", "message"),
    [
        ("7.0", "Volta) was removed in CUDA 13.0"),
        ("8.0;9.9", "invalid arch '9.9'"),
        ("sm_12", "does not exist"),
    ],
)
def test_bad_arch_for_the_example_toolkit(example: Recipe, arch: str, message: str) -> None:
    with pytest.raises(ArchListError) as info:
        check_arch_list(example, arch, facts=FACTS)
    assert message in info.value.one_line()


def test_arch_the_cu128_toolkit_cannot_target() -> None:
    recipe = load_recipe(ROOT / "recipes" / "pytorch-2.14.1-cu128.toml", facts=FACTS)
    with pytest.raises(ArchListError) as info:
        check_arch_list(recipe, "9.0;12.1", facts=FACTS)
    assert "sm_121 needs CUDA >= 12.9" in info.value.one_line()
    assert "recipe pytorch-2.14.1-cu128 uses CUDA 12.8" in info.value.one_line()


def test_family_targets_enter_torch_arch_list_only_where_its_reader_takes_them(
    pytorch: Recipe,
) -> None:
    # PyTorch's own build reads TORCH_CUDA_ARCH_LIST with select_compute_arch.cmake, which takes
    # X.Yf; cpp_extension does not (tests/test_arch_grammars.py refuses it for an extension).
    assert pytorch.arch.consumer == "torch-cmake"
    assert check_arch_list(pytorch, "10.0f", facts=FACTS).value == "10.0f"


def test_family_targets_can_enter_gencode_flags(example: Recipe) -> None:
    checked = check_arch_list(example, "10.0f;12.0+PTX", facts=FACTS)
    arch = checked.arch_list
    assert checked.value == example.arch.render(arch)
    assert "-gencode=arch=compute_100f,code=sm_100f" in example.arch.render(arch)


# -- jobs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cpus", "memory_gib", "per_job", "expected"),
    [
        (2, 24, 1.0, 2),  # cores bound
        (64, 32, 4.0, 8),  # memory bound: a big box with little RAM per core
        (16, 3, 4.0, 1),  # never below one
    ],
)
def test_jobs_from_cores_and_memory(
    cpus: int, memory_gib: int, per_job: float, expected: int
) -> None:
    count = choose_jobs(HostResources(cpus, memory_gib * GIB), per_job)
    assert count.jobs == expected
    assert f"{cpus} cores" in count.reason


def test_requested_jobs_win_with_a_warning() -> None:
    count = choose_jobs(HostResources(2, 4 * GIB), 4.0, requested=6)
    assert count.jobs == 6
    assert "more than the memory allows" in count.reason


def test_host_resources_respect_cgroup_limits(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    cgroup = tmp_path / "cgroup"
    proc.mkdir()
    cgroup.mkdir()
    (proc / "meminfo").write_text("MemTotal: 100000000 kB\nMemAvailable: 50000000 kB\n")
    (cgroup / "cpu.max").write_text("150000 100000\n")
    (cgroup / "memory.max").write_text(str(8 * GIB))
    (cgroup / "memory.current").write_text(str(2 * GIB))
    host = detect_host_resources(proc, cgroup)
    assert host.cpus == 1
    assert host.memory_bytes == 6 * GIB


# -- pip passthrough ---------------------------------------------------------------------------


def test_pip_config_list_is_parsed_with_pips_precedence() -> None:
    lines = [
        ":env:.cert='/etc/ssl/certs/ca-certificates.crt'",
        ":env:.find-links='/opt/wheels'",
        "global.cert='/other/ca.pem'",
        "global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'",
        "global.find-links='/ignored'",
        "global.index-url='https://pypi.example/simple'",
        "user.index-url='https://user.example/simple'",
        "not a config line",
    ]
    settings = PipSettings.from_config_lines(lines)
    assert settings.ca_bundle == Path("/etc/ssl/certs/ca-certificates.crt")
    assert settings.find_links == ("/opt/wheels",)
    assert settings.index_url == "https://user.example/simple"
    assert settings.extra_index_urls == ("file:///opt/pypi/simple", "file:///opt/pypi-more/simple")


def test_command_line_overrides_pip_settings() -> None:
    base = PipSettings(index_url="https://a/simple", find_links=("/w",))
    merged = base.override(index_url="https://b/simple", find_links=("/x",), ca_bundle=Path("/ca"))
    assert merged.index_url == "https://b/simple"
    assert merged.find_links == ("/w", "/x")
    assert merged.host_args()[-2:] == ["--cert", "/ca"]


def test_local_folders_are_mounted_and_remote_urls_pass_through(tmp_path: Path) -> None:
    (tmp_path / "mirror" / "simple").mkdir(parents=True)
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    settings = PipSettings(
        index_url="https://index.example/simple",
        extra_index_urls=(f"file://{tmp_path}/mirror/simple",),
        ca_bundle=ca,
    ).validated()
    targets = {m.target: m for m in settings.mounts()}
    assert set(targets) == {CONTAINER_CA_PATH, str(tmp_path / "mirror")}
    assert all(m.read_only for m in targets.values())
    assert settings.container_env()["PIP_INDEX_URL"] == "https://index.example/simple"
    assert local_folder("https://index.example/simple") is None


def test_missing_pip_locations_fail_early(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"CA bundle .* does not exist"):
        PipSettings(ca_bundle=tmp_path / "nope.pem").validated()
    with pytest.raises(UsageError, match="does not exist"):
        PipSettings(find_links=(str(tmp_path / "none"),)).validated()


def test_pip_folder_that_would_shadow_the_build_is_refused() -> None:
    with pytest.raises(UsageError, match="would shadow"):
        PipSettings(find_links=("/usr/share/wheels",)).mounts()


# -- the command line, without an engine ----------------------------------------------------------


def test_cli_plan_only_prints_the_plan_as_json(cli_run: CliRun) -> None:
    code, out, err = cli_run("build", "--recipe", "example", "--arch", "9.0+PTX", "--plan",
                             "--format", "json", "--no-host-pip-config")  # fmt: skip
    assert code == 0, err
    document = json.loads(out)
    assert document["environment"]["CUDA_GENCODE_FLAGS"] == (
        "-gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90"
    )
    assert [p["network"] for p in document["phases"]] == ["none"]
    assert "archwheel build plan" in err


def test_cli_without_recipe_uses_the_newest_pytorch(cli_run: CliRun) -> None:
    # 7.0 is valid for CUDA 12.8 but not 13.x: the message proves which recipe was chosen
    # (the newest buildable one, 2.15.0 with CUDA 13.2), and it comes before any source is fetched.
    code, _, err = cli_run("build", "--arch", "7.0", "--plan", "--no-host-pip-config")
    assert code == 2
    assert "(recipe pytorch-2.15.0-cu132 uses CUDA 13.2)" in " ".join(err.split())


def test_cli_lists_recipes(cli_run: CliRun) -> None:
    code, out, _ = cli_run("build", "--list-recipes", "--format", "json")
    assert code == 0
    names = {r["name"]: r for r in json.loads(out)["recipes"]}
    assert names["example"]["default_arch"] == "8.0;9.0"
    assert names["pytorch-2.14.1-cu130"]["cuda"] == "13.0"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--recipe", "example", "--jobs", "0"], "--jobs must be at least 1"),
        (["--recipe", "example", "--ca-bundle", "/nonexistent.pem"], "does not exist"),
        (["--recipe", "nope"], "unknown recipe 'nope'"),
    ],
)
def test_cli_usage_errors_are_one_line(cli_run: CliRun, args: list[str], message: str) -> None:
    code, _, err = cli_run("build", *args, "--plan")
    assert code == 2
    assert message in err
    assert "Traceback" not in err


# -- free-threaded CPython ------------------------------------------------------------------------


def test_free_threaded_python_is_planned_with_its_own_wheel_tag(pytorch: Recipe) -> None:
    assert "3.14t" in pytorch.python_versions  # in the official matrix
    plan = plan_for(pytorch, arch="9.0", python="3.14t")
    rows = dict(plan.summary_rows())
    assert rows["python"] == "3.14t (free-threaded; wheel tag cp314-cp314t)"
    assert dict(plan_for(pytorch, arch="9.0", python="3.14").summary_rows())["python"] == (
        "3.14 (with the GIL; wheel tag cp314-cp314)"
    )


def test_cli_plans_a_free_threaded_build(cli_run: CliRun) -> None:
    code, out, err = cli_run("build", "--recipe", "example", "--python", "3.11", "--plan",
                             "--format", "json", "--no-host-pip-config")  # fmt: skip
    assert code == 0, err
    code, _, err = cli_run("build", "--recipe", "example", "--python", "3.14t", "--plan",
                           "--no-host-pip-config")  # fmt: skip
    assert code == 2
    assert "does not support Python 3.14t" in err


def test_recipe_takes_free_threaded_versions_and_refuses_impossible_ones(tmp_path: Path) -> None:
    text = (ROOT / "recipes" / "example.toml").read_text()
    text = text.replace("../examples/", str(ROOT / "examples") + "/")
    good = tmp_path / "ft.toml"
    good.write_text(re.sub(r"(?m)^versions = .*$", 'versions = ["3.14t", "3.13t"]', text))
    assert load_recipe(good, facts=FACTS).python_versions == ("3.14t", "3.13t")
    bad = tmp_path / "bad.toml"
    bad.write_text(re.sub(r"(?m)^versions = .*$", 'versions = ["3.12t"]', text))
    with pytest.raises(RecipeError, match=r"free-threaded CPython exists from 3\.13 on"):
        load_recipe(bad, facts=FACTS)


# -- the base image pinned by its ID ------------------------------------------------------------


def _example_with(tmp_path: Path, line: str) -> Path:
    text = (ROOT / "recipes" / "example.toml").read_text()
    text = text.replace("../examples/", str(ROOT / "examples") + "/")
    path = tmp_path / "pinned.toml"
    path.write_text(text.replace('source = "pypi"', f'source = "pypi"\n{line}', 1))
    return path


def test_base_image_pin_is_read_planned_and_checked(tmp_path: Path) -> None:
    from archwheel.wheelbuild.images.baseimage import check_base_image_pin

    pin = "sha256:" + "ab" * 32
    recipe = load_recipe(_example_with(tmp_path, f'base_image_id = "{pin}"'), facts=FACTS)
    assert recipe.toolchain.base_image_id == pin
    rows = dict(plan_for(recipe).summary_rows())
    assert rows["base image"] == f"archwheel/debian:bookworm (pinned to {pin})"
    floating = load_recipe(ROOT / "recipes" / "example.toml", facts=FACTS)
    assert "tag not pinned" in dict(plan_for(floating).summary_rows())["base image"]
    check_base_image_pin("archwheel/debian:bookworm", pin, pin, recipe.path)  # the same: fine
    check_base_image_pin("archwheel/debian:bookworm", "sha256:" + "cd" * 32, None, recipe.path)
    with pytest.raises(RecipeError) as caught:
        check_base_image_pin("archwheel/debian:bookworm", "sha256:" + "cd" * 32, pin, recipe.path)
    assert "the tag names another image" in caught.value.one_line()
    assert "sha256:cdcdcdcdcdcd" in caught.value.one_line()


@pytest.mark.parametrize("value", ["abc", "sha256:" + "g" * 64, "sha256:" + "a" * 63])
def test_a_malformed_base_image_pin_is_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(RecipeError, match=r"base_image_id.*is not an image ID"):
        load_recipe(_example_with(tmp_path, f'base_image_id = "{value}"'), facts=FACTS)


def test_provenance_records_the_pin() -> None:
    from archwheel.wheelbuild.run.provenance import ImageRecord

    record = ImageRecord("b:1", "sha256:" + "a" * 64, "x:1", "sha256:" + "b" * 64, (), "sha256:p")
    assert record.base_pinned_id == "sha256:p"


# -- what the build command sees, and a plan without network ------------------------------------


def test_the_plan_shows_the_container_environment_and_what_the_arch_consumer_makes_of_it(
    cli_run: CliRun,
) -> None:
    code, out, err = cli_run("build", "--recipe", "example", "--arch", "8.0;9.0", "--plan",
                             "--format", "json", "--no-host-pip-config")  # fmt: skip
    assert code == 0, err
    document = json.loads(out)
    container = document["container"]
    assert container["nvcc"].startswith("/usr/local/cuda/bin/nvcc (CUDA_HOME=/usr/local/cuda)")
    assert "CUDA 13.0 from pypi" in container["nvcc"]
    # the example reads -gencode flags: nvcc's grammar reads them back as written
    assert container["arch variable"] == (
        "CUDA_GENCODE_FLAGS=-gencode=arch=compute_80,code=sm_80 "
        "-gencode=arch=compute_90,code=sm_90; nvcc's -gencode/-arch options makes it "
        "-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90"
    )
    # the text plan: every variable of the compile step, PATH whole, on standard output (the
    # answer of --plan); standard error keeps the messages only
    code, out, err = cli_run("build", "--recipe", "example", "--plan", "--no-host-pip-config")
    assert code == 0
    text = " ".join(out.split())
    assert "archwheel build plan" in text and "archwheel build plan" not in err
    assert "what the build command sees in its container" in text
    for name in ("PATH", "CUDA_HOME", "CUDA_GENCODE_FLAGS", "SOURCE_DATE_EPOCH", "MAX_JOBS"):
        assert name in document["environment"] and name in text


def test_a_torch_extension_plan_says_which_flags_torch_makes_of_the_arch_list() -> None:
    recipe = load_recipe(ROOT / "recipes" / "torch-scatter-2.1.2.toml", load_facts())
    checked = check_arch_list(recipe, "8.0;9.0", load_facts())
    assert "torch/utils/cpp_extension.py" in checked.reading
    assert checked.reading.endswith(
        "makes it -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90"
    )


def test_a_plan_is_made_without_network_and_marks_what_the_build_resolves(
    cli_run: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = tmp_path / "offline.toml"
    recipe.write_text(
        "schema_version = 1\n"
        f'[source]\ngit = "file://{tmp_path}/nowhere/project.git"\nref = "v1.0"\n'
        '[toolchain]\ncuda = "13.0"\nbase_image = "archwheel/debian:bookworm"\nsource = "pypi"\n'
        '[arch]\ndefault = "9.0"\n[build]\ncommand = "true"\n'
    )
    monkeypatch.setenv("ARCHWHEEL_CACHE", str(tmp_path / "cache"))
    code, out, err = cli_run("build", "--recipe", str(recipe), "--plan", "--format", "json",
                             "--no-host-pip-config")  # fmt: skip
    assert code == 0, err
    source = json.loads(out)["plan"]["source"]
    assert "not resolved here (git ls-remote failed" in source
    assert source.endswith("resolved when the build runs")
    # the build itself stops there, with the same one line and nothing in --out
    out_dir = tmp_path / "dist"
    code, _, err = cli_run("build", "--recipe", str(recipe), "--out", str(out_dir),
                           "--no-host-pip-config")  # fmt: skip
    errors = [line for line in err.splitlines() if line.startswith("archwheel: error")]
    assert code == 4 and len(errors) == 1 and "git ls-remote failed" in errors[0], err
    assert not out_dir.exists()


@pytest.mark.parametrize("options", [{}, {"ccache_volume": None}, {"check_reproducible": True}])
def test_the_work_folder_has_the_launcher_with_or_without_the_cache(
    example: Recipe, tmp_path: Path, options: dict[str, object]
) -> None:
    """Every build compiles through sccache (a build without the cache caching nothing), so the
    launcher, its ccache name and the forwarder are in every work folder: without them a build
    without the cache ran plain nvcc and made other bytes than a cached one."""
    from archwheel.wheelbuild.compile.remote_cache import FORWARDER, LAUNCHER_DIR
    from archwheel.wheelbuild.run import workfolder

    workfolder._prepare(tmp_path, plan_for(example, "8.0;9.0", **options))
    launcher = tmp_path / LAUNCHER_DIR.removeprefix("/build/") / "sccache"
    assert launcher.is_file() and os.access(launcher, os.X_OK)
    assert (launcher.parent / "ccache").resolve() == launcher.resolve()
    assert (tmp_path / FORWARDER.removeprefix("/build/")).is_file()
