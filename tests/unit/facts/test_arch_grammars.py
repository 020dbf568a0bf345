"""Who reads the arch list: the grammar models, rendering, and refusal at recipe and plan time.

The models are checked against the real shipped torch code and CMake's own FindCUDA module in
tests/integration/realwheel/test_arch_grammars_real.py (slow); here they are pure functions, and recipes are refused before any container starts.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archwheel.errors import ArchListError, RecipeError
from archwheel.facts import arch_consumers as ac
from archwheel.facts import arch_grammars as ag
from archwheel.facts.arch import ArchList
from archwheel.facts.catalog import load_facts
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild.planning.plan import check_arch_list
from archwheel.wheelbuild.recipes.recipe import load_recipe
from archwheel.wheelbuild.recipes.recipe_torch import pinned_torch
from tests.support.cli import CliRun
from tests.support.paths import ROOT

FACTS = load_facts()

CONSUMERS = ac.load_grammars().consumers


def images(consumer: str, value: str | None, **kw: object) -> tuple[str, ...]:
    reading = ag.read(consumer, value, **kw)  # type: ignore[arg-type]
    assert reading.ok, reading.describe()
    return tuple(sorted(reading.images))


# -- the two torch readers disagree on the same text --------------------------------------------


def test_ampere_ptx_is_cmake_syntax_that_cpp_extension_breaks_on() -> None:
    assert images(ac.TORCH_CMAKE, "Ampere+PTX") == ("compute_80", "compute_86", "sm_80", "sm_86")
    reading = ag.read(ac.CPP_EXTENSION, "Ampere+PTX")
    assert reading.error == "ValueError: Unknown CUDA arch (8.6+PTX+PTX) or GPU not supported"
    assert "replaced as substrings" in reading.findings[0].rule
    assert "Ampere becomes 8.0;8.6+PTX" in reading.findings[0].rule


@pytest.mark.parametrize(
    ("name", "cmake", "cpp_extension"),
    [
        ("Hopper", ("sm_90",), ("compute_90", "sm_90")),
        ("Ampere", ("sm_80", "sm_86"), ("compute_86", "sm_80", "sm_86")),
        (
            "Blackwell",
            ("sm_100", "sm_120"),
            ("compute_121", "sm_100", "sm_103", "sm_120", "sm_121"),
        ),
        ("Blackwell+Tegra", ("sm_101",), ("sm_110",)),
    ],
)
def test_names_mean_different_targets(
    name: str, cmake: tuple[str, ...], cpp_extension: tuple[str, ...]
) -> None:
    assert images(ac.TORCH_CMAKE, name, torch="2.14.1") == cmake
    assert images(ac.CPP_EXTENSION, name, torch="2.14.1") == cpp_extension


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("10.0f", "family-specific 'f'"),
        ("12.0f+PTX", "family-specific 'f'"),
        ("8.0,9.0", "',' is not a separator"),
        ("8.0;9.0;", "empty entry"),
        ("8.8", "not in torch 2.14.1's supported list"),
        ("10.1", "not in torch 2.14.1's supported list"),
        ("hopper", "case-sensitive"),
        ("8.0+ptx", "'+PTX', in capitals"),
        ("Hopper+PTX", "NAME+PTX becomes X.Y+PTX+PTX (Hopper becomes 9.0+PTX)"),
    ],
)
def test_cpp_extension_rejections_name_the_rule(value: str, why: str) -> None:
    reading = ag.read(ac.CPP_EXTENSION, value, torch="2.14.1")
    assert reading.fails and not reading.images
    assert reading.error is not None and reading.error.startswith("ValueError: Unknown CUDA arch")
    assert why in " ".join(f.rule for f in reading.findings)


def test_torch_cmake_takes_what_cpp_extension_refuses() -> None:
    assert images(ac.TORCH_CMAKE, "10.0f;12.0f+PTX") == ("compute_120f", "sm_100f", "sm_120f")
    assert images(ac.TORCH_CMAKE, "8.0;9.0;") == ("sm_80", "sm_90")
    assert images(ac.TORCH_CMAKE, "8.0\t9.0+PTX") == ("compute_90", "sm_80", "sm_90")
    assert images(ac.TORCH_CMAKE, "8.6(8.0)") == ("sm_86",)
    reading = ag.read(ac.TORCH_CMAKE, "8.6(8.0)")
    assert reading.flags == ("-gencode", "arch=compute_80,code=sm_86")


@pytest.mark.parametrize("value", ["hopper", "8.0+ptx", "sm_90", "90", "8.0,9.0", "Hopper+PTX+PTX"])
def test_torch_cmake_stops_on_unknown_names(value: str) -> None:
    reading = ag.read(ac.TORCH_CMAKE, value)
    assert reading.error is not None
    assert reading.error.startswith("Found Unknown CUDA Architecture Name")


@pytest.mark.parametrize("value", ["", None, "All", "Common", "Auto"])
def test_torch_cmake_machine_dependent_lists_are_reinterpretations(value: str | None) -> None:
    reading = ag.read(ac.TORCH_CMAKE, value)
    assert [f.kind for f in reading.findings] == ["reinterpret"]


def test_cpp_extension_ignores_the_variable_when_the_extension_names_an_arch() -> None:
    reading = ag.read(ac.CPP_EXTENSION, "8.0;9.0", cflags=["-O3", "-Xcompiler", "-march=native"])
    assert [f.kind for f in reading.findings] == ["ignore"]
    assert "'-march=native' contains 'arch'" in reading.findings[0].rule
    named = ag.read(ac.CPP_EXTENSION, "8.0", cflags=["-DTORCH_EXTENSION_NAME=arch_ops"])
    assert named.ok  # the extension-name define is skipped, as in the real code


@pytest.mark.parametrize("value", [None, "", "native"])
def test_cpp_extension_without_a_list_fails_on_a_gpu_less_machine(value: str | None) -> None:
    reading = ag.read(ac.CPP_EXTENSION, value)
    assert reading.error == "IndexError: list index out of range"


def test_the_torch_version_selects_the_grammar() -> None:
    g = ac.load_grammars()
    assert g.for_torch("2.14.1+cu130").torch == "2.14.1"
    assert g.for_torch("2.15.0").torch == "2.14.1"
    assert g.for_torch("2.13.5").torch == "2.13.0"
    assert g.for_torch("2.10.0").torch == "2.13.0"  # older than any read: the oldest
    assert g.for_torch(None).torch == "2.14.1"
    assert ag.read(ac.CPP_EXTENSION, "Rubin", torch="2.13.0").fails
    assert images(ac.CPP_EXTENSION, "Rubin", torch="2.14.1") == ("compute_107", "sm_107")
    with pytest.raises(ArchListError, match="invalid torch version"):
        g.for_torch("two")


@pytest.mark.parametrize("consumer", [ac.TORCH_CMAKE, ac.CMAKE_FINDCUDA])
def test_cmake_readers_read_the_text_as_cmake_does(consumer: str) -> None:
    # CMake's '$' is the end of the text: a trailing newline stays part of the entry
    assert ag.read(consumer, "8.0\n").fails
    # '+PTX' on its own (a blank before it) leaves if(${arch_name} STREQUAL ...) nothing to compare
    alone = ag.read(consumer, "8.0 +PTX")
    assert alone.error is not None and "Unknown arguments specified" in alone.error
    # blanks only: no entry, no flag, and nvcc builds its own default
    assert [f.kind for f in ag.read(consumer, " \t").findings] == ["ignore"]


def test_cmakes_findcuda_stops_in_its_own_words() -> None:
    reading = ag.read(ac.CMAKE_FINDCUDA, "Hopper")
    assert reading.error == "Unknown CUDA Architecture Name Hopper in CUDA_SELECT_NVCC_ARCH_FLAGS"


def test_cmake_tables_read_quoted_arguments() -> None:
    source = textwrap.dedent("""\
        if(arch_name MATCHES "^([0-9]\\\\.[0-9])$")
        elseif(${arch_name} STREQUAL "Fermi")
          set(arch_bin 2.0 "2.1(2.0)")
        elseif(${arch_name} STREQUAL "Kepler")
          set(arch_bin 3.0 3.5)
          set(arch_ptx 3.5)
          message(SEND_ERROR "Unknown CUDA Architecture Name ${arch_name} in X")
        """)
    regex, names = ac.cmake_tables(source)
    assert regex == r"^([0-9]\.[0-9])$"
    assert names == (
        ac.CmakeName("Fermi", ("2.0", "2.1(2.0)"), ()),
        ac.CmakeName("Kepler", ("3.0", "3.5"), ("3.5",)),
    )
    assert ac.cmake_unknown_error(source) == "Unknown CUDA Architecture Name {name} in X"


# -- CMake, nvcc and project grammars -------------------------------------------------------------


def test_cmake_architectures() -> None:
    assert images(ac.CMAKE, "80-real;90") == ("compute_90", "sm_80", "sm_90")
    assert images(ac.CMAKE, "90a-real;100f-virtual") == ("compute_100f", "sm_90a")
    assert ag.read(ac.CMAKE, "8.0;9.0").fails
    for special in ("all", "all-major", "native"):
        assert [f.kind for f in ag.read(ac.CMAKE, special).findings] == ["reinterpret"]
    assert [f.kind for f in ag.read(ac.CMAKE, "OFF").findings] == ["ignore"]
    assert ag.read(ac.CMAKE, "").fails


def test_nvcc_flags() -> None:
    flags = "-gencode=arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]"
    assert images(ac.NVCC, flags) == ("compute_90", "sm_80", "sm_90")
    assert images(ac.NVCC, "-arch=sm_120") == ("compute_120", "sm_120")
    assert ag.read(ac.NVCC, "-O3").fails
    assert [f.kind for f in ag.read(ac.NVCC, "-arch=native").findings] == ["reinterpret"]
    assert ag.read(ac.NVCC, "-arch=sm_99").fails  # no GPU has compute capability 9.9


def test_flash_attn_drops_what_it_does_not_list() -> None:
    assert images("flash-attn", "80;90;100;120") == ("sm_100", "sm_120", "sm_80", "sm_90")
    assert images("flash-attn", None) == ("sm_100", "sm_120", "sm_80", "sm_90")  # its default
    reading = ag.read("flash-attn", "80;86;90")
    assert [(f.kind, f.entry) for f in reading.findings] == [("drop", "86")]
    reading = ag.read("flash-attn", "80;100", cuda=CudaVersion(12, 6))
    assert [(f.kind, f.entry) for f in reading.findings] == [("drop", "100")]
    nothing = ag.read("flash-attn", "8.0;9.0")
    assert nothing.fails and "falls back to TORCH_CUDA_ARCH_LIST" in nothing.findings[-1].rule


# -- rendering: exactly what the consumer accepts, or the rule and the nearest list ---------------


@pytest.mark.parametrize(
    ("consumer", "value"),
    [
        (ac.TORCH_CMAKE, "8.0;9.0a;10.0f;12.0+PTX"),
        (ac.CPP_EXTENSION, "8.0;9.0a;12.0+PTX"),
        (ac.CMAKE, "80-real;90a-real;100f-real;120"),
        (ac.NVCC, None),
        ("flash-attn", None),
    ],
)
def test_render_round_trips(consumer: str, value: str | None) -> None:
    wanted = {
        ac.TORCH_CMAKE: "8.0;9.0a;10.0f;12.0+PTX",
        ac.CPP_EXTENSION: "8.0;9.0a;12.0+PTX",
        ac.CMAKE: "8.0;9.0a;10.0f;12.0+PTX",
        ac.NVCC: "8.0;9.0a;10.0f;12.0+PTX",
        "flash-attn": "8.0;9.0;12.0",
    }[consumer]
    archs = ArchList.parse(wanted)
    rendered = ag.render(consumer, archs)
    if value is not None:
        assert rendered == value
    assert ag.read(consumer, rendered).targets() == archs


@pytest.mark.parametrize(
    ("consumer", "value", "rule", "near"),
    [
        (ac.CPP_EXTENSION, "8.0;10.0f", "family-specific 'f'", "nearest list it accepts: 8.0;10.0"),
        (ac.CPP_EXTENSION, "8.0;8.8", "8.8 is not in torch 2.14.1", "nearest list it accepts: 8.0"),
        (ac.CPP_EXTENSION, "compute_90", "PTX without SASS", "nearest list it accepts: 9.0+PTX"),
        (ac.TORCH_CMAKE, "8.0;compute_90", "PTX without SASS", "accepts: 8.0;9.0+PTX"),
        ("flash-attn", "8.0;8.6", "no entry for sm_86", "accepts: 8.0 (FLASH_ATTN_CUDA_ARCHS=80)"),
        ("flash-attn", "9.0+PTX", "adds no PTX", "accepts: 9.0 (FLASH_ATTN_CUDA_ARCHS=90)"),
        (
            "flash-attn",
            "8.6",
            "no entry for sm_86",
            "it builds none of them: ask for archs it builds instead, 80;90",
        ),
    ],
)
def test_render_refusals_name_the_rule_and_the_nearest_list(
    consumer: str, value: str, rule: str, near: str
) -> None:
    with pytest.raises(ArchListError) as info:
        ag.render(consumer, ArchList.parse(value))
    text = info.value.one_line()
    assert text.startswith(f"{consumer} (")
    assert rule in text
    assert near in text


def test_render_for_a_project_follows_its_cuda_gates() -> None:
    archs = ArchList.parse("9.0;12.0")
    assert ag.render("flash-attn", archs, cuda=CudaVersion(13, 0)) == "90;120"
    with pytest.raises(ArchListError, match=r"sm_120 only with CUDA >= 12\.8"):
        ag.render("flash-attn", archs, cuda=CudaVersion(12, 6))


def test_parse_arch_list_accepts_what_torch_cmake_accepts() -> None:
    assert str(ag.parse_arch_list("Ampere+PTX")) == "8.0+PTX;8.6+PTX"
    assert str(ag.parse_arch_list("8.0;9.0+PTX")) == "8.0;9.0+PTX"  # the canonical reader first
    with pytest.raises(ArchListError, match="invalid arch"):
        ag.parse_arch_list("Hopper+PTX+PTX")


# -- recipes: the consumer and its variable, refused before any container -------------------------

RECIPE = """\
schema_version = 1

