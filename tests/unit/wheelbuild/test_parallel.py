"""Every core busy: how a build spreads its compiles (wheelbuild/compile/parallel.py), the recipe's
``[build.parallel]`` switches, the plan's row, and the serial variant the reproducibility check
builds. Pure: no container engine (the measured figures are the extension bench's)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import cast

import pytest

from archwheel.effects.engine import ContainerEngine
from archwheel.effects.pipconfig import PipSettings
from archwheel.errors import RecipeError
from archwheel.facts.catalog import load_facts
from archwheel.interfaces.render.build import plan_json
from archwheel.wheelbuild.compile import spread_hook
from archwheel.wheelbuild.compile.jobs import GIB, HostResources, JobCount, choose_jobs
from archwheel.wheelbuild.compile.nvcc_record import TIME_FLAG
from archwheel.wheelbuild.compile.parallel import (
    PARALLEL_CONFIG,
    SPREAD_DIR,
    ParallelSwitches,
    choose_parallel,
    ninja_off_in,
    own_threads_in,
)
from archwheel.wheelbuild.planning.plan import (
    BuildOptions,
    BuildPlan,
    check_arch_list,
    make_plan,
)
from archwheel.wheelbuild.planning.plan_variants import serial_variant
from archwheel.wheelbuild.recipes.recipe import load_recipe
from archwheel.wheelbuild.recipes.recipe_model import Recipe
from archwheel.wheelbuild.run.compile_watch import CompileWatch
from archwheel.wheelbuild.run.output import BuildOutput
from archwheel.wheelbuild.run.workfolder import WorkFolder, _prepare
from archwheel.wheelbuild.sources.source import ResolvedSource
from tests.support.paths import ROOT

FACTS = load_facts()
SCATTER = ROOT / "recipes" / "torch-scatter-2.1.2.toml"


def jobs(cpus: int, memory_gib: float, per_job: float = 2.0) -> JobCount:
    return choose_jobs(HostResources(cpus=cpus, memory_bytes=int(memory_gib * GIB)), per_job)


# -- choose_parallel ---------------------------------------------------------------------------


# The shape of torch-scatter 2.1.2's setup.py (trimmed): one module per main file and suffix,
# the cpu and cuda modules compiling the same main and cpu sources, with -DWITH_CUDA in one.
SCATTER_LIKE_SETUP = """\
import glob
import os.path as osp
from itertools import product

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

suffices = ['cuda', 'cpu']


def get_extensions():
    extensions = []
    for main, suffix in product(glob.glob(osp.join('csrc', '*.cpp')), suffices):
        define_macros = [('WITH_PYTHON', None)]
        if suffix == 'cuda':
            define_macros += [('WITH_CUDA', None)]
        name = main.split(osp.sep)[-1][:-4]
        sources = [main, osp.join('csrc', 'cpu', f'{name}_cpu.cpp')]
        if suffix == 'cuda':
            sources += [osp.join('csrc', 'cuda', f'{name}_cuda.cu')]
        Extension = CppExtension if suffix == 'cpu' else CUDAExtension
        extensions += [Extension(f'torch_scatter._{name}_{suffix}', sources,
                                 define_macros=define_macros)]
    return extensions


