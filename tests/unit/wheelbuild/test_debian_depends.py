"""The Build-Depends of a Debian source package: read from PyTorch 2.6.0's real control file
(debian/control.cuda of pytorch 2.6.0+dfsg-7, kept in tests/support/data), Debian policy 7.1's
grammar (alternatives, architecture and profile lists), hostile names refused, and the recipe's
keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from archwheel.errors import RecipeError
from archwheel.facts.catalog import load_facts
from archwheel.wheelbuild.recipes.recipe import load_recipe
from archwheel.wheelbuild.sources.debian_depends import (
    parse_build_depends,
    read_build_depends,
    with_build_depends,
)

DATA = Path(__file__).resolve().parents[2] / "support" / "data" / "pytorch-2.6.0-cuda"
DEBIAN = 'debian = "pytorch"\nversion = "1-1"'
CUDA_TOOLKIT = ("nvidia-cuda-toolkit", "nvidia-cuda-toolkit-gcc", "nvidia-cudnn", "libcub-dev")


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "debian").mkdir(parents=True)
    (tmp_path / "debian" / "control.cuda").write_bytes((DATA / "control.cuda").read_bytes())
    return tmp_path


def test_pytorchs_cuda_build_depends_are_read_for_amd64(tmp_path: Path) -> None:
    depends = read_build_depends(_tree(tmp_path), "debian/control.cuda", exclude=CUDA_TOOLKIT)
    packages = depends.packages
    # the file lists 58 relations; four left out by the recipe, none by architecture on amd64
    assert len(packages) == 54 and depends.not_for_arch == ()
    assert packages[:3] == ("cmake", "debhelper-compat", "dh-exec")
    for wanted in ("libdnnl-dev", "libgloo-cuda-dev", "libnccl-dev", "libxnnpack-dev", "lld"):
        assert wanted in packages
    assert not set(CUDA_TOOLKIT) & set(packages)
    assert depends.excluded == CUDA_TOOLKIT
    assert ("libdnnl-dev", "(>= 3.6.0~)") in depends.constraints
    assert ("debhelper-compat", "(= 13)") in depends.constraints
    assert depends.row() == (
        "54 packages from the source's debian/control.cuda (left out by the recipe: "
        + ", ".join(CUDA_TOOLKIT)
        + ")"
    )


def test_architecture_lists_decide_for_the_images_architecture(tmp_path: Path) -> None:
    on_s390x = read_build_depends(_tree(tmp_path), "debian/control.cuda", arch="s390x")
    # control.cuda restricts these to [amd64 arm64 ppc64el] or [amd64 arm64]
    left_out = {relation.split()[0] for relation in on_s390x.not_for_arch}
    assert left_out == {"libdnnl-dev", "libgloo-cuda-dev", "libideep-dev", "libxnnpack-dev"}
    assert not left_out & set(on_s390x.packages)


@pytest.mark.parametrize(
    ("field", "arch", "expected"),
    [
        ("aa [amd64], bb [!amd64], cc [!s390x !ppc64el], dd [linux-any]", "amd64",
         ("aa", "cc", "dd")),
        ("aa [amd64], bb [!amd64], cc [!s390x !ppc64el], dd [any-arm64]", "arm64",
         ("bb", "cc", "dd")),
        # alternatives: the first that applies, as Debian's build daemons take them
        ("gcc-15 [s390x] | gcc-14, foo | bar", "amd64", ("gcc-14", "foo")),
        # build profiles: none active, so <!nocheck> holds and <nocheck> does not
        ("xx <!nocheck>, yy <nocheck>, zz <nocheck> <!cross>, ww <!nocheck !nodoc>", "amd64",
         ("xx", "zz", "ww")),
        # :any and :native qualifiers dropped; version constraints kept aside
        ("python3:any (>= 3.11), perl:native", "amd64", ("python3", "perl")),
    ],
)  # fmt: skip
def test_policy_grammar(field: str, arch: str, expected: tuple[str, ...]) -> None:
    text = f"Source: demo\nBuild-Depends: {field}\n\nPackage: demo\nDepends: ignored\n"
    assert parse_build_depends(text, "debian/control", arch=arch).packages == expected


def test_fields_continuations_comments_and_other_paragraphs() -> None:
    text = (
        "# a comment before\nSource: demo\nbuild-depends: aa,\n bb (>= 1),\n# inside\n cc\n"
        "Build-Depends-Indep: dd\nBUILD-DEPENDS-ARCH: aa, ee\n\nPackage: demo\nBuild-Depends: zz\n"
    )
    depends = parse_build_depends(text, "debian/control")
    assert depends.packages == ("aa", "bb", "cc", "ee", "dd")  # Build-Depends, -Arch, -Indep
    assert depends.constraints == (("bb", "(>= 1)"),)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Source: x\nBuild-Depends: good, $(touch /tmp/pwned)\n", "not a Debian package name"),
        ("Source: x\nBuild-Depends: good, Upper\n", "not a Debian package name"),
        ("Source: x\nBuild-Depends: aa; rm -rf /\n", "cannot read"),
        ("Source: x\nBuild-Depends: aa (>= 1\n", "cannot read"),
        ("Source: x\nMaintainer: m\n", "declares no Build-Depends"),
    ],
)
def test_what_apt_must_never_see_is_refused_in_one_line(text: str, message: str) -> None:
    with pytest.raises(RecipeError, match=message) as caught:
        parse_build_depends(text, "debian/control")
    assert "\n" not in caught.value.one_line()


def test_an_exclusion_the_file_does_not_list_is_refused() -> None:
    with pytest.raises(RecipeError, match="names nvidia-cudn, which debian/control does not"):
        parse_build_depends(
            "Source: x\nBuild-Depends: nvidia-cudnn\n", "debian/control", exclude=("nvidia-cudn",)
        )


def test_a_missing_huge_or_escaping_control_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="has no readable debian/control"):
        read_build_depends(tmp_path, "debian/control")
    (tmp_path / "debian").mkdir()
    (tmp_path / "debian" / "control").write_bytes(b"Source: x\n" + b"#" * (1 << 21))
    with pytest.raises(RecipeError, match="over 1048576 bytes"):
        read_build_depends(tmp_path, "debian/control")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.write_text("Source: x\nBuild-Depends: a\n")
    (tmp_path / "debian" / "link").symlink_to(outside)
    with pytest.raises(RecipeError, match="leads out of the source"):
        read_build_depends(tmp_path, "debian/link")


def _recipe(tmp_path: Path, toolchain: str, source: str = DEBIAN) -> Path:
    path = tmp_path / "r.toml"
    path.write_text(
        f'[source]\n{source}\n[toolchain]\ncuda = "13.0"\nbase_image = "archwheel/debian:trixie"\n'
        f'source = "pypi"\n{toolchain}\n[arch]\ndefault = "8.0"\n[build]\ncommand = "true"\n'
    )
    return path


def test_the_recipe_keys(tmp_path: Path) -> None:
    facts = load_facts()
    recipe = load_recipe(
        _recipe(tmp_path, 'build_depends = "debian/control.cuda"\nbuild_depends_exclude = '
                '["nvidia-cudnn9"]\nsystem_packages = ["cmake", "g++-15"]'),
        facts,
    )  # fmt: skip
    assert recipe.toolchain.build_depends == "debian/control.cuda"
    tree = _tree(tmp_path / "src")
    with pytest.raises(RecipeError, match="does not ask for"):  # not in the file: refused
        with_build_depends(recipe, tree)
    recipe = load_recipe(
        _recipe(tmp_path, 'build_depends = "debian/control.cuda"\nbuild_depends_exclude = '
                f"{list(CUDA_TOOLKIT)!r}\nsystem_packages = [\"cmake\", \"g++-15\"]"),
        facts,
    )  # fmt: skip
    changed, depends = with_build_depends(recipe, tree)
    assert depends is not None
    packages = changed.toolchain.system_packages
    assert packages[:2] == ("cmake", "g++-15") and packages.count("cmake") == 1
    assert len(packages) == 1 + len(depends.packages)
    untouched, none = with_build_depends(load_recipe(_recipe(tmp_path, ""), facts), tree)
    assert none is None and untouched.toolchain.system_packages == ()


@pytest.mark.parametrize(
    ("toolchain", "source", "message"),
    [
        ('build_depends = "debian/control"', 'path = "."', "only valid with a \\[source\\] debian"),
        ('build_depends = "../control"', None, "not a file inside the source"),
        ('build_depends = "/etc/control"', None, "not a file inside the source"),
        ('build_depends_exclude = ["x"]', None, "only valid with build_depends"),
        ('build_depends = "debian/control"\nbuild_depends_exclude = ["A b"]', None,
         "not a Debian package name"),
        ('apt_components = ["contrib", "non free"]', None, "not an archive component"),
        ('stand_ins = ["nvidia-cudnn; true"]', None, "not a Debian package name"),
    ],
)  # fmt: skip
def test_bad_recipe_keys_are_refused(
    tmp_path: Path, toolchain: str, source: str | None, message: str
) -> None:
    text = _recipe(tmp_path, toolchain) if source is None else _recipe(tmp_path, toolchain, source)
    with pytest.raises(RecipeError, match=message):
        load_recipe(text, load_facts())


def test_apt_components_and_stand_ins_reach_the_builder_image(tmp_path: Path) -> None:
    from archwheel.wheelbuild.images.builder_image import BuilderImageSpec

    recipe = load_recipe(
        _recipe(tmp_path, 'apt_components = ["contrib", "non-free"]'), load_facts()
    )
    assert recipe.toolchain.apt_components == ("contrib", "non-free")
    spec = BuilderImageSpec(recipe.toolchain.base_image, recipe.toolchain, "3.13", "f" * 64)
    assert spec.build_args()["ARCHWHEEL_APT_COMPONENTS"] == "contrib non-free"
    plain = load_recipe(_recipe(tmp_path, ""), load_facts())
    other = BuilderImageSpec(plain.toolchain.base_image, plain.toolchain, "3.13", "f" * 64)
    assert other.build_args()["ARCHWHEEL_APT_COMPONENTS"] == ""
    assert spec.tag("sha256:" + "0" * 64) != other.tag("sha256:" + "0" * 64)
