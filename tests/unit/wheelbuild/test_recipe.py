"""Recipes: the shipped ones load and mirror the facts; broken ones fail naming file and key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from archwheel.errors import RecipeError, UsageError
from archwheel.facts.arch import ArchList
from archwheel.facts.catalog import load_facts
from archwheel.facts.pytorch_official import load_official
from archwheel.facts.versions import CudaVersion
from archwheel.wheelbuild.recipes.recipe import load_recipe
from archwheel.wheelbuild.recipes.recipe_lookup import find_recipe, recipe_files
from tests.support.paths import ROOT

FACTS = load_facts()

RECIPES = ROOT / "recipes"

VALID = """\
schema_version = 1

[recipe]
name = "demo"
kind = "extension"
version = "1.0"

[source]
path = "src"

[toolchain]
cuda = "13.0"
base_image = "archwheel/debian:bookworm"
source = "pypi"

[python]
versions = ["3.11"]

[arch]
variable = "CUDA_GENCODE_FLAGS"
format = "gencode"
default = "8.0;9.0"

[build]
command = "make wheel"

[build.env]
NVCC_LAUNCHER = "ccache"
"""


def write(tmp_path: Path, text: str, name: str = "demo.toml") -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def broken(tmp_path: Path, old: str, new: str) -> Path:
    assert old in VALID, old
    return write(tmp_path, VALID.replace(old, new))


# -- the shipped recipes ----------------------------------------------------------------------


def test_every_shipped_recipe_loads() -> None:
    files = recipe_files([RECIPES])
    assert {f.stem for f in files} >= {
        "example",
        "pytorch-2.14.1-cu130",
        "pytorch-2.14.1-cu128",
        "pytorch-2.15.0-cu132",
    }
    for path in files:
        recipe = load_recipe(path, facts=FACTS)
        assert recipe.name == path.stem
        assert len(recipe.sha256) == 64


def test_example_recipe_builds_a_local_extension_without_network() -> None:
    recipe = load_recipe(RECIPES / "example.toml", facts=FACTS)
    assert recipe.kind == "extension"
    assert recipe.source.kind == "path"
    assert recipe.source.path == ROOT / "examples" / "cuda-kernels"
    assert recipe.toolchain.source == "pypi"
    assert recipe.toolchain.cuda == CudaVersion(13, 0)
    assert all(p.endswith("==13.0.*") for p in recipe.toolchain.pypi_packages)
    assert recipe.build.network is False
    assert recipe.build.requirements == ()
    assert str(recipe.arch.default) == "8.0;9.0"
    assert recipe.smoke_snippet is not None
    assert "import archwheel_example" in recipe.smoke_snippet


@pytest.mark.parametrize(
    ("name", "tag"), [("pytorch-2.14.1-cu130", "cu130"), ("pytorch-2.14.1-cu128", "cu128")]
)
def test_pytorch_recipes_mirror_the_official_build(name: str, tag: str) -> None:
    facts = load_facts()
    recipe = load_recipe(RECIPES / f"{name}.toml", facts=FACTS)
    assert recipe.kind == "pytorch"
    assert recipe.toolchain.cuda is not None
    assert recipe.toolchain.cuda.tag == tag
    assert recipe.toolchain.source == "image"  # the official builder image holds the toolkit
    assert (
        recipe.toolchain.base_image == f"pytorch/manylinux2_28-builder:cuda{recipe.toolchain.cuda}"
    )
    # The recipe follows the pipeline (cu130: 12.0+PTX, which the released wheel dropped).
    assert recipe.arch.default == ArchList.parse(facts.pipeline_arch_list(tag))
    assert recipe.arch.variable == "TORCH_CUDA_ARCH_LIST"
    env = recipe.build.env
    assert env["USE_CUDA"] == "1"
    assert env["BUILD_TEST"] == "0"
    assert env["TORCH_NVCC_FLAGS"].startswith("-Xfatbin -compress-all")
    assert "-compress-mode=size" in env["TORCH_NVCC_FLAGS"]
    assert env["PYTORCH_BUILD_VERSION"] == f"{recipe.version}+{tag}"
    assert recipe.build.jobs_variable == "MAX_JOBS"
    assert recipe.build.memory_per_job_gib >= 4


def test_the_2_15_0_cu132_recipe_is_the_pypi_build() -> None:
    facts = load_facts()
    recipe = load_recipe(RECIPES / "pytorch-2.15.0-cu132.toml", facts=FACTS)
    assert (recipe.kind, recipe.version) == ("pytorch", "2.15.0")
    assert recipe.toolchain.cuda == CudaVersion(13, 2)
    assert recipe.toolchain.base_image == "pytorch/manylinux2_28-builder:cuda13.2"
    # nvcc from the components of the cuda-toolkit the official wheel pins (13.2.2 = 13.2.86)
    assert recipe.toolchain.source == "pypi"
    official = load_official().variant("2.15.0", "13.2")
    assert official is not None
    (pin,) = [r for r in official.requirements if r.startswith("cuda-toolkit[")]
    assert "==13.2.2;" in pin
    packages = recipe.toolchain.pypi_packages
    assert {"nvidia-cuda-nvcc==13.2.86.*", "nvidia-cuda-runtime==13.2.86.*"} <= set(packages)
    # the arch list the release wheel was built with (the pipeline would add +PTX)
    assert recipe.arch.default == ArchList.parse(facts.official_arch_lists["cu132"])
    assert recipe.arch.default != ArchList.parse(facts.pipeline_arch_list("cu132"))
    assert recipe.build.env["PYTORCH_BUILD_VERSION"] == "2.15.0+cu132"
    assert recipe.build.env["USE_STATIC_CUDNN"] == "0"
    assert recipe.smoke_snippet is not None
    assert "torch.backends.cudnn.is_available()" in recipe.smoke_snippet
    assert '!= "LD_LIBRARY_PATH"' in recipe.smoke_snippet


def test_default_recipe_is_the_newest_pytorch() -> None:
    """The newest PyTorch recipe that can build: 2.15.0 with CUDA 13.2 (its cu130 variant has
    no pin table yet)."""
    recipe = find_recipe(None, [RECIPES], facts=FACTS)
    assert recipe.kind == "pytorch"
    official = load_official()
    buildable = [
        r
        for r in (load_recipe(f, facts=FACTS) for f in recipe_files([RECIPES]))
        if r.repair is None or official.variant(r.version, str(r.toolchain.cuda)) is not None
    ]
    newest = max(buildable, key=lambda r: (r.kind == "pytorch", r.sort_key()))
    assert recipe.name == newest.name == "pytorch-2.15.0-cu132"
    assert find_recipe("pytorch-2.15.0-cu130", [RECIPES], facts=FACTS).version == "2.15.0"


def test_default_recipe_prefers_the_higher_version_then_cuda(tmp_path: Path) -> None:
    def pytorch(name: str, version: str, cuda: str) -> None:
        text = VALID.replace('kind = "extension"', 'kind = "pytorch"')
        text = text.replace('version = "1.0"', f'version = "{version}"')
        text = text.replace('name = "demo"', f'name = "{name}"')
        if cuda != "13.0":
            text = text.replace('cuda = "13.0"', f'cuda = "{cuda}"').replace(
                'source = "pypi"', 'source = "image"'
            )
        write(tmp_path, text, f"{name}.toml")

    pytorch("old", "2.9.1", "13.0")
    pytorch("new-128", "2.10.0", "12.8")
    pytorch("new-130", "2.10.0", "13.0")
    write(tmp_path, VALID.replace('version = "1.0"', 'version = "99"'), "ext.toml")
    assert find_recipe(None, [tmp_path], facts=FACTS).name == "new-130"


def test_recipe_by_name_or_path() -> None:
    assert find_recipe("example", [RECIPES], facts=FACTS).name == "example"
    assert find_recipe(str(RECIPES / "example.toml"), [], facts=FACTS).name == "example"


def test_unknown_recipe_name_suggests_the_closest() -> None:
    with pytest.raises(UsageError, match="unknown recipe 'exampel'") as info:
        find_recipe("exampel", [RECIPES], facts=FACTS)
    assert "did you mean 'example'" in info.value.one_line()


# -- validation --------------------------------------------------------------------------------


def test_valid_recipe(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, VALID), facts=FACTS)
    assert recipe.arch.render(recipe.arch.default) == (
        "-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90"
    )
    assert recipe.build.env == {"NVCC_LAUNCHER": "ccache"}
    assert recipe.source.path == tmp_path / "src"


@pytest.mark.parametrize(
    ("old", "new", "key", "message"),
    [
        ('command = "make wheel"', 'comand = "make wheel"', "[build] comand",
         "did you mean 'command'"),
        ("[build]\n", "[biuld]\n", "biuld", "did you mean 'build'"),
        ('cuda = "13.0"', "cuda = 13", "[toolchain] cuda", "must be a string"),
        ('cuda = "13.0"', 'cuda = "11.2"', "[toolchain] cuda", "no facts recorded for CUDA 11.2"),
        ('cuda = "13.0"', 'cuda = "12.8"', "[toolchain] source",
         "PyPI has no complete nvcc for CUDA 12.8"),
        ('source = "pypi"', 'source = "conda"', "[toolchain] source", "not a toolchain source"),
        ('default = "8.0;9.0"', 'default = "7.0;8.0"', "[arch] default",
         "Volta) was removed in CUDA 13.0"),
        ('default = "8.0;9.0"', 'default = "8.0;9.9"', "[arch] default", "invalid arch '9.9'"),
        ('format = "gencode"', 'format = "bazel"', "[arch] format", "not an arch list format"),
        ('variable = "CUDA_GENCODE_FLAGS"', 'variable = "PATH"', "[arch] variable",
         "cannot be used"),
        ('NVCC_LAUNCHER = "ccache"', 'PATH = "/bin"', "[build] env.PATH", "set by archwheel"),
        ('NVCC_LAUNCHER = "ccache"', 'CUDA_GENCODE_FLAGS = "x"', "[build] env.CUDA_GENCODE_FLAGS",
         "set by archwheel"),
        ('NVCC_LAUNCHER = "ccache"', "NVCC_LAUNCHER = 1", "[build] env.NVCC_LAUNCHER",
         "must be a string"),
        ('versions = ["3.11"]', 'versions = ["three"]', "[python] versions",
         "not a Python version"),
        ('versions = ["3.11"]', "versions = []", "[python] versions", "at least one"),
        ('kind = "extension"', 'kind = "conda"', "[recipe] kind", "not a recipe kind"),
        ('path = "src"', 'path = "missing"', "[source] path", "is not a folder"),
        ('path = "src"', 'git = "https://example.org/x.git"', "[source] ref", "missing"),
        ('path = "src"', 'sdist = "https://example.org/x.tar.gz"', "[source] sha256", "missing"),
        ('path = "src"', 'sdist = "https://example.org/x.tar.gz"\nsha256 = "abc"',
         "[source] sha256", "64 hexadecimal"),
        ('path = "src"', 'path = "src"\ngit = "https://x/y.git"', "[source] git",
         "exactly one of path, git or sdist"),
        ("schema_version = 1", "schema_version = 9", "schema_version", "not supported"),
        ('command = "make wheel"', 'command = "make wheel"\nnetwork = "yes"', "[build] network",
         "true or false"),
        ('command = "make wheel"', 'command = "make"\nrequirements = ["--index-url=x"]',
         "[build] requirements", "pip options"),
    ],
)  # fmt: skip
def test_broken_recipe_names_file_and_key(
    tmp_path: Path, old: str, new: str, key: str, message: str
) -> None:
    path = broken(tmp_path, old, new)
    with pytest.raises(RecipeError) as info:
        load_recipe(path, facts=FACTS)
    text = info.value.one_line()
    assert str(path) in text
    assert key in text
    assert message in text


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('NVCC_LAUNCHER = "ccache"', '"NVCC_LAUNCHER\\n" = "ccache"',
         "is not a valid environment variable name"),
        ('base_image = "archwheel/debian:bookworm"',
         'base_image = "archwheel/debian:bookworm\\n"', "is not an image reference"),
        ('path = "src"', 'sdist = "https://example.org/x.tar.gz"\nsha256 = "' + "a" * 64 + '\\n"',
         "64 hexadecimal"),
        ('variable = "CUDA_GENCODE_FLAGS"', 'variable = "CUDA_GENCODE_FLAGS\\n"', "cannot be used"),
        ('default = "8.0;9.0"', 'default = "8.0;sm_90\\n;9.0"', ""),
    ],
)  # fmt: skip
def test_a_value_with_a_trailing_newline_is_not_the_value(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    """Validation patterns were anchored with '$', which also matches before a final newline:
    an env name "X\\n", an image "name:tag\\n" or a sha256 with a newline passed as valid and
    reached docker's command line and the cache's paths. Each is refused now (an arch list
    splits on whitespace, so there the newline only separates items)."""
    path = broken(tmp_path, old, new)
    if not message:
        assert str(load_recipe(path, facts=FACTS).arch.default) == "8.0;9.0"
        return
    with pytest.raises(RecipeError) as info:
        load_recipe(path, facts=FACTS)
    assert message in info.value.one_line()


def test_missing_table(tmp_path: Path) -> None:
    path = write(tmp_path, VALID[: VALID.index("[build]")])
    with pytest.raises(RecipeError, match=r"demo.toml: build: missing table"):
        load_recipe(path, facts=FACTS)


def test_torch_format_refuses_family_specific_targets(tmp_path: Path) -> None:
    path = broken(tmp_path, 'format = "gencode"', 'format = "torch"')
    path.write_text(path.read_text().replace('default = "8.0;9.0"', 'default = "10.0f"'))
    with pytest.raises(
        RecipeError,
        match=r"\[arch\] default: cpp-extension \(.*\) cannot take 10.0f: family-specific",
    ):
        load_recipe(path, facts=FACTS)


def test_smoke_snippet_must_be_python(tmp_path: Path) -> None:
    path = write(tmp_path, VALID + '\n[smoke]\nsnippet = "import ("\n')
    with pytest.raises(RecipeError, match=r"\[smoke\] snippet: not valid Python"):
        load_recipe(path, facts=FACTS)


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[recipe\nname=")
    with pytest.raises(RecipeError, match=r"demo.toml: not TOML"):
        load_recipe(path, facts=FACTS)


def test_missing_and_huge_files(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="does not exist"):
        load_recipe(tmp_path / "nope.toml", facts=FACTS)
    huge = tmp_path / "huge.toml"
    huge.write_bytes(b"#" * (2 << 20))
    with pytest.raises(RecipeError, match="not a recipe"):
        load_recipe(huge, facts=FACTS)


def test_git_and_sdist_sources(tmp_path: Path) -> None:
    git = load_recipe(
        broken(tmp_path, 'path = "src"', 'git = "https://x.org/p.git"\nref = "v1"'), facts=FACTS
    )
    assert (git.source.kind, git.source.git_url, git.source.ref) == (
        "git",
        "https://x.org/p.git",
        "v1",
    )
    sdist_file = tmp_path / "p-1.0.tar.gz"
    sdist_file.write_bytes(b"not really")
    digest = "ab" * 32
    sdist = load_recipe(
        broken(tmp_path, 'path = "src"', f'sdist = "p-1.0.tar.gz"\nsha256 = "{digest}"'),
        facts=FACTS,
    )
    assert sdist.source.kind == "sdist"
    assert sdist.source.sdist == str(sdist_file)
    assert sdist.source.sha256 == digest