setup(
    name='torch_scatter',
    ext_modules=get_extensions(),
    cmdclass={
        'build_ext':
        BuildExtension.with_options(no_python_abi_suffix=True, use_ninja=False)
    },
)
"""


def test_a_project_whose_modules_share_sources_gets_no_build_ext_parallel() -> None:
    # Without ninja, build_ext --parallel builds the cpu and cuda modules at once, both writing
    # build/temp.../csrc/segment_coo.o: a module links whichever object was written last.
    ninja_off = ninja_off_in([("setup.py", SCATTER_LIKE_SETUP)])
    assert ninja_off == ("setup.py:32",)
    plan = choose_parallel(ParallelSwitches(), jobs(2, 20), archs=2, ninja_off=ninja_off)
    env = dict(plan.env)
    assert (plan.files, plan.threads, plan.build_ext) == (2, 2, False)
    assert "DIST_EXTRA_CONFIG" not in env and plan.config == ""
    assert env["CMAKE_BUILD_PARALLEL_LEVEL"] == "2"
    assert env["NVCC_APPEND_FLAGS"] == "--threads 2"  # each .cu file's archs still at once
    row = plan.describe("MAX_JOBS")
    assert "no build_ext --parallel (the project turns ninja off (setup.py:32), but " in row
    assert "the same source" in row and "build_ext = true" in row


def test_a_recipe_can_still_turn_build_ext_parallel_on() -> None:
    switches = ParallelSwitches(build_ext="on")
    plan = choose_parallel(switches, jobs(2, 20), archs=2, ninja_off=("setup.py:137",))
    assert (plan.files, plan.threads, plan.build_ext) == (2, 2, True)
    assert dict(plan.env)["DIST_EXTRA_CONFIG"] == PARALLEL_CONFIG
    assert plan.config == "[build_ext]\nparallel = 2\n"
    row = plan.describe("MAX_JOBS")
    assert "setuptools build_ext --parallel 2: [build.parallel] build_ext = true" in row
    assert "no two modules compile the same source" in row


def test_a_ninja_project_gets_no_build_ext_parallel() -> None:
    plan = choose_parallel(ParallelSwitches(), jobs(8, 64), archs=3, ninja_off=())
    assert not plan.build_ext and plan.config == ""
    assert "DIST_EXTRA_CONFIG" not in dict(plan.env)
    assert "ninja" in plan.why_build_ext
    # 8 files x 2 threads = 16 = twice the cores: threads stop at 2, short of the 3 archs
    assert plan.threads == 2


def test_before_the_source_is_read_build_ext_is_off() -> None:
    plan = choose_parallel(ParallelSwitches(), jobs(4, 64), archs=2, ninja_off=None)
    assert not plan.build_ext
    assert plan.why_build_ext.startswith("not applied by default: ")


@pytest.mark.parametrize(
    ("switches", "files", "threads", "build_ext"),
    [
        (ParallelSwitches(build_ext="off"), 2, 2, False),
        (ParallelSwitches(build_ext="on", nvcc_threads=False), 2, 1, True),
        (ParallelSwitches(build_ext="on", jobs=False), 1, 2, False),  # nothing to spread
        (ParallelSwitches(build_ext="off", nvcc_threads=False), 2, 1, False),
    ],
)
def test_each_mechanism_can_be_turned_off(
    switches: ParallelSwitches, files: int, threads: int, build_ext: bool
) -> None:
    plan = choose_parallel(switches, jobs(2, 20), archs=2, ninja_off=("setup.py:1",))
    assert (plan.files, plan.threads, plan.build_ext) == (files, threads, build_ext)
    env = dict(plan.env)
    assert ("DIST_EXTRA_CONFIG" in env) is build_ext
    assert ("NVCC_APPEND_FLAGS" in env) is (threads > 1)


def test_build_ext_on_applies_even_with_ninja() -> None:
    plan = choose_parallel(ParallelSwitches(build_ext="on"), jobs(2, 20), archs=1, ninja_off=())
    assert plan.build_ext and "build_ext = true" in plan.why_build_ext


def test_one_arch_needs_no_threads() -> None:
    plan = choose_parallel(ParallelSwitches(), jobs(2, 20), archs=1, ninja_off=())
    assert plan.threads == 1 and plan.why_threads == "one arch per compile"


def test_threads_stay_within_the_memory_budget() -> None:
    # 16 cores but memory for 4 jobs of 2 GiB: 4 files x 1 thread, never 4 x 2 = 8 > 4
    plan = choose_parallel(ParallelSwitches(), jobs(16, 8.5), archs=4, ninja_off=())
    assert (plan.files, plan.threads) == (4, 1)
    assert "fill the memory" in plan.why_threads
    # memory for 8 jobs, 4 cores: 4 files x 2 threads = 8
    plan = choose_parallel(ParallelSwitches(), jobs(4, 16.5), archs=4, ninja_off=())
    assert (plan.files, plan.threads) == (4, 2)
    assert plan.files * plan.threads <= 8


@pytest.mark.parametrize("cpus", [1, 2, 3, 8, 64])
@pytest.mark.parametrize("memory_gib", [1.0, 4.5, 20.0, 300.0])
@pytest.mark.parametrize("archs", [1, 2, 5])
def test_files_times_threads_never_exceed_memory_or_twice_the_cores(
    cpus: int, memory_gib: float, archs: int
) -> None:
    count = jobs(cpus, memory_gib)
    plan = choose_parallel(ParallelSwitches(), count, archs=archs, ninja_off=())
    assert plan.files == count.jobs
    assert 1 <= plan.threads <= archs
    if plan.threads > 1:
        assert plan.files * plan.threads <= count.by_memory
        assert plan.files * plan.threads <= 2 * count.by_cpu


def test_the_recipes_own_nvcc_threads_win() -> None:
    own = {"NVCC_APPEND_FLAGS": "-lineinfo --threads 4"}
    plan = choose_parallel(ParallelSwitches(), jobs(2, 20), archs=2, ninja_off=(), recipe_env=own)
    assert plan.threads == 1 and "its own" in plan.why_threads
    assert "NVCC_APPEND_FLAGS" not in dict(plan.env)
    # other flags of the recipe are kept, --threads appended
    plan = choose_parallel(
        ParallelSwitches(), jobs(2, 20), archs=2, ninja_off=(),
        recipe_env={"NVCC_APPEND_FLAGS": "-lineinfo"},
    )  # fmt: skip
    assert dict(plan.env)["NVCC_APPEND_FLAGS"] == "-lineinfo --threads 2"


def test_the_projects_own_nvcc_threads_win() -> None:
    """nvcc warns when --threads is given twice (and takes the last, archwheel's): a project
    that passes its own gets none from archwheel (the launcher covers what no file shows)."""
    setup = textwrap.dedent("""\
        nvcc_flags = ["-O3", "--threads", "4"]
        # "--threads 8" in a comment is not read
        other = ['-t8']
        docker = ["docker", "build", "-t", "name"]
        """)
    cmake = 'string(APPEND CMAKE_CUDA_FLAGS " -t 2")\nset(X "--threads=0")\n'
    found = own_threads_in([("setup.py", setup), ("CMakeLists.txt", cmake)])
    assert found == ("setup.py:1", "setup.py:3", "CMakeLists.txt:1", "CMakeLists.txt:2")
    plan = choose_parallel(
        ParallelSwitches(), jobs(2, 20), archs=2, ninja_off=(), own_threads=found
    )
    assert plan.threads == 1 and "NVCC_APPEND_FLAGS" not in dict(plan.env)
    assert plan.why_threads == (
        "the project passes its own (setup.py:1, setup.py:3, CMakeLists.txt:1)"
    )
    assert own_threads_in([("setup.py", "args = ['-time', 't.csv', '-t', 'x']\n")]) == ()


def test_serial_is_one_compile_at_a_time() -> None:
    plan = choose_parallel(
        ParallelSwitches(), jobs(8, 64), archs=3, ninja_off=("setup.py:2",), serial=True
    )
    assert (plan.files, plan.threads, plan.build_ext) == (1, 1, False)
    # the spread hook stays, one module at a time: the same object folders as the first build
    assert dict(plan.env) == {
        "CMAKE_BUILD_PARALLEL_LEVEL": "1",
        "ARCHWHEEL_SPREAD_EXTENSIONS": "1",
        "PYTHONPATH": SPREAD_DIR,
    }
    assert plan.spread == 1
    off = choose_parallel(
        ParallelSwitches(extensions=False), jobs(8, 64), archs=3, ninja_off=(), serial=True
    )
    assert dict(off.env) == {"CMAKE_BUILD_PARALLEL_LEVEL": "1"}


def test_the_spread_is_the_default_and_has_a_switch() -> None:
    """Every setuptools project's modules spread at the job count unless the recipe says
    ``extensions = false``; setuptools' own --parallel (the recipe's true) replaces it; the
    recipe's PYTHONPATH follows the hook's folder."""
    plan = choose_parallel(
        ParallelSwitches(), jobs(4, 64), archs=1, ninja_off=None,
        recipe_env={"PYTHONPATH": "/build/src/tools"},
    )  # fmt: skip
    env = dict(plan.env)
    assert plan.spread == 4
    assert env["ARCHWHEEL_SPREAD_EXTENSIONS"] == "4"
    assert env["PYTHONPATH"] == f"{SPREAD_DIR}:/build/src/tools"
    assert "extension modules 4 at a time, each in its own build_temp" in plan.describe("MAX_JOBS")
    assert plan.to_json()["extensions_at_once"] == 4
    off = choose_parallel(ParallelSwitches(extensions=False), jobs(4, 64), archs=1, ninja_off=())
    assert off.spread == 0 and "ARCHWHEEL_SPREAD_EXTENSIONS" not in dict(off.env)
    assert "turned off by [build.parallel] extensions" in off.describe("MAX_JOBS")
    threads = choose_parallel(ParallelSwitches(build_ext="on"), jobs(4, 64), archs=1, ninja_off=())
    assert threads.build_ext and threads.spread == 0


def test_ninja_off_is_found_with_its_line() -> None:
    setup = "from torch.utils.cpp_extension import BuildExtension\n\ncmdclass = {\n" \
        "  'build_ext': BuildExtension.with_options(use_ninja = False)}\n"  # fmt: skip
    found = ninja_off_in([("pyproject.toml", "[build-system]\n"), ("setup.py", setup)])
    assert found == ("setup.py:4",)
    # True is ninja on; a name (here Falsey) is a value the build computes
    assert ninja_off_in([("setup.py", "use_ninja=True\nuse_ninja=Falsey\n")]) == (
        "setup.py:2 (computed)",
    )


def test_a_computed_use_ninja_may_turn_it_off() -> None:
    """DeepSpeed's ``use_ninja=is_env_set("DS_ENABLE_NINJA")``: no static read can tell, so
    the plan says it may be off instead of that the project compiles with ninja."""
    setup = (
        "cmdclass['build_ext'] = BuildExtension.with_options(\n"
        "    use_ninja=is_env_set('DS_ENABLE_NINJA'))\nx = dict(use_ninja=False)\n"
    )
    found = ninja_off_in([("setup.py", setup)])
    assert found == ("setup.py:2 (computed)", "setup.py:3")
    computed = ninja_off_in([("setup.py", setup.split("x =", maxsplit=1)[0])])
    plan = choose_parallel(ParallelSwitches(), jobs(4, 64), archs=2, ninja_off=computed)
    assert "the project may turn ninja off (setup.py:2 (computed))" in plan.why_build_ext
    plan = choose_parallel(ParallelSwitches(), jobs(4, 64), archs=2, ninja_off=found)
    assert "the project turns ninja off (setup.py:2 (computed), setup.py:3)" in plan.why_build_ext
    assert ninja_off_in([("setup.py", "use_ninja = True\nuse_ninja=(False)\n")]) == (
        "setup.py:2 (computed)",
    )


def test_plan_row_and_json() -> None:
    switches = ParallelSwitches(build_ext="on")
    plan = choose_parallel(switches, jobs(2, 20), archs=2, ninja_off=("setup.py:9",))
    row = plan.describe("MAX_JOBS")
    assert row.startswith("2 compile(s) at once (MAX_JOBS, CMAKE_BUILD_PARALLEL_LEVEL)")
    assert "build_ext --parallel 2" in row and "nvcc --threads 2" in row
    data = plan.to_json()
    assert data["files"] == 2 and data["nvcc_threads"] == 2 and data["build_ext_parallel"]
    assert json.loads(json.dumps(data)) == data


# -- the recipe's [build.parallel] ---------------------------------------------------------------


def scatter_with(tmp_path: Path, table: str) -> Path:
    text = SCATTER.read_text().replace("[build.env]", f"{textwrap.dedent(table)}\n[build.env]")
    path = tmp_path / "torch-scatter-2.1.2.toml"
    path.write_text(text)
    return path


def test_the_shipped_recipe_uses_no_parallel_trick_of_its_own() -> None:
    text = SCATTER.read_text()
    assert "setup.cfg" not in text.split("[build.env]")[0].split("command =")[1]
    recipe = load_recipe(SCATTER, facts=FACTS)
    assert recipe.build.parallel == ParallelSwitches()


def test_parallel_switches_are_read(tmp_path: Path) -> None:
    path = scatter_with(
        tmp_path, "[build.parallel]\nbuild_ext = false\nnvcc_threads = false\njobs = true\n"
    )
    recipe = load_recipe(path, facts=FACTS)
    assert recipe.build.parallel == ParallelSwitches(build_ext="off", nvcc_threads=False)
    path = scatter_with(tmp_path, '[build.parallel]\nbuild_ext = "auto"\n')
    assert load_recipe(path, facts=FACTS).build.parallel.build_ext == "auto"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('[build.parallel]\nbuild_ext = "yes"\n', 'true, false or "auto"'),
        ("[build.parallel]\nbuild_ext = 1\n", 'true, false or "auto"'),
        ("[build.parallel]\nthreads = 2\n", "threads"),
        ('[build.parallel]\nnvcc_threads = "no"\n', "nvcc_threads"),
    ],
)
def test_bad_parallel_switches_are_refused(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(RecipeError) as caught:
        load_recipe(scatter_with(tmp_path, table), facts=FACTS)
    text = str(caught.value)
    assert message in text and "\n" not in text
    assert "torch-scatter-2.1.2.toml" in text


# -- the plan --------------------------------------------------------------------------------


def plan_for(recipe: Recipe, ninja_off: tuple[str, ...] | None, arch: str = "8.0;9.0") -> BuildPlan:
    source = ResolvedSource(
        spec=recipe.source,
        root=Path("/checkout/src"),
        commit="",
        dirty=False,
        content_sha256="d" * 64,
        files=("setup.py", "csrc/scatter.cu"),
        source_date_epoch=1_700_000_000,
        epoch_origin="test",
    )
    return make_plan(
        recipe,
        check_arch_list(recipe, arch, facts=FACTS),
        BuildOptions(out=Path("/out")),
        source,
        jobs=jobs(2, 20),
        pip=PipSettings(),
        user=(1234, 567),
        ninja_off=ninja_off,
    )


def compile_env(plan: BuildPlan) -> dict[str, str]:
    steps = [s for phase in plan.phases for s in phase.steps if s.name == "compile"]
    assert len(steps) == 1
    return dict(steps[0].env)


def test_the_plan_carries_the_split_into_the_compile_environment() -> None:
    # The shipped torch-scatter recipe: its modules share sources, so no build_ext --parallel.
    recipe = load_recipe(SCATTER, facts=FACTS)
    plan = plan_for(recipe, ("setup.py:137",))
    env = compile_env(plan)
    assert env["MAX_JOBS"] == "2" and env["CMAKE_BUILD_PARALLEL_LEVEL"] == "2"
    assert env["NVCC_APPEND_FLAGS"] == f"{TIME_FLAG} --threads 2"
    assert "DIST_EXTRA_CONFIG" not in env
    assert plan.parallel is not None and plan.parallel.config == ""
    rows = dict(plan.summary_rows())
    assert "no build_ext --parallel (the project turns ninja off (setup.py:137)" in rows["parallel"]
    data = plan_json(plan)
    assert data["parallel"]["build_ext_parallel"] is False  # type: ignore[index]


def test_a_recipes_build_ext_true_reaches_the_compile_environment(tmp_path: Path) -> None:
    path = scatter_with(tmp_path, "[build.parallel]\nbuild_ext = true\n")
    plan = plan_for(load_recipe(path, facts=FACTS), ("setup.py:137",))
    assert compile_env(plan)["DIST_EXTRA_CONFIG"] == PARALLEL_CONFIG
    assert plan.parallel is not None and plan.parallel.config == "[build_ext]\nparallel = 2\n"
    assert "setuptools build_ext --parallel 2" in dict(plan.summary_rows())["parallel"]
    assert plan_json(plan)["parallel"]["build_ext_parallel"] is True  # type: ignore[index]


def test_the_serial_variant_differs_only_in_the_split(tmp_path: Path) -> None:
    path = scatter_with(tmp_path, "[build.parallel]\nbuild_ext = true\n")
    recipe = load_recipe(path, facts=FACTS)
    plan = plan_for(recipe, ("setup.py:137",))
    serial = serial_variant(plan)
    before, after = compile_env(plan), compile_env(serial)
    assert after["MAX_JOBS"] == "1" and after["CMAKE_BUILD_PARALLEL_LEVEL"] == "1"
    assert "DIST_EXTRA_CONFIG" not in after and after["NVCC_APPEND_FLAGS"] == TIME_FLAG
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert changed == {
        "MAX_JOBS", "ARCHWHEEL_JOBS", "CMAKE_BUILD_PARALLEL_LEVEL", "DIST_EXTRA_CONFIG",
        "NVCC_APPEND_FLAGS",
    }  # fmt: skip
    assert serial.parallel is not None and serial.parallel.files == 1
    assert serial.arch_list == plan.arch_list and serial.recipe is plan.recipe


def test_the_serial_variant_keeps_the_recipes_own_values(tmp_path: Path) -> None:
    text = SCATTER.read_text().replace(
        'NVCC_FLAGS = "', 'NVCC_APPEND_FLAGS = "-lineinfo"\nNVCC_FLAGS = "'
    )
    path = tmp_path / "torch-scatter-2.1.2.toml"
    path.write_text(text)
    plan = plan_for(load_recipe(path, facts=FACTS), ("setup.py:137",))
    assert compile_env(plan)["NVCC_APPEND_FLAGS"] == f"-lineinfo {TIME_FLAG} --threads 2"
    assert compile_env(serial_variant(plan))["NVCC_APPEND_FLAGS"] == f"-lineinfo {TIME_FLAG}"


def test_the_spread_reaches_the_compile_environment_and_the_serial_build_keeps_its_folders(
    tmp_path: Path,
) -> None:
    """The default: the hook's folder on PYTHONPATH and the job count as the modules at once;
    the serial variant keeps the hook at one module at a time (the same object folders), and
    the work folder holds the hook and its entry point."""
    recipe = load_recipe(SCATTER, facts=FACTS)
    plan = plan_for(recipe, ("setup.py:137",))
    env = compile_env(plan)
    assert env["ARCHWHEEL_SPREAD_EXTENSIONS"] == "2" and env["PYTHONPATH"] == SPREAD_DIR
    assert "extension modules 2 at a time" in dict(plan.summary_rows())["parallel"]
    serial = compile_env(serial_variant(plan))
    assert serial["ARCHWHEEL_SPREAD_EXTENSIONS"] == "1" and serial["PYTHONPATH"] == SPREAD_DIR
    work = tmp_path / "work"
    work.mkdir()
    _prepare(work, plan)
    hook = work / SPREAD_DIR.removeprefix("/build/")
    assert (hook / "archwheel_spread_hook.py").read_text() == (
        Path(spread_hook.__file__).read_text()
    )
    entry = (hook / "archwheel_spread_hook-0.dist-info" / "entry_points.txt").read_text()
    assert "[setuptools.finalize_distribution_options]" in entry
    # the compile step is watched: the plan's one .cu file
    folder = WorkFolder(cast(ContainerEngine, None), BuildOutput(None))
    (step,) = [s for phase in plan.phases for s in phase.steps if s.name == "compile"]
    watch = folder._watch(plan, step, work)
    assert isinstance(watch, CompileWatch) and watch.state.total == 1
    other = next(s for phase in plan.phases for s in phase.steps if s.name != "compile")
    assert not isinstance(folder._watch(plan, other, work), CompileWatch)


def test_a_recipes_extensions_false_leaves_the_modules_to_the_project(tmp_path: Path) -> None:
    path = scatter_with(tmp_path, "[build.parallel]\nextensions = false\n")
    plan = plan_for(load_recipe(path, facts=FACTS), ("setup.py:137",))
    env = compile_env(plan)
    assert "ARCHWHEEL_SPREAD_EXTENSIONS" not in env and "PYTHONPATH" not in env
    assert "ARCHWHEEL_SPREAD_EXTENSIONS" not in compile_env(serial_variant(plan))
    work = tmp_path / "work"
    work.mkdir()
    _prepare(work, plan)
    assert not (work / SPREAD_DIR.removeprefix("/build/")).exists()
    (tmp_path / "bad").mkdir()
    bad = scatter_with(tmp_path / "bad", '[build.parallel]\nextensions = "no"\n')
    with pytest.raises(RecipeError, match="extensions"):
        load_recipe(bad, facts=FACTS)


def test_a_recipes_pythonpath_follows_the_hooks_folder(tmp_path: Path) -> None:
    text = SCATTER.read_text().replace(
        "[build.env]", '[build.env]\nPYTHONPATH = "/build/src/tools"'
    )
    path = tmp_path / "torch-scatter-2.1.2.toml"
    path.write_text(text)
    plan = plan_for(load_recipe(path, facts=FACTS), ("setup.py:137",))
    assert compile_env(plan)["PYTHONPATH"] == f"{SPREAD_DIR}:/build/src/tools"
    assert compile_env(serial_variant(plan))["PYTHONPATH"] == f"{SPREAD_DIR}:/build/src/tools"