[recipe]
name = "ext"
kind = "extension"
version = "1.0"

[source]
path = "src"

[toolchain]
cuda = "13.0"
base_image = "archwheel/debian:bookworm"
source = "pypi"

[arch]
{arch}

[build]
requirements = [{requirements}]
command = "python -m pip wheel --no-build-isolation -w $ARCHWHEEL_DIST ."
"""


def recipe_file(tmp_path: Path, arch: str, requirements: str = '"torch==2.14.1"') -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    path = tmp_path / "ext.toml"
    path.write_text(RECIPE.format(arch=textwrap.dedent(arch), requirements=requirements))
    return path


# (A CUDA build of torch: a +cpu pin in a CUDA extension is refused, tests/unit/wheelbuild/test_torch_pin.py.)
def test_a_torch_format_extension_is_read_by_cpp_extension_of_the_pinned_torch(
    tmp_path: Path,
) -> None:
    recipe = load_recipe(
        recipe_file(tmp_path, 'default = "8.0;9.0+PTX"', '"torch==2.13.0+cu130"'), facts=FACTS
    )
    assert recipe.arch.consumer == ac.CPP_EXTENSION
    assert recipe.arch.variable == "TORCH_CUDA_ARCH_LIST"
    assert recipe.arch.torch == "2.13.0+cu130"
    with pytest.raises(ArchListError, match=r"8\.8 is not in torch 2\.13\.0's supported list"):
        check_arch_list(recipe, "8.0;8.8", facts=FACTS)
    assert check_arch_list(recipe, "9.0a;12.0+PTX", facts=FACTS).value == "9.0a;12.0+PTX"


def test_a_project_variable_is_expressible(tmp_path: Path) -> None:
    recipe = load_recipe(
        recipe_file(tmp_path, 'consumer = "flash-attn"\ndefault = "8.0;9.0"'), facts=FACTS
    )
    assert (recipe.arch.consumer, recipe.arch.variable) == ("flash-attn", "FLASH_ATTN_CUDA_ARCHS")
    assert recipe.arch.format == "project"
    assert recipe.arch.render(recipe.arch.default) == "80;90"


@pytest.mark.parametrize(
    ("arch", "message"),
    [
        ('consumer = "flash-attn"\ndefault = "8.0;8.6"', "flash-attn (FLASH_ATTN_CUDA_ARCHS"),
        ('default = "10.0f"', "cpp-extension (TORCH_CUDA_ARCH_LIST, torch 2.14.1"),
        ('consumer = "flash-atn"\ndefault = "8.0"', "did you mean 'flash-attn'?"),
        ('consumer = "cmake"\nformat = "torch"\ndefault = "8.0"', "contradicts consumer 'cmake'"),
    ],
)
def test_bad_arch_tables_are_refused_at_load_time(tmp_path: Path, arch: str, message: str) -> None:
    with pytest.raises(RecipeError) as info:
        load_recipe(recipe_file(tmp_path, arch), facts=FACTS)
    assert "[arch]" in info.value.one_line()
    assert message in info.value.one_line()


def test_schema_1_recipes_keep_their_readers() -> None:
    root = ROOT / "recipes"
    assert load_recipe(root / "example.toml", facts=FACTS).arch.consumer == ac.NVCC
    pytorch = load_recipe(root / "pytorch-2.14.1-cu130.toml", facts=FACTS)
    assert (pytorch.arch.consumer, pytorch.arch.torch) == (ac.TORCH_CMAKE, "2.14.1")


def test_pinned_torch() -> None:
    assert pinned_torch(["ninja", "torch==2.14.1+cu130"]) == "2.14.1+cu130"
    assert pinned_torch(["torch>=2.13"]) is None
    assert pinned_torch(["torch==2.14.*"]) is None
    assert pinned_torch(["torchvision==0.29.1"]) is None


def test_plan_refuses_what_the_consumer_would_reject_before_any_source(
    tmp_path: Path, cli_run: CliRun
) -> None:
    path = recipe_file(tmp_path, 'default = "8.0"')
    code, out, err = cli_run("build", "--recipe", str(path), "--arch", "8.0;12.0f", "--plan",
                             "--no-host-pip-config", "--out", str(tmp_path / "out"))  # fmt: skip
    assert code == 2, err
    text = " ".join(err.split())
    assert "cpp-extension (TORCH_CUDA_ARCH_LIST, torch 2.14.1" in text
    assert "family-specific 'f'" in text
    assert "nearest list it accepts: 8.0;12.0" in text
    assert not (tmp_path / "out").exists()


def test_plan_takes_torch_cmake_syntax_and_renders_it_for_the_consumer(
    tmp_path: Path, cli_run: CliRun
) -> None:
    path = recipe_file(tmp_path, 'default = "8.0"')
    (tmp_path / "src" / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    code, out, err = cli_run("build", "--recipe", str(path), "--arch", "Ampere+PTX", "--plan",
                             "--format", "json", "--no-host-pip-config")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["environment"]["TORCH_CUDA_ARCH_LIST"] == "8.0+PTX;8.6+PTX"


# -- archwheel arch -------------------------------------------------------------------------------


def test_cli_arch_accepts_ampere_ptx_and_shows_each_consumer(cli_run: CliRun) -> None:
    code, out, err = cli_run("arch", "Ampere+PTX", "--format", "json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["canonical"] == "8.0+PTX;8.6+PTX"
    views = {v["consumer"]: v for v in doc["consumers"]}
    assert views["torch-cmake"]["as_written"]["matches_canonical"] is True
    assert views["cpp-extension"]["as_written"]["error"].startswith("ValueError")
    assert views["cpp-extension"]["value"] == "8.0+PTX;8.6+PTX"
    assert views["cmake"]["value"] == "80;86"
    assert views["flash-attn"]["value"] is None
    assert "nearest list it accepts: 8.0" in views["flash-attn"]["refusal"]


def test_cli_arch_table_names_what_hopper_means_to_cmake(cli_run: CliRun) -> None:
    code, out, _ = cli_run("arch", "Hopper", "--torch", "2.13.0")
    assert code == 0
    text = " ".join(out.split())
    assert "Who reads it (grammars of torch 2.13.0)" in text
    assert "reinterprets 'Hopper': it builds sm_90, not compute_90 sm_90" in text


# -- no input crashes a model --------------------------------------------------------------------

ARCH_ALPHABET = st.sampled_from(
    ["8.0", "9.0", "9.0a", "10.0f", "12.0", "Ampere", "Hopper", "Blackwell", "+PTX", "+ptx", ";",
     " ", ",", "(", ")", "8.6(8.0)", "sm_90", "90", "-real", "-virtual", "-gencode", "arch=",
     "compute_90", ",code=", "sm_", "0", "f", "a", "\t", "native", "All", "'", '"', "[", "]"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(ARCH_ALPHABET, max_size=8).map("".join), st.sampled_from(CONSUMERS))
def test_read_never_crashes(text: str, consumer: str) -> None:
    reading = ag.read(consumer, text)
    if reading.ok and reading.images:
        assert reading.targets() is not None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(["7.5", "8.0", "8.6", "8.9", "9.0", "9.0a", "10.0", "10.0f", "12.0",
                         "12.0f", "12.1a", "compute_90", "8.0+PTX", "12.0+PTX"]),
        min_size=1, max_size=5,
    ),
    st.sampled_from(CONSUMERS),
)  # fmt: skip
def test_render_round_trips_or_refuses(parts: list[str], consumer: str) -> None:
    archs = ArchList.parse(";".join(parts))
    try:
        value = ag.render(consumer, archs)
    except ArchListError as exc:
        message = exc.one_line()
    else:
        assert ag.read(consumer, value).targets() == archs
        return
    assert "nearest list it accepts" in message or "ask for archs it builds instead" in message
