"""A pinned torch in a recipe: its wheel, its CUDA, its toolkit pin, the local version label."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from archwheel.effects.pipconfig import PipSettings
from archwheel.errors import RecipeError, UsageError
from archwheel.exit_codes import exit_code_for
from archwheel.facts.catalog import load_facts
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild.images.toolkit import (
    TorchBuild,
    manylinux_platforms,
    parse_glibc,
    prepare_torch,
    torch_image_tag,
)
from archwheel.wheelbuild.recipes.recipe import load_recipe
from archwheel.wheelbuild.recipes.recipe_torch import with_torch
from archwheel.wheelbuild.recipes.torch_pin import (
    TORCH_WHEELS,
    cached_torch_wheel,
    check_torch_wheel,
    compile_toolkit_requirement,
    cuda_of_label,
    fetch_torch_wheel,
    find_torch_pin,
    local_label,
    read_torch_wheel,
)
from tests.support.paths import ROOT
from tests.support.torch_pin_support import TOOLKIT_PIN, fake_torch_wheel

FACTS = load_facts()


def test_find_torch_pin_reads_exact_pins_with_and_without_local_label() -> None:
    pin = find_torch_pin(["setuptools", "torch==2.14.1"], "r")
    assert pin is not None and pin.public == "2.14.1" and pin.local is None
    pin = find_torch_pin(["Torch==2.14.1+cu130"], "r")
    assert pin is not None and pin.local == "cu130" and pin.cuda_from_label() == CudaVersion(13, 0)
    assert find_torch_pin(["numpy", "ninja"], "r") is None


@pytest.mark.parametrize("text", ["torch>=2.0", "torch", "torch==2.*", "torch>=2,<3"])
def test_a_torch_that_is_not_pinned_exactly_is_refused(text: str) -> None:
    with pytest.raises(RecipeError, match="pin it exactly"):
        find_torch_pin([text], "recipe.toml: [build] requirements")


def test_a_cpu_torch_pin_is_refused_with_the_fix() -> None:
    with pytest.raises(RecipeError, match=r"without CUDA \(cpu\)") as info:
        find_torch_pin(["torch==2.14.1+cpu"], "r")
    assert "torch==2.14.1" in (info.value.hint or "")


@pytest.mark.parametrize(
    ("label", "cuda"), [("cu130", "13.0"), ("cu128", "12.8"), ("cu118", "11.8"), ("rocm6", None)]
)
def test_cuda_of_label(label: str, cuda: str | None) -> None:
    assert cuda_of_label(label) == (CudaVersion.parse(cuda) if cuda else None)


def test_local_label_templates() -> None:
    cuda = CudaVersion(13, 0)
    assert local_label("pt{torch}cu{cuda_nodot}", "2.14.1+cu130", cuda) == "pt2.14.1cu130"
    assert local_label("torch{torch_nodot}.cu{cuda_nodot}", "2.14.1", cuda) == "torch2141.cu130"
    with pytest.raises(UsageError, match="not valid"):
        local_label("pt{nope}", "2.14.1", cuda)
    with pytest.raises(UsageError, match="not a PEP 440 local version"):
        local_label("pt-{torch}", "2.14.1", cuda)


def test_read_torch_wheel_takes_cuda_and_the_toolkit_pin_from_the_wheel(tmp_path: Path) -> None:
    wheel = read_torch_wheel(fake_torch_wheel(tmp_path))
    assert wheel.version == "2.14.1+cu130"
    assert wheel.cuda == CudaVersion(13, 0)
    req = wheel.toolkit_requirement()
    assert req is not None and str(req) == TOOLKIT_PIN  # markers dropped
    full = compile_toolkit_requirement(wheel)
    assert full is not None and full.endswith("==13.0.3")
    extras = full[full.index("[") + 1 : full.index("]")].split(",")
    assert {"nvcc", "crt", "nvvm", "cccl", "cublas", "cusparse", "cusolver"} <= set(extras)
    assert extras == sorted(extras)


def test_read_torch_wheel_reads_metadata_as_pip_does(tmp_path: Path) -> None:
    """A folded licence with whitespace-only lines is one field; a ``Requires-Dist:`` line of
    the description (the body) is no requirement."""
    (tmp_path / "official").mkdir()
    source = fake_torch_wheel(tmp_path / "official")
    path = tmp_path / source.name
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(path, "w") as new:
        for name in old.namelist():
            data = old.read(name).decode()
            if name.endswith("/METADATA"):
                head, _, _ = data.partition("\n\n")
                data = (
                    head.replace(
                        "Name: torch\n",
                        "Name: torch\nLicense: BSD-3-Clause\n        \n        From PyTorch:\n",
                    )
                    + "\n\n```\nRequires-Dist: nvidia-fake-cu13==1.0\n```\n"
                )
            new.writestr(name, data)
    wheel = read_torch_wheel(path)
    assert wheel.requires_dist == (
        "filelock",
        f'{TOOLKIT_PIN}; platform_system == "Linux"',
        'pyyaml; extra == "pyyaml"',
    )
    assert wheel.nvidia_requirements() == ()


def test_a_cpu_torch_wheel_is_refused_naming_the_wheel(tmp_path: Path) -> None:
    pin = find_torch_pin(["torch==2.14.1"], "r")
    assert pin is not None
    wheel = read_torch_wheel(fake_torch_wheel(tmp_path, cuda=None, requires=()))
    assert wheel.cuda is None
    with pytest.raises(RecipeError, match=r"has no CUDA \(torch.version.cuda is None\)"):
        check_torch_wheel(wheel, pin, CudaVersion(13, 0), Path("r.toml"))


def test_a_torch_of_another_cuda_is_refused_naming_both(tmp_path: Path) -> None:
    pin = find_torch_pin(["torch==2.14.1"], "r")
    assert pin is not None
    wheel = read_torch_wheel(fake_torch_wheel(tmp_path))
    with pytest.raises(RecipeError) as info:
        check_torch_wheel(wheel, pin, CudaVersion(12, 8), Path("r.toml"))
    message = info.value.one_line()
    assert "cuda is 12.8" in message and "built with CUDA 13.0" in message
    assert 'set cuda = "13.0"' in message


def test_the_cache_serves_a_matching_wheel_for_the_right_python_only(tmp_path: Path) -> None:
    folder = tmp_path / TORCH_WHEELS
    folder.mkdir()
    wheel = fake_torch_wheel(folder)
    pin = find_torch_pin(["torch==2.14.1"], "r")
    assert pin is not None
    assert cached_torch_wheel(pin, "3.11", folder) == wheel
    assert cached_torch_wheel(pin, "3.12", folder) is None
    other = find_torch_pin(["torch==2.13.0"], "r")
    assert other is not None and cached_torch_wheel(other, "3.11", folder) is None
    # A CPU build in the same folder is never taken for an unlabelled CUDA pin.
    cpu = fake_torch_wheel(folder, version="2.14.1+cpu", cuda=None)
    assert cpu.name < wheel.name  # sorted first
    assert cached_torch_wheel(pin, "3.11", folder) == wheel
    # fetch_torch_wheel takes it from the cache without asking pip (no index configured).
    assert fetch_torch_wheel(pin, "3.11", ["x"], PipSettings(), tmp_path) == wheel


def test_manylinux_platforms_for_bookworm_glibc() -> None:
    tags = manylinux_platforms((2, 36))
    assert tags[0] == "manylinux_2_36_x86_64"
    for tag in ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux2014_x86_64"):
        assert tag in tags
    assert tags.index("manylinux_2_28_x86_64") < tags.index("manylinux2014_x86_64")
    assert "manylinux_2_37_x86_64" not in tags
    assert tags[-1] == "manylinux1_x86_64"


@pytest.mark.parametrize(
    ("text", "glibc"),
    [("glibc 2.36", (2, 36)), ("ldd (Debian GLIBC 2.36-9+deb12u7) 2.36", (2, 36)), ("", None)],
)
def test_parse_glibc(text: str, glibc: tuple[int, int] | None) -> None:
    assert parse_glibc(text) == glibc


RECIPE = """\
schema_version = 1
[source]
path = "src"
[toolchain]
cuda = "CUDA"
base_image = "archwheel/debian:bookworm"
source = "SOURCE"
[arch]
format = "torch"
default = "9.0"
[build]
requirements = [REQS]
command = "true"
TORCH
"""


def recipe(tmp_path: Path, reqs: str, cuda: str = "13.0", torch: str = "") -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    path = tmp_path / "r.toml"
    source = "pypi" if cuda.startswith("13.") else "image"  # PyPI has no 12.x nvcc
    text = RECIPE.replace("REQS", reqs).replace("CUDA", cuda).replace("TORCH", torch)
    text = text.replace("SOURCE", source)
    path.write_text(text)
    return path


def test_recipe_with_a_torch_pin_gets_the_default_label_and_requires_dist(tmp_path: Path) -> None:
    r = load_recipe(recipe(tmp_path, '"torch==2.14.1"'), facts=FACTS)
    assert r.torch.pin is not None and r.torch.pin.public == "2.14.1"
    assert r.torch.local_version == "pt{torch}cu{cuda_nodot}"
    assert r.torch.requires_dist


def test_recipe_torch_table_shortens_and_configures(tmp_path: Path) -> None:
    r = load_recipe(
        recipe(tmp_path, "", torch='[torch]\nversion = "2.14.1"\nlocal_version = false\n'),
        facts=FACTS,
    )
    assert r.build.requirements == ("torch==2.14.1",)
    assert r.torch.pin is not None and r.torch.local_version is None


def test_recipe_label_contradicting_toolchain_cuda_is_refused_at_load(tmp_path: Path) -> None:
    with pytest.raises(RecipeError) as info:
        load_recipe(recipe(tmp_path, '"torch==2.14.1+cu130"', cuda="12.8"), facts=FACTS)
    text = info.value.one_line()
    assert "cuda is 12.8" in text and "torch==2.14.1+cu130" in text and "CUDA 13.0" in text


def test_recipe_torch_options_without_a_torch_are_refused(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="only valid when the recipe pins torch"):
        load_recipe(
            recipe(tmp_path, '"numpy"', torch="[torch]\nlocal_version = false\n"), facts=FACTS
        )


def test_prepare_torch_refuses_a_contradicting_toolchain_before_any_container(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "cache" / TORCH_WHEELS
    folder.mkdir(parents=True)
    fake_torch_wheel(folder)
    r = load_recipe(recipe(tmp_path, '"torch==2.14.1"', cuda="12.8", torch=""), facts=FACTS)
    with pytest.raises(RecipeError, match=r"built with CUDA 13\.0"):
        prepare_torch(r, "3.11", PipSettings(), tmp_path / "cache")


def test_prepare_torch_decides_toolkit_label_and_pin(tmp_path: Path) -> None:
    folder = tmp_path / "cache" / TORCH_WHEELS
    folder.mkdir(parents=True)
    fake_torch_wheel(folder)
    r = load_recipe(recipe(tmp_path, '"torch==2.14.1"'), facts=FACTS)
    build = prepare_torch(r, "3.11", PipSettings(), tmp_path / "cache")
    assert isinstance(build, TorchBuild)
    assert build.local_version == "pt2.14.1cu130"
    assert build.pin_requirement == "torch==2.14.1"
    assert build.toolkit_requirement is not None and "nvcc" in build.toolkit_requirement
    tag = torch_image_tag(build, "sha256:aaa")
    assert tag.startswith("archwheel/torch:")
    assert tag == torch_image_tag(build, "sha256:aaa")
    assert tag != torch_image_tag(build, "sha256:bbb")


def test_shipped_torch_scatter_recipe_loads() -> None:
    r = load_recipe(ROOT / "recipes" / "torch-scatter-2.1.2.toml", facts=FACTS)
    assert r.source.project == "torch-scatter" and r.source.project_version == "2.1.2"
    assert r.torch.pin is not None and r.torch.pin.public == "2.14.1"
    assert r.arch.variable == "TORCH_CUDA_ARCH_LIST"


def test_plan_against_a_pinned_torch_reuses_the_torch_image_site_packages(tmp_path: Path) -> None:
    from archwheel.wheelbuild.compile.jobs import GIB, HostResources, choose_jobs
    from archwheel.wheelbuild.planning.plan import BuildOptions, check_arch_list, make_plan
    from archwheel.wheelbuild.sources.source import ResolvedSource

    folder = tmp_path / "cache" / TORCH_WHEELS
    folder.mkdir(parents=True)
    fake_torch_wheel(folder)
    r = load_recipe(recipe(tmp_path, '"setuptools", "torch==2.14.1"'), facts=FACTS)
    build = prepare_torch(r, "3.11", PipSettings(), tmp_path / "cache")
    source = ResolvedSource(r.source, tmp_path, None, False, "d" * 64, ("a",), 1, "test")
    plan = make_plan(
        r,
        check_arch_list(r, "9.0", facts=FACTS),
        BuildOptions(out=tmp_path / "out"),
        source,
        jobs=choose_jobs(HostResources(cpus=2, memory_bytes=8 * GIB), 2.0),
        pip=PipSettings(),
        user=(1000, 1000),
        torch=build,
    )
    assert plan.torch is build
    (requirements,) = [s for p in plan.phases for s in p.steps if s.name == "requirements"]
    shell = requirements.shell()
    site = "/opt/archwheel/venv/lib/python3.11/site-packages"
    pth = "/build/venv/lib/python3.11/site-packages/archwheel-torch.pth"
    assert f"echo {site} > {pth}" in shell
    assert shell.index(pth) < shell.index("pip install")
    rows = dict(plan.summary_rows())
    assert "2.14.1+cu130 (CUDA 13.0)" in rows["torch"]
    assert "+pt2.14.1cu130" in rows["torch"] and "torch==2.14.1" in rows["torch"]
    assert plan.build_env["TORCH_CUDA_ARCH_LIST"] == "9.0"


def test_free_threaded_python_takes_only_its_own_cached_torch_wheel(tmp_path: Path) -> None:
    from archwheel.wheelbuild.recipes.torch_pin import TorchPin, cached_torch_wheel, python_tag

    assert python_tag("3.14t") == "cp314-cp314t"
    assert python_tag("3.14") == "cp314-cp314"
    for name in (
        "torch-2.15.0-cp314-cp314-manylinux_2_28_x86_64.whl",
        "torch-2.15.0-cp314-cp314t-manylinux_2_28_x86_64.whl",
    ):
        (tmp_path / name).write_bytes(b"")
    from packaging.version import Version

    pin = TorchPin("torch==2.15.0", Version("2.15.0"))
    free = cached_torch_wheel(pin, "3.14t", tmp_path)
    gil = cached_torch_wheel(pin, "3.14", tmp_path)
    assert free is not None and free.name.split("-")[3] == "cp314t"
    assert gil is not None and gil.name.split("-")[3] == "cp314"


@pytest.mark.parametrize(
    ("offered", "taken"),
    [
        # a local folder with 2.13.0+cpu (which pip sorts above 2.13.0) and the CUDA 2.13.0
        (("2.13.0+cpu", "2.13.0"), "2.13.0"),
        # an index that serves the CUDA build only with its label
        (("2.13.0+cpu", "2.13.0+cu130"), "2.13.0+cu130"),
    ],
)
def test_an_unlabelled_pin_downloads_the_exact_version_before_any_labelled_one(
    tmp_path: Path, offered: tuple[str, ...], taken: str
) -> None:
    links = tmp_path / "links"
    links.mkdir()
    for version in offered:
        fake_torch_wheel(links, version=version, cuda=None if version.endswith("+cpu") else "13.0")
    (tmp_path / "empty").mkdir()
    pip = PipSettings(index_url=(tmp_path / "empty").as_uri(), find_links=(str(links),))
    pin = find_torch_pin(["torch==2.13.0"], "r")
    assert pin is not None
    lines: list[str] = []
    path = fetch_torch_wheel(
        pin, "3.11", manylinux_platforms((2, 36)), pip, tmp_path / "cache", sink=lines.append
    )
    assert path.name == f"torch-{taken}-cp311-cp311-manylinux_2_28_x86_64.whl"
    asked = [line.rsplit(" ", 1)[1] for line in lines if line.startswith("+ ")]
    assert asked[0] == "torch===2.13.0"
    assert asked == (
        ["torch===2.13.0"] if "+" not in taken else ["torch===2.13.0", "torch==2.13.0"]
    )


def test_with_torch_replaces_the_pin_its_grammar_and_says_so() -> None:
    recipe = load_recipe(ROOT / "recipes" / "libtorch-ops.toml", facts=FACTS)
    assert recipe.torch.pin is not None and recipe.torch.pin.requirement == "torch==2.14.1"
    older = with_torch(recipe, "2.13.0")
    assert older.torch.pin is not None
    assert older.torch.pin.requirement == "torch==2.13.0"
    assert older.torch.pin.replaces == "torch==2.14.1"
    assert "torch==2.13.0" in older.build.requirements
    assert "torch==2.14.1" not in older.build.requirements
    assert older.arch.torch == "2.13.0"  # 2.13's cpp_extension / CMake tables apply
    assert older.torch.local_version == recipe.torch.local_version
    assert with_torch(recipe, "2.14.1") is recipe  # the recipe's own torch: nothing changes


@pytest.mark.parametrize(
    ("recipe_name", "version", "message"),
    [
        ("example", "2.13.0", "is not built against torch"),
        ("libtorch-ops", "2.13.0+cu128", "built with CUDA 12.8"),
        ("libtorch-ops", "2.13.0+cpu", "without CUDA"),
        ("libtorch-ops", ">=2.13", "not a specifier"),
        ("libtorch-ops", "2.x", "not a version"),
    ],
)
def test_with_torch_refuses_what_cannot_build(recipe_name: str, version: str, message: str) -> None:
    recipe = load_recipe(ROOT / "recipes" / f"{recipe_name}.toml", facts=FACTS)
    with pytest.raises(UsageError, match=message) as info:
        with_torch(recipe, version)
    assert exit_code_for(info.value) == 2


def test_recipe_loads_with_names_releases_sorted_once(tmp_path: Path) -> None:
    table = '[torch]\nversion = "2.14.1"\nloads_with = ["2.14.1", "2.12.1", "2.13.0", "2.12.1"]\n'
    r = load_recipe(recipe(tmp_path, "", torch=table), facts=FACTS)
    assert r.torch.loads_with == ("2.12.1", "2.13.0", "2.14.1")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('[">=2.12"]', "is not a torch release such as 2.13.0 (no ranges)"),
        ('["2.13.0+cpu"]', "name public final releases"),
        ('["2.15.0rc1"]', "name public final releases"),
        ("[]", "name at least one torch release"),
        ('"2.13.0"', "list of strings"),
    ],
)
def test_recipe_loads_with_refuses_what_requires_dist_cannot_state(
    tmp_path: Path, value: str, message: str
) -> None:
    table = f'[torch]\nversion = "2.14.1"\nloads_with = {value}\n'
    with pytest.raises(RecipeError) as info:
        load_recipe(recipe(tmp_path, "", torch=table), facts=FACTS)
    assert message in info.value.one_line() and "loads_with" in info.value.one_line()


def test_recipe_loads_with_needs_requires_dist_and_a_torch(tmp_path: Path) -> None:
    table = '[torch]\nversion = "2.14.1"\nrequires_dist = false\nloads_with = ["2.13.0"]\n'
    with pytest.raises(RecipeError, match="needs requires_dist = true"):
        load_recipe(recipe(tmp_path, "", torch=table), facts=FACTS)
    with pytest.raises(RecipeError, match="only valid when the recipe pins torch"):
        load_recipe(
            recipe(tmp_path, '"numpy"', torch='[torch]\nloads_with = ["2.13.0"]\n'), facts=FACTS
        )
